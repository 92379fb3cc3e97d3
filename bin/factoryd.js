#!/usr/bin/env node
// The installed `factoryd` binary: the compiled CLI (build with `npm run build`).
import '../dist/cli/main.js';
