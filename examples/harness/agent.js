#!/usr/bin/env node
// The example agent harness: a small, deterministic agent that speaks the factoryd harness protocol
// (docs/workers.md). No model: it reads the prompt and the workspace, follows a few directives, and
// writes a summary. Plain Node, no dependencies.
//
// Directives (one per line, in the prompt or a follow-up):
//   /skill NAME        load a skill the team manages (factory-skills/*/skills/NAME/SKILL.md)
//   /bundled-skill ID  load a bundled skill by id
//   /ask QUESTION      ask for input: the run turns BLOCKED until a follow-up answers
//   /wait SECONDS      work for a while (a child `sleep`; cancel stops it, interrupt ends the turn)
//   /fail MESSAGE      fail: the message on stderr, exit status 2
// "use skill NAME" / "load skill NAME" in prose also loads a skill.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const workspace = process.cwd();
const emit = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);
const say = (text) => emit({ type: 'message', role: 'assistant', text });

const inbox = [];
let wake;
let ended = false;
let child;
/** An interrupt came: the turn at work stops, and the run waits (BLOCKED) for a follow-up. */
let interrupted = false;
createInterface({ input: process.stdin })
  .on('line', (line) => {
    let msg;
    try {
      msg = JSON.parse(line);
    } catch {
      return;
    }
    if (msg.type === 'cancel') {
      say('Cancelled; stopping.');
      child?.kill('SIGTERM');
      process.exit(130);
    }
    if (msg.type === 'interrupt') {
      interrupted = true;
      child?.kill('SIGTERM');
      return;
    }
    inbox.push(msg);
    wake?.();
  })
  .on('close', () => {
    // The worker is gone (or has nothing more to say): stop waiting and stop working.
    ended = true;
    child?.kill('SIGTERM');
    wake?.();
  });

/** The next input line (prompt or follow-up); undefined when stdin closed. */
async function next() {
  while (!inbox.length) {
    if (ended) return undefined;
    await new Promise((r) => (wake = r));
  }
  return inbox.shift();
}

const notes = { skills: [], answers: [], followups: [], payload: undefined, handoff: [] };

async function main() {
  const first = await next();
  if (!first || first.type !== 'prompt') {
    process.stderr.write('expected a prompt first\n');
    process.exit(1);
  }
  // A continued run has done the prompt's work already: it only acts on the new follow-ups.
  const continued = first.history?.length > 0;
  const title = first.prompt.trim().split('\n')[0] || '(no prompt)';
  if (continued) say(`Continuing our conversation (${first.history.length} earlier messages).`);
  else say(`Working on: ${title}`);
  if (first.base_prompt)
    say(`Following my instructions (${first.base_prompt.split('\n').length} lines of base prompt).`);
  for (const name of first.attachments ?? []) {
    // handoff/: what the run's previous execution left (docs/workers.md, "Handoff files")
    if (name.startsWith('handoff/')) noteHandoff(name);
    else if (name.endsWith('.json')) readPayload(name);
  }
  if (!continued) await work(first.prompt);
  if (first.base_prompt && !continued) await work(first.base_prompt, { directivesOnly: true });
  for (const f of first.followups ?? []) {
    notes.followups.push(f);
    say(`Noted your follow-up: ${f}`);
    await work(f);
  }
  // Follow-ups that came in while working.
  while (inbox.length) {
    const msg = inbox.shift();
    if (msg.type === 'followup') {
      notes.followups.push(msg.message);
      say(`Noted your follow-up: ${msg.message}`);
      await work(msg.message);
    }
  }
  finish(first.prompt);
}

function noteHandoff(name) {
  try {
    const size = statSync(join(workspace, name)).size;
    notes.handoff.push({ name, size });
    say(`Found ${name} (${count(size, 'byte')}), left by the previous execution.`);
  } catch (err) {
    say(`Could not read ${name}: ${err.message}`);
  }
}

function readPayload(name) {
  try {
    const payload = JSON.parse(readFileSync(join(workspace, name), 'utf8'));
    const facts = describe(payload);
    notes.payload = { file: name, facts };
    say(`Read ${name}: ${facts.join('; ') || 'an empty document'}.`);
  } catch (err) {
    say(`Could not read ${name}: ${err.message}`);
  }
}

/** A few facts about a webhook payload: its shape and the fields senders usually carry. */
function describe(p) {
  if (p === null || typeof p !== 'object') return [`a JSON ${p === null ? 'null' : typeof p}`];
  if (Array.isArray(p)) return [`a list of ${p.length} items`];
  const facts = [`keys: ${Object.keys(p).slice(0, 10).join(', ')}`];
  if (typeof p.action === 'string') facts.push(`action ${p.action}`);
  if (p.repository?.full_name) facts.push(`repository ${p.repository.full_name}`);
  const item = p.issue ?? p.pull_request;
  if (item?.title) facts.push(`${p.issue ? 'issue' : 'pull request'} "${item.title}"`);
  if (p.sender?.login) facts.push(`sender ${p.sender.login}`);
  if (typeof p.type === 'string') facts.push(`type ${p.type}`);
  return facts;
}

