import { bytes, DEFINITION_LIMITS, type DefinitionError } from './definition.js';
import { placementOf } from './definition-file.js';

/** A file of a tree as listed, before anything is read. */
export interface ListedFile {
  path: string;
  size: number;
  /** A symbolic link (git mode 120000, or a link on disk): never read as a definition file. */
  link?: boolean;
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
  // git stores a link as a blob holding its target's path: the reconciler would read that path as the
  // file, where `factoryd validate` on a checkout would follow it. Neither is what the author meant.
  for (const { path } of sorted.filter((f) => f.link))
    errors.push({
      path,
      line: 1,
      message:
        'the file is a symbolic link: a definition file must be a regular file in the repository (the service reads a link as the text of its target path, never the target): it was not read',
    });
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
