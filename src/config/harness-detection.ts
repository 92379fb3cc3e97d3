import type { HarnessType } from './config.js';

/** An agent CLI a machine found at its start (on PATH, at `*_COMMAND`, or where `factoryd harnesses install` put it). */
export interface DetectedHarness {
  type: Exclude<HarnessType, 'oz'>;
  /** As the CLI reports it (`claude --version`, …). */
  version: string;
  /** Where: `service` (a service-hosted worker) or a self-hosted worker's host id. */
  where: string;
  /** Model ids the CLI itself reports, when it reports any. */
  models?: string[];
}

/**
 * Which agent CLIs the machines that run a team's runs have. Implemented by the harness detection
 * (the service's own and its connected self-hosted workers' reports); until one is provided, nothing
 * is detected and only `oz` (the harness command) is available.
 */
export interface HarnessDetection {
  detected(teamId: string): Promise<DetectedHarness[]>;
}

export const HARNESS_DETECTION = Symbol('HarnessDetection');

export const NOTHING_DETECTED: HarnessDetection = { detected: async () => [] };
