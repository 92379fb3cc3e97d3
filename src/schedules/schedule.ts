import type { AgentConfig } from '../runs/run.js';

/** A schedule as stored (its agent config's MCP credentials sealed), with who made and changed it. */
export interface Schedule extends ScheduleFields {
  id: string;
  teamId: string;
  teamUid: string;
  /** NULL while paused. */
  nextFireAt: Date | null;
  lastFiredAt: Date | null;
  lastRunId: string | null;
  lastSpawnError: string | null;
  createdBy: Profile | null;
  updatedBy: Profile | null;
  /** Set when a factory's automation file owns this schedule (its `provider: schedule` trigger). */
  factory: { uid: string; automation: string; triggerIndex: number } | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface Profile {
  uid: string;
  type: 'user' | 'service_account';
  displayName: string;
}

/** What the API or a factory file gives a schedule; the rest is history. */
export interface ScheduleFields {
  name: string;
  cronSchedule: string;
  prompt: string;
  agentConfig: AgentConfig;
  metadata: Record<string, string> | null;
  mode: string | null;
  agentUid: string | null;
  enabled: boolean;
}

/**
 * MCP credentials in a schedule's config are sealed like a run's (docs/security.md), bound to the
 * schedule: this is the id they are bound to (distinct from every run id, which is a bare UUID).
 */
export const sealIdOf = (scheduleId: string) => `schedule:${scheduleId}`;
