import type { AgentOverrides } from '../definition.js';
import type { DefinitionFile } from '../definition-file.js';
import { dataOf, type Findings } from './rule.js';

export interface FactorySettings {
  name?: string;
  description?: string;
  agentDefaults?: AgentOverrides;
  repositories?: string[];
}

/** factory.yaml: there is one. Its fields are checked by its schema. */
export function checkFactory(
  files: DefinitionFile[],
  findings: Findings,
): { file?: DefinitionFile; settings: FactorySettings } {
  const file = files[0];
  if (!file) findings.error('factory.yaml', 1, 'missing: every factory needs a factory.yaml');
  return { file, settings: file ? dataOf<FactorySettings>(file) : {} };
}
