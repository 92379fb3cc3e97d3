import type { AgentDefinition, AgentOverrides, AgentType } from '../definition.js';
import type { DefinitionFile } from '../definition-file.js';
import { dataOf, isValid, type Findings } from './rule.js';

/** agents/<name>/agent.md: exactly one foreman among them. */
export function checkAgents(
  files: DefinitionFile[],
  findings: Findings,
  hasFactoryFile: boolean,
): { agents: AgentDefinition[]; foreman?: AgentDefinition } {
  const agents = files.map((f): AgentDefinition => {
    const d = dataOf<{ description: string; agentType: AgentType; overrides: AgentOverrides }>(f);
    return {
      name: f.name,
      path: f.source.path,
      agentType: d.agentType ?? 'CUSTOM',
      description: d.description,
      overrides: d.overrides ?? {},
      basePrompt: f.source.body.trim(),
    };
  });
  const foremen = files.filter((_, i) => agents[i].agentType === 'FOREMAN');
  // An agent that failed its own checks may be the foreman it meant to be: no second error for it.
  if (foremen.length === 0 && files.every(isValid)) {
    findings.error(
      hasFactoryFile ? 'factory.yaml' : 'agents',
      1,
      'no agent is the foreman: set `agentType: FOREMAN` in exactly one agents/<name>/agent.md',
    );
  }
  for (const extra of foremen.slice(1)) {
    findings.error(
      extra.source.path,
      extra.source.lineOf(['agentType']),
      `a factory has exactly one foreman, and ${foremen[0].source.path} already is one: make this agent CUSTOM`,
    );
  }
  return { agents, foreman: agents.find((a) => a.agentType === 'FOREMAN') };
}