async function work(text, { directivesOnly = false, nested = false } = {}) {
  for (const raw of text.split('\n')) {
    if (interrupted) break;
    const line = raw.trim();
    const [cmd, ...rest] = line.split(/\s+/);
    const arg = rest.join(' ');
    if (cmd === '/skill') loadSkill(arg);
    else if (cmd === '/bundled-skill') {
      emit({ type: 'action', kind: 'read_skill', input: { bundled_skill_id: arg } });
      notes.skills.push(`bundled:${arg}`);
    } else if (cmd === '/ask') await ask(arg);
    else if (cmd === '/wait') await sleep(Number(arg) || 1);
    else if (cmd === '/fail') {
      process.stderr.write(`error: ${arg || 'asked to fail'}\n`);
      process.exit(2);
    } else if (!directivesOnly) {
      for (const m of line.matchAll(/\b(?:use|load) skill ([A-Za-z0-9_-]+)/gi)) loadSkill(m[1]);
    }
  }
  if (interrupted && !nested) await pause();
}

/** The turn was interrupted: say so, wait for a follow-up, and work on it. */
async function pause() {
  interrupted = false;
  process.stderr.write('interrupted: the rest of this turn is dropped\n');
  emit({ type: 'status', state: 'BLOCKED', message: 'interrupted; send a follow-up to continue' });
  const msg = await next();
  if (!msg) process.exit(1);
  if (msg.type !== 'followup') return;
  notes.followups.push(msg.message);
  say(`Resuming with your follow-up: ${msg.message}`);
  await work(msg.message);
}

function loadSkill(name) {
  const root = join(workspace, 'factory-skills');
  const factories = existsSync(root) ? readdirSync(root) : [];
  for (const factory of factories) {
    const rel = join('factory-skills', factory, 'skills', name, 'SKILL.md');
    if (existsSync(join(workspace, rel))) {
      emit({ type: 'action', kind: 'read_skill', input: { skill_path: rel } });
      const body = readFileSync(join(workspace, rel), 'utf8');
      notes.skills.push(name);
      say(`Loaded skill ${name} (${body.split('\n').length} lines).`);
      return;
    }
  }
  say(`There is no skill named ${name} in this team's factories.`);
}

async function ask(question) {
  emit({ type: 'status', state: 'BLOCKED', message: question || 'I need more input to continue' });
  const msg = await next();
  if (!msg) {
    process.stderr.write('no answer: the input closed while waiting\n');
    process.exit(1);
  }
  const answer = msg.type === 'followup' ? msg.message : JSON.stringify(msg);
  notes.answers.push({ question, answer });
  say(`Thanks, continuing with: ${answer}`);
  await work(answer, { nested: true });
}

function sleep(seconds) {
  return new Promise((resolve) => {
    child = spawn('sleep', [String(seconds)], { stdio: 'ignore' });
    child.on('exit', () => resolve());
  });
}

function finish(prompt) {
  const words = prompt.split(/\s+/).filter(Boolean).length;
  const lines = ['# Summary', '', `Prompt: ${prompt.trim().split('\n')[0]}`, `Words in prompt: ${words}`];
  if (notes.payload) lines.push(`Payload (${notes.payload.file}): ${notes.payload.facts.join('; ')}`);
  if (notes.skills.length) lines.push(`Skills loaded: ${notes.skills.join(', ')}`);
  for (const a of notes.answers) lines.push(`Asked "${a.question}", answered "${a.answer}"`);
  for (const f of notes.followups) lines.push(`Follow-up: ${f}`);
  for (const h of notes.handoff) lines.push(`Handoff file: ${h.name} (${count(h.size, 'byte')})`);
  const text = `${lines.join('\n')}\n`;
  writeFileSync(join(workspace, 'summary.md'), text);
  // A FILE artifact (docs/workers.md, "Artifacts"), left as a handoff: a follow-up's next execution
  // finds it as handoff/summary.md.
  emit({
    type: 'artifact',
    artifact_type: 'FILE',
    filepath: 'summary.md',
    mime_type: 'text/markdown',
    data: Buffer.from(text).toString('base64'),
    handoff: true,
  });
  // Says what this example did, which is record, not analyse: it is not a model.
  const recorded = [`the prompt's first line and word count (${words})`];
  if (notes.payload) recorded.push(`${count(notes.payload.facts.length, 'fact')} from ${notes.payload.file}`);
  if (notes.skills.length) recorded.push(`${count(notes.skills.length, 'skill')} loaded`);
  if (notes.answers.length) recorded.push(count(notes.answers.length, 'answer'));
  if (notes.followups.length) recorded.push(count(notes.followups.length, 'follow-up'));
  if (notes.handoff.length)
    recorded.push(`${count(notes.handoff.length, 'handoff file')} found (names and sizes)`);
  emit({
    type: 'result',
    status: 'succeeded',
    message: `Done (the example harness, no model): summary.md records ${recorded.join(', ')}`,
  });
  process.exit(0);
}

function count(n, noun) {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}

main().catch((err) => {
  process.stderr.write(`${err.stack ?? err}\n`);
  process.exit(1);
});
