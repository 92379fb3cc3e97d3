// Claude Code's `--output-format stream-json` events → factoryd harness events (docs/workers.md).
// Pure: one Claude Code event in, zero or more harness events out.

/**
 * @param {any} event one parsed line of `claude -p … --output-format stream-json --verbose`
 * @returns {Array<Record<string, unknown>>}
 */
export function translate(event) {
  if (!event || typeof event !== 'object') return [];
  switch (event.type) {
    case 'system':
      if (event.subtype === 'init')
        return [
          {
            type: 'message',
            role: 'system',
            text: `Claude Code session ${event.session_id ?? '?'}${event.model ? ` (${event.model})` : ''}`,
          },
        ];
      return [];
    case 'assistant':
      return (event.message?.content ?? []).flatMap(fromContent);
    case 'user':
      // Tool results are the tools' output, not conversation: they stay in the transcript only.
      return [];
    case 'result': {
      const failed = event.is_error === true || (event.subtype && event.subtype !== 'success');
      return [
        {
          type: 'result',
          status: failed ? 'failed' : 'succeeded',
          message: typeof event.result === 'string' ? event.result : failed ? String(event.subtype) : 'done',
        },
      ];
    }
    default:
      return [];
  }
}

function fromContent(block) {
  if (block?.type === 'text' && block.text) return [{ type: 'message', role: 'assistant', text: block.text }];
  if (block?.type !== 'tool_use') return [];
  const input = block.input ?? {};
  // A skill load: the Skill tool, or reading a SKILL.md file.
  if (block.name === 'Skill' && typeof input.command === 'string')
    return [{ type: 'action', kind: 'read_skill', input: { skill_name: input.command } }];
  if (block.name === 'Read' && typeof input.file_path === 'string' && input.file_path.endsWith('SKILL.md'))
    return [{ type: 'action', kind: 'read_skill', input: { skill_path: input.file_path } }];
  return [{ type: 'action', kind: 'tool_call', input: { tool: block.name, id: block.id, input } }];
}
