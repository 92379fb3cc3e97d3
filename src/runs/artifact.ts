/**
 * Artifacts a run leaves (the harness reports them; docs/workers.md, "Artifacts"): the Oz clients'
 * five kinds. Pure: parsing a report and shaping what the API shows.
 */
import type { ArtifactItem } from '../contract/generated.js';

export const ARTIFACT_TYPES = ['PLAN', 'PULL_REQUEST', 'SCREENSHOT', 'FILE', 'EXTERNAL_REFERENCE'] as const;
export type ArtifactType = (typeof ARTIFACT_TYPES)[number];

/** At most this much content per artifact (a plan's text, a file's or screenshot's bytes). */
export const MAX_ARTIFACT_BYTES = 1024 * 1024;

/** A harness's report of one artifact, checked; `content` is what a download returns. */
export interface ArtifactReport {
  artifact_type: ArtifactType;
  /** What the run's detail lists under `data` (the artifact uid is added when it is stored). */
  data: Record<string, unknown>;
  content?: { type: string; bytes: Buffer };
  /** A FILE left for the run's next execution (GET /agent/runs/{id}/handoff/attachments). */
  handoff: boolean;
}

const str = (v: unknown, max = 2048): string | undefined =>
  typeof v === 'string' && v.length > 0 && v.length <= max ? v : undefined;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const MIME = /^[a-z]+\/[A-Za-z0-9.+-]{1,100}$/;

/** Drops undefined values, so `data` holds only what the harness said. */
function defined(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
}

function bytes(v: unknown): Buffer | undefined {
  if (typeof v !== 'string' || !BASE64.test(v)) return undefined;
  const b = Buffer.from(v, 'base64');
  return b.length <= MAX_ARTIFACT_BYTES ? b : undefined;
}

/** The states of a pull request the clients' ArtifactItem names (`data.status`, required there). */
export const PULL_REQUEST_STATUSES = [
  'open',
  'draft',
  'merged',
  'closed',
  'unknown',
] as const satisfies readonly NonNullable<ArtifactItem['data']['status']>[];
export type PullRequestStatus = (typeof PULL_REQUEST_STATUSES)[number];

/**
 * A pull request's state as its harness reported it, in any case (`gh pr view --json state` says
 * `OPEN`, `MERGED`, `CLOSED`), else `unknown`: factoryd has no code host's record of the pull request
 * to ask, and the clients require the field. A value outside the five is never stored as given.
 */
export function pullRequestStatus(v: unknown): PullRequestStatus {
  const s = typeof v === 'string' ? v.toLowerCase() : undefined;
  return (PULL_REQUEST_STATUSES as readonly string[]).includes(s ?? '')
    ? (s as PullRequestStatus)
    : 'unknown';
}

/** A report from a harness line (`{type:'artifact', artifact_type, …}`), or undefined when it is no valid one. */
export function parseArtifactReport(raw: Record<string, unknown>): ArtifactReport | undefined {
  switch (raw.artifact_type) {
    case 'PLAN': {
      const text = typeof raw.content === 'string' ? raw.content : undefined;
      if (text === undefined || Buffer.byteLength(text) > MAX_ARTIFACT_BYTES) return undefined;
      return {
        artifact_type: 'PLAN',
        data: defined({ title: str(raw.title, 500), url: str(raw.url) }),
        content: { type: 'text/markdown', bytes: Buffer.from(text) },
        handoff: false,
      };
    }
    case 'PULL_REQUEST': {
      const url = str(raw.url);
      const branch = str(raw.branch, 255);
      return url && branch
        ? {
            artifact_type: 'PULL_REQUEST',
            data: { url, branch, status: pullRequestStatus(raw.status) },
            handoff: false,
          }
        : undefined;
    }
    case 'SCREENSHOT': {
      const mime = str(raw.mime_type, 128);
      const content = bytes(raw.data);
      if (!mime || !MIME.test(mime) || !content) return undefined;
      return {
        artifact_type: 'SCREENSHOT',
        data: defined({ mime_type: mime, description: str(raw.description, 2000) }),
        content: { type: mime, bytes: content },
        handoff: false,
      };
    }
    case 'FILE': {
      const filepath = str(raw.filepath ?? raw.filename, 1024);
      const content = bytes(raw.data);
      const mime = str(raw.mime_type, 128) ?? 'application/octet-stream';
      if (!filepath || !content || !MIME.test(mime)) return undefined;
      return {
        artifact_type: 'FILE',
        data: defined({
          filename: filepath.split('/').pop(),
          filepath,
          mime_type: mime,
          size_bytes: content.length,
          description: str(raw.description, 2000),
          title: str(raw.title, 200),
        }),
        content: { type: mime, bytes: content },
        handoff: raw.handoff === true,
      };
    }
    case 'EXTERNAL_REFERENCE': {
      const url = str(raw.url);
      const referenceType = str(raw.reference_type, 64);
      if (!url || !referenceType) return undefined;
      const metadata =
        raw.metadata && typeof raw.metadata === 'object' && !Array.isArray(raw.metadata)
          ? raw.metadata
          : undefined;
      return {
        artifact_type: 'EXTERNAL_REFERENCE',
        data: defined({ reference_type: referenceType, url, title: str(raw.title, 500), metadata }),
        handoff: false,
      };
    }
  }
  return undefined;
}

/** The run's `artifacts[]` entry (ArtifactItem): the data the harness gave plus the uid to fetch it by. */
export function artifactItem(
  uid: string,
  type: ArtifactType,
  data: Record<string, unknown>,
  createdAt: Date,
): Record<string, unknown> {
  const extra = type === 'PLAN' ? { document_uid: uid, notebook_uid: uid } : {};
  return {
    artifact_type: type,
    created_at: createdAt.toISOString(),
    data: { ...data, artifact_uid: uid, ...extra },
  };
}

/** The folder of a continued run's workspace that holds what its previous execution left. */
export const HANDOFF_FOLDER = 'handoff';
/** At most this much handoff content goes to one execution (the assignment crosses HTTP). */
export const MAX_HANDOFF_BYTES = 4 * 1024 * 1024;
/** And at most this many files. */
export const MAX_HANDOFF_FILES = 50;

/**
 * The workspace files a continued run receives from the handoff files its previous execution left:
 * `handoff/<file name>` (the name only: a reported path could point anywhere), a later file of the
 * same name replacing an earlier one, oldest first until the bounds are reached (the rest left out).
 */
export function handoffAttachments(
  files: Array<{ filename: string; bytes: Buffer }>,
  maxBytes = MAX_HANDOFF_BYTES,
  maxFiles = MAX_HANDOFF_FILES,
): Array<{ file_name: string; data: string }> {
  const byName = new Map<string, Buffer>();
  for (const f of files) {
    const name = f.filename.split(/[\\/]/).pop() ?? '';
    if (name === '' || name === '.' || name === '..') continue;
    byName.delete(name); // the newer one takes the later place
    byName.set(name, f.bytes);
  }
  const out: Array<{ file_name: string; data: string }> = [];
  let total = 0;
  for (const [name, bytes] of byName) {
    if (out.length === maxFiles) break;
    if (total + bytes.length > maxBytes) continue;
    total += bytes.length;
    out.push({ file_name: `${HANDOFF_FOLDER}/${name}`, data: bytes.toString('base64') });
  }
  return out;
}
