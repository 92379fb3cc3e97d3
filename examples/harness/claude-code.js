#!/usr/bin/env node
// A harness that runs Claude Code: HARNESS_COMMAND="node examples/harness/claude-code.js".
// The prompt (and queued follow-ups) start `claude -p … --output-format stream-json --verbose`;
// its events are translated by claude-stream.js. A follow-up after the first turn resumes the same
// Claude session (`--resume`); `cancel` stops it. CLAUDE_COMMAND overrides the binary (`claude`).
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { translate } from './claude-stream.js';

const emit = (e) => process.stdout.write(`${JSON.stringify(e)}\n`);
const claude = process.env.CLAUDE_COMMAND ?? 'claude';
let session;
let current;
let failed = false;
const queue = [];
let busy = false;
let inputClosed = false;

function turn(text) {
  return new Promise((resolve) => {
    const args = ['-p', text, '--output-format', 'stream-json', '--verbose'];
    if (session) args.push('--resume', session);
    if (process.env.FACTORYD_MODEL_ID) args.push('--model', process.env.FACTORYD_MODEL_ID);
    current = spawn(claude, args, {
      stdio: ['ignore', 'pipe', 'inherit'],
      shell: !!process.env.CLAUDE_COMMAND,
    });
    createInterface({ input: current.stdout }).on('line', (line) => {
      let event;
      try {
        event = JSON.parse(line);
      } catch {
        process.stdout.write(`${line}\n`); // not JSON: transcript
        return;
      }
      if (event.session_id) session = event.session_id;
      for (const out of translate(event)) {
        // Results are per turn; the run's end is decided when the input is done.
        if (out.type === 'result') failed = out.status === 'failed';
        emit(out);
      }
    });
    current.on('exit', (code) => {
      if (code !== 0) failed = true;
      resolve();
    });
  });
}

async function drain() {
  if (busy) return;
  busy = true;
  while (queue.length) await turn(queue.shift());
  busy = false;
  // One prompt, then exit: follow-ups after the end continue the run as a new execution.
  if (!queue.length) process.exit(failed ? 1 : 0);
}

createInterface({ input: process.stdin })
  .on('line', (line) => {
    let msg;
    try {
      msg = JSON.parse(line);
    } catch {
      return;
    }
    if (msg.type === 'cancel') {
      current?.kill('SIGTERM');
      process.exit(130);
    }
    if (msg.type === 'prompt') {
      const parts = [msg.base_prompt, msg.prompt, ...(msg.followups ?? [])].filter(Boolean);
      if (msg.history?.length)
        parts.unshift(
          `Earlier in this conversation:\n${msg.history.map((h) => `${h.role}: ${h.text}`).join('\n')}`,
        );
      queue.push(parts.join('\n\n'));
    } else if (msg.type === 'followup') queue.push(msg.message);
    void drain();
  })
  .on('close', () => {
    inputClosed = true;
    if (!busy) process.exit(failed ? 1 : 0);
  });
void inputClosed;
