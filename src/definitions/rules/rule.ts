import type { DefinitionError } from '../definition.js';
import type { DefinitionFile, FileKind } from '../definition-file.js';

/** What only the service knows: the factory's webhook UIDs and the team's secrets. Absent offline. */
export interface ValidationContext {
  /** Every webhook this factory ever had, live or deleted. */
  knownWebhooks?: Array<{ uid: string; name: string; path: string; deleted: boolean }>;
  /** The team's secrets: whether the current value of each is URL-safe. */
  secrets?: Map<string, { urlSafe: boolean; whsec?: boolean }>;
  /** NOTIFICATIONS_ALLOW_PRIVATE_URLS of the service; unknown offline. */
  allowPrivateUrls?: boolean;
  team?: string;
  /**
   * The team's environments whose file may ask for `network: bridge` (the service's
   * WORKER_DOCKER_BRIDGE_ENVIRONMENTS, this team's entries); unknown offline.
   */
  bridgeEnvironments?: readonly string[];
  /** Why the checks that need the service were not made, when they were not (default: no database). */
  uncheckedBecause?: string;
}

/** What the rules found: every error, and the checks that need the service and were not made. */
export class Findings {
  readonly errors: DefinitionError[] = [];
  readonly skipped: string[] = [];

  error(path: string, line: number, message: string): void {
    this.errors.push({ path, line, message });
  }

  /** A check that needs the service, not made offline. */
  unchecked(what: string, ctx: ValidationContext): void {
    this.skipped.push(`${what} were not checked: ${ctx.uncheckedBecause ?? 'no database'}`);
  }
}

/** A file whose own checks (parse, schema, name) passed: its data has the schema's shape. */
export const isValid = (f: DefinitionFile): boolean => f.errors.length === 0;

/** A file's data when it is valid, else nothing (its own errors are reported already). */
export const dataOf = <T>(f: DefinitionFile): Partial<T> => (isValid(f) ? (f.source.data as T) : {});

/** The files of one kind, in path order: the order errors and limits count in. */
export function filesOf(files: DefinitionFile[], kind: FileKind): DefinitionFile[] {
  return files.filter((f) => f.kind === kind).sort((a, b) => a.source.path.localeCompare(b.source.path));
}
