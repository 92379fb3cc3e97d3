import { Inject, Injectable } from '@nestjs/common';
import type { AuthContext } from '../auth/auth-context.js';
import { Clock } from '../common/clock.js';
import { UUID_PATTERN } from '../common/ids.js';
import { invalidParam, NotAuthorized, NotFound } from '../common/problem.js';
import { RunArtifacts, type StoredArtifact } from '../runs/run-artifacts.repository.js';
import { RunsRepository } from '../runs/runs.repository.js';
import { UrlSigner } from '../secrets/url-signer.js';

/** How long a `download_url` works. */
export const DOWNLOAD_LINK_SECONDS = 15 * 60;

/**
 * A run's artifacts and handoff files, as the clients read them: metadata with an API key, content
 * through a time-limited signed link (`download_url`) that needs none, as the clients expect of it.
 */
@Injectable()
export class ArtifactsService {
  constructor(
    @Inject(RunArtifacts) private readonly artifacts: RunArtifacts,
    @Inject(RunsRepository) private readonly runs: RunsRepository,
    @Inject(UrlSigner) private readonly signer: UrlSigner,
    @Inject(Clock) private readonly clock: Clock,
  ) {}

  /** AgentGetArtifactResponse: a plan with its text, a file or screenshot with a download link. */
  async get(auth: AuthContext, uid: string, base: string): Promise<Record<string, unknown>> {
    const a = UUID_PATTERN.test(uid) ? await this.artifacts.find(auth.team.id, uid) : undefined;
    if (!a) throw new NotFound(`artifact ${uid} does not exist`);
    const head = { artifact_type: a.artifactType, artifact_uid: a.id, created_at: a.createdAt.toISOString() };
    const { mime_type: mime, ...data } = a.data;
    switch (a.artifactType) {
      case 'PLAN':
        return {
          ...head,
          data: {
            ...data,
            content: await this.artifacts.text(a.id),
            content_type: a.contentType ?? 'text/markdown',
            document_uid: a.id,
            notebook_uid: a.id,
          },
        };
      case 'FILE':
      case 'SCREENSHOT':
        return { ...head, data: { ...data, content_type: mime, ...this.link(a, base) } };
      default:
        return { ...head, data: a.data };
    }
  }

  /** AgentGetRunByExternalReferenceResponse: the run that reported an external reference to `url`. */
  async runOfExternalReference(auth: AuthContext, url: string | undefined): Promise<{ run_id: string }> {
    if (!url) throw invalidParam('url', 'url is required: the URL of the external reference to look up');
    const runId = await this.artifacts.runOfExternalReference(auth.team.id, url);
    if (!runId) throw new NotFound(`no run of this team reported an external reference to ${url}`);
    return { run_id: runId };
  }

  /** RunListHandoffAttachmentsResponse: the files the run's latest ended execution left. */
  async handoff(auth: AuthContext, runId: string, base: string) {
    const run = UUID_PATTERN.test(runId) ? await this.runs.findForTeam(auth.team.id, runId) : undefined;
    if (!run) throw new NotFound(`run ${runId} does not exist`);
    const files = await this.artifacts.handoff(auth.team.id, runId);
    return {
      attachments: files.map((f) => ({
        attachment_id: f.id,
        filename: f.data.filename,
        mime_type: f.data.mime_type,
        download_url: this.link(f, base).download_url,
      })),
    };
  }

  /** The content a signed link names; an invalid or expired link is 403, whoever asks. */
  async download(uid: string, expires: string | undefined, signature: string | undefined) {
    if (!UUID_PATTERN.test(uid) || !this.signer.verify(uid, expires, signature, this.clock.now()))
      throw new NotAuthorized(
        'This download link is invalid or has expired; GET /api/v1/agent/artifacts/{uid} gives a new one.',
      );
    return this.contentOf(uid);
  }

  /** The content for a key of the artifact's team: the clients' `downloadArtifact` sends the key, no link. */
  async downloadWithKey(auth: AuthContext, uid: string) {
    const a = UUID_PATTERN.test(uid) ? await this.artifacts.find(auth.team.id, uid) : undefined;
    if (!a) throw new NotFound(`artifact ${uid} does not exist`);
    return this.contentOf(uid);
  }

  private async contentOf(uid: string) {
    const content = await this.artifacts.content(uid);
    if (!content)
      throw new NotFound(
        `artifact ${uid} has no content to download (only files, screenshots and plans have)`,
      );
    return content;
  }

  private link(a: StoredArtifact, base: string): { download_url: string; expires_at: string } {
    const expiresAt = new Date(this.clock.now().getTime() + DOWNLOAD_LINK_SECONDS * 1000);
    const { expires, signature } = this.signer.sign(a.id, expiresAt);
    return {
      download_url: `${base}/api/v1/agent/artifacts/${a.id}/download?expires=${expires}&signature=${signature}`,
      expires_at: new Date(Number(expires) * 1000).toISOString(),
    };
  }
}
