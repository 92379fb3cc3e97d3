import { Readable } from 'node:stream';
import { Inject, Injectable } from '@nestjs/common';
import type { AuthContext } from '../auth/auth-context.js';
import { Clock } from '../common/clock.js';
import { UUID_PATTERN } from '../common/ids.js';
import { NotAuthorized, NotFound } from '../common/problem.js';
import { ConversationsRepository } from '../conversations/conversations.repository.js';
import { RunUsageRepository, type ModelUsage } from '../runs/run-usage.repository.js';
import type { Run } from '../runs/run.js';
import { RunsRepository } from '../runs/runs.repository.js';
import { UrlSigner } from '../secrets/url-signer.js';
import { DOWNLOAD_LINK_SECONDS } from './artifacts.service.js';

/** Transcript lines read per statement while a transcript streams out. */
const TRANSCRIPT_PAGE = 1000;

/** What a run's harness left besides the conversation: its raw transcript and its token usage. */
@Injectable()
export class RunHarnessService {
  constructor(
    @Inject(RunsRepository) private readonly runs: RunsRepository,
    @Inject(RunUsageRepository) private readonly usage: RunUsageRepository,
    @Inject(ConversationsRepository) private readonly conversations: ConversationsRepository,
    @Inject(UrlSigner) private readonly signer: UrlSigner,
    @Inject(Clock) private readonly clock: Clock,
  ) {}

  /** RunGetHarnessUsageResponse: the run's summed usage as its CLI's native categories. */
  async harnessUsage(auth: AuthContext, runId: string) {
    const run = await this.teamRun(auth, runId);
    const head = { run_id: run.id, conversation_id: run.conversationId };
    const harness = harnessOf(run);
    const rows = harness === 'claude' || harness === 'codex' ? await this.usage.forRun(run.id) : [];
    if (!rows.length) return { ...head, available: false };
    const capturedAt = new Date(Math.max(...rows.map((r) => r.updatedAt.getTime())));
    const known = rows.every((r) => r.cacheReadTokens !== null && r.cacheWriteTokens !== null);
    const native = harness === 'claude' ? claudeUsage : codexUsage;
    return {
      ...head,
      available: true,
      age_seconds: Math.max(0, Math.floor((this.clock.now().getTime() - capturedAt.getTime()) / 1000)),
      usage: {
        capturedAt: capturedAt.toISOString(),
        captureSequence: rows.reduce((n, r) => n + r.reports, 0),
        executionId: Math.max(...rows.map((r) => r.lastExecution)),
        harness: harness === 'claude' ? 'CLAUDE_CODE' : 'CODEX',
        metricsVersion: 1,
        snapshot: {
          // Tool calls are in the conversation, not counted here.
          coverage: { tokenStatus: known ? 'known' : 'partial', toolStatus: 'unavailable' },
          payload: {
            attribution: rows.map((r) => ({ model: r.modelId, usage: native(r) })),
            toolCalls: null,
            usage: native(total(rows)),
          },
        },
      },
    };
  }

  /** The signed link the transcript route redirects to (the clients follow it, as for artifacts). */
  async transcriptLink(auth: AuthContext, runId: string, base: string): Promise<string> {
    const run = await this.teamRun(auth, runId);
    const expiresAt = new Date(this.clock.now().getTime() + DOWNLOAD_LINK_SECONDS * 1000);
    const { expires, signature } = this.signer.sign(transcriptSubject(run.id), expiresAt);
    return `${base}/api/v1/agent/runs/${run.id}/transcript/download?expires=${expires}&signature=${signature}`;
  }

  /**
   * The raw transcript a signed link names: every line the harness printed that was no protocol
   * event, stdout and stderr, in the order the worker read them, over all executions; streamed in
   * pages, so a long transcript is never held in memory whole.
   */
  transcript(runId: string, expires: string | undefined, signature: string | undefined): Readable {
    if (
      !UUID_PATTERN.test(runId) ||
      !this.signer.verify(transcriptSubject(runId), expires, signature, this.clock.now())
    )
      throw new NotAuthorized(
        'This transcript link is invalid or has expired; GET /api/v1/agent/runs/{runId}/transcript gives a new one.',
      );
    const conversations = this.conversations;
    return Readable.from(
      (async function* () {
        for (let after = '0'; ;) {
          const page = await conversations.transcriptLines(runId, after, TRANSCRIPT_PAGE);
          if (page.length) yield page.map((l) => `${l.text}\n`).join('');
          if (page.length < TRANSCRIPT_PAGE) return;
          after = page.at(-1)!.id;
        }
      })(),
    );
  }

  private async teamRun(auth: AuthContext, runId: string): Promise<Run> {
    const run = UUID_PATTERN.test(runId) ? await this.runs.findForTeam(auth.team.id, runId) : undefined;
    if (!run) throw new NotFound(`run ${runId} does not exist`);
    return run;
  }
}

/** A transcript link's subject: never the same as an artifact link's (whose subject is the artifact's uid). */
const transcriptSubject = (runId: string) => `transcript:${runId}`;

/** The run's harness as its configuration names it (`agent_config.harness.type`). */
function harnessOf(run: Run): string | undefined {
  const harness = run.agentConfig.harness as { type?: unknown } | undefined;
  return typeof harness?.type === 'string' ? harness.type : undefined;
}

function total(rows: ModelUsage[]): ModelUsage {
  const sum = (pick: (r: ModelUsage) => number | null) =>
    rows.some((r) => pick(r) !== null) ? rows.reduce((n, r) => n + (pick(r) ?? 0), 0) : null;
  return {
    ...rows[0]!,
    inputTokens: sum((r) => r.inputTokens)!,
    outputTokens: sum((r) => r.outputTokens)!,
    cacheReadTokens: sum((r) => r.cacheReadTokens),
    cacheWriteTokens: sum((r) => r.cacheWriteTokens),
  };
}

/** Anthropic's categories: input excludes the cache counts (as the protocol's `input_tokens`). */
const claudeUsage = (u: ModelUsage) => ({
  input_tokens: u.inputTokens,
  output_tokens: u.outputTokens,
  cache_read_input_tokens: u.cacheReadTokens,
  cache_creation_input_tokens: u.cacheWriteTokens,
});

/** OpenAI's categories: input includes the cached part, which is also counted on its own. */
const codexUsage = (u: ModelUsage) => ({
  input_tokens: u.inputTokens + (u.cacheReadTokens ?? 0),
  cached_input_tokens: u.cacheReadTokens,
  cache_write_input_tokens: u.cacheWriteTokens,
  output_tokens: u.outputTokens,
});
