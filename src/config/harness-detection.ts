import type { HarnessType } from './config.js';

/** An agent CLI a machine found at its start (on PATH, at `*_COMMAND`, or where `factoryd harnesses install` put it). */
export interface DetectedHarness {
  type: Exclude<HarnessType, 'oz'>;
  /** As the CLI reports it (`claude --version`, …); absent when it printed none. */
  version?: string;
  /** Where: `service` (a service-hosted worker) or a self-hosted worker's host id. */
  where: string;
  /** Model ids the CLI itself reports, when it reports any. */
  models?: string[];
}

/**
 * Which agent CLIs the machines that run a team's runs have: what the live service-hosted workers and
 * the team's own self-hosted workers advertise (WorkerRunsService.detectedHarnesses, provided where
 * the service is composed). NOTHING_DETECTED is for tests of code that lists no CLI.
 */
export interface HarnessDetection {
  detected(teamId: string): Promise<DetectedHarness[]>;
}

export const HARNESS_DETECTION = Symbol('HarnessDetection');

export const NOTHING_DETECTED: HarnessDetection = { detected: async () => [] };
