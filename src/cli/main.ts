#!/usr/bin/env node
import { buildProgram } from './program.js';

buildProgram()
  .parseAsync(process.argv)
  .catch((err: unknown) => {
    process.stderr.write(`factoryd: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(process.exitCode && process.exitCode !== 0 ? process.exitCode : 1);
  });
