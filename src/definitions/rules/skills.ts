import type { SkillDefinition } from '../definition.js';
import type { DefinitionFile } from '../definition-file.js';

/** skills/<name>/SKILL.md: its front matter is checked by its schema; the body is the skill. */
export function checkSkills(files: DefinitionFile[]): SkillDefinition[] {
  return files.map((f) => {
    const description = (f.source.data as { description?: unknown } | undefined)?.description;
    return {
      name: f.name,
      path: f.source.path,
      description: typeof description === 'string' ? description : undefined,
      content: f.source.body,
    };
  });
}
