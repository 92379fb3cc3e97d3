import { Inject, Injectable } from '@nestjs/common';
import type { AuthContext } from '../auth/auth-context.js';
import { CONFIG, type Config, type HarnessType } from '../config/config.js';
import { HARNESS_DETECTION, type HarnessDetection } from '../config/harness-detection.js';
import { cliCommand } from '../common/cli-command.js';

/** One entry of AgentListModelsResponse (the Oz clients' `client.agent.listModels()`). */
export interface ModelEntry {
  id: string;
  display_name: string;
  provider: 'OPENAI' | 'ANTHROPIC' | 'GOOGLE' | 'UNKNOWN';
  vision_supported: boolean;
  description?: string;
  disable_reason?: 'ADMIN_DISABLED';
}

const PROVIDER: Record<HarnessType, ModelEntry['provider']> = {
  claude: 'ANTHROPIC',
  codex: 'OPENAI',
  gemini: 'GOOGLE',
  oz: 'UNKNOWN', // the team's own command: any provider
};

const CLI: Record<Exclude<HarnessType, 'oz'>, string> = {
  claude: 'Claude Code',
  codex: 'Codex CLI',
  gemini: 'Gemini CLI',
};

/**
 * The models a team's runs can use, per harness: those the operator lists (HARNESS_MODELS) and those
 * the detected CLIs report. Nothing else is listed: factoryd has no model catalogue of its own.
 */
@Injectable()
export class ModelsService {
  constructor(
    @Inject(CONFIG) private readonly config: Config,
    @Inject(HARNESS_DETECTION) private readonly detection: HarnessDetection,
  ) {}

  async list(auth: AuthContext): Promise<{ default_model_id: string; models: ModelEntry[] }> {
    const detected = await this.detection.detected(auth.team.id);
    const cli = (harness: HarnessType) =>
      harness === 'oz' ? undefined : detected.find((d) => d.type === harness);
    const models: ModelEntry[] = [];
    const listed = new Set<string>();
    const add = (harness: HarnessType, id: string, source: string) => {
      if (listed.has(`${harness}:${id}`)) return;
      listed.add(`${harness}:${id}`);
      const found = cli(harness);
      const available = harness === 'oz' || found !== undefined;
      models.push({
        id,
        display_name: id,
        provider: PROVIDER[harness],
        // A factoryd harness gets the run's images as files in its workspace, never as a model's image input.
        vision_supported: false,
        description: `${harness} harness${found ? ` (${CLI[found.type]}${found.version ? ` ${found.version}` : ''})` : ''}; ${source}${
          available
            ? ''
            : `; ${CLI[harness as Exclude<HarnessType, 'oz'>]} is not installed on any machine that runs this team's runs (${cliCommand(`harnesses install ${harness}`)})`
        }`,
        ...(available ? {} : { disable_reason: 'ADMIN_DISABLED' as const }),
      });
    };
    for (const m of this.config.harnessModels)
      add(m.harness, m.modelId, 'listed by the operator (HARNESS_MODELS)');
    for (const d of detected)
      for (const id of d.models ?? []) add(d.type, id, `reported by the CLI on ${d.where}`);
    const usable = models.find((m) => !m.disable_reason) ?? models[0];
    return { default_model_id: usable?.id ?? '', models };
  }
}
