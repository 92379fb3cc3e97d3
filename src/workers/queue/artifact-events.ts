import { parseArtifactReport, type ArtifactReport } from '../../runs/artifact.js';
import type { HarnessEvent, WireArtifact } from '../protocol/harness-protocol.js';

/** The artifacts among a report's events, content decoded (each was checked when its line was read). */
export function artifactReports(events: HarnessEvent[]): ArtifactReport[] {
  return events.flatMap((e) => {
    const report = e.type === 'artifact' ? parseArtifactReport(e.artifact) : undefined;
    return report ? [report] : [];
  });
}

/** How an artifact shows in the conversation: an `artifact` action without its content. */
export function artifactAction(artifact: WireArtifact): HarnessEvent & { type: 'action' } {
  const { data: _content, content: _text, type: _type, ...input } = artifact;
  return { type: 'action', kind: 'artifact', input };
}
