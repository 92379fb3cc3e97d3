import { bytes, DEFINITION_LIMITS, type DefinitionError } from './definition.js';
import { placementOf } from './definition-file.js';

/** A file of a tree as listed, before anything is read. */
export interface ListedFile {
  path: string;
  size: number;
}

/**
 * Which of the listed definition files may not be read, each with the reason: a file over its size,
 * and the first file (in path order) past the tree's file count or total bytes. Empty when the tree
 * may be read.
 */
export function checkTreeLimits(files: ListedFile[]): DefinitionError[] {
  const errors: DefinitionError[] = [];
  const sorted = [...files].sort((a, b) => a.path.localeCompare(b.path));
  let total = 0;
  let countReported = false;
  let bytesReported = false;
  sorted.forEach(({ path, size }, i) => {
    const limit = isYamlFile(path) ? DEFINITION_LIMITS.yamlBytes : DEFINITION_LIMITS.fileBytes;
    if (size > limit)
      errors.push({
        path,
        line: 1,
        message: `the file is ${bytes(size)}; a ${isYamlFile(path) ? 'YAML definition file' : 'definition file'} may be at most ${bytes(limit)}: it was not read`,
      });
    total += size;
    if (i === DEFINITION_LIMITS.treeFiles && !countReported) {
      countReported = true;
      errors.push({
        path,
        line: 1,
        message: `the factory has ${sorted.length} definition files; the limit is ${DEFINITION_LIMITS.treeFiles} (this is the first beyond it, in path order): nothing was read`,
      });
    }
    if (total > DEFINITION_LIMITS.treeBytes && !bytesReported) {
      bytesReported = true;
      errors.push({
        path,
        line: 1,
        message: `the definition files reach ${bytes(total)} with this one; together they may be at most ${bytes(DEFINITION_LIMITS.treeBytes)}: nothing was read`,
      });
    }
  });
  return errors;
}

function isYamlFile(path: string): boolean {
  const placement = placementOf(path);
  return (
    !!placement && 'kind' in placement && ['factory', 'webhook', 'notification'].includes(placement.kind)
  );
}
