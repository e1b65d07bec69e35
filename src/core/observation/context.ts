/**
 * Accepted evidence as a typed context part for the context budgeter's evidence lane (spec ch. 12,
 * "put tool evidence in a clearly delimited evidence segment whose metadata remains outside the
 * model-authored bytes").
 *
 * Guarantees: a part's type is the literal `tool_evidence` and its authority the literal
 * `untrusted_evidence_only`; there is no role field, so nothing in the content (a `"role":
 * "system"` included) can make a part a system, developer or user message. Provenance and
 * signals travel beside the content, never inside it. Artifact content is referenced, never
 * inlined.
 * Never: concatenates evidence into instruction text, drops provenance or signals, or changes
 * authority.
 */
import type { DerivedEvidence, EvidenceItem } from './derived.js';
import type { ObservationAuthority, ObservationSignal, ToolEvidenceCandidate } from './schema.js';

export interface EvidenceProvenance {
  readonly evidence_kind: EvidenceItem['evidence_kind'];
  /** The observation or derived-observation receipt that admitted this content. */
  readonly receipt_sha256: string;
  readonly content_sha256: string;
  readonly tenant_id: string;
  /** The source release for tool observations; the transform release for derived evidence. */
  readonly release: string;
  readonly transform: DerivedEvidence['transform']['kind'] | null;
}

export type EvidencePartContent =
  | { readonly kind: 'text'; readonly text: string }
  | { readonly kind: 'artifact_ref'; readonly artifact_sha256: string; readonly byte_size: number };

export interface EvidencePart {
  readonly part_type: 'tool_evidence';
  readonly authority: ObservationAuthority;
  readonly media_type: string;
  readonly provenance: EvidenceProvenance;
  readonly signals: readonly ObservationSignal[];
  readonly content: EvidencePartContent;
}

export function toEvidencePart(item: EvidenceItem): EvidencePart {
  const tool = item.evidence_kind === 'tool_observation' ? (item as ToolEvidenceCandidate) : null;
  const derived = item.evidence_kind === 'derived_observation' ? item : null;
  const signals = new Set<ObservationSignal>(item.signals);
  if (derived !== null) for (const s of derived.inherited_signals) signals.add(s);
  return {
    part_type: 'tool_evidence',
    // Copied, never computed from content: the lane cannot raise it.
    authority: item.authority,
    media_type: item.media_type,
    provenance: {
      evidence_kind: item.evidence_kind,
      receipt_sha256:
        tool !== null ? tool.observation_receipt_sha256 : (derived as DerivedEvidence).receipt.sha256,
      content_sha256:
        item.content.kind === 'inline' ? item.content.sha256 : item.content.artifact.artifact_sha256,
      tenant_id: item.tenant_id,
      release: tool !== null ? tool.source_release : (derived as DerivedEvidence).transform.release,
      transform: derived !== null ? derived.transform.kind : null,
    },
    signals: [...signals].sort(),
    content:
      item.content.kind === 'inline'
        ? { kind: 'text', text: item.content.text }
        : {
            kind: 'artifact_ref',
            artifact_sha256: item.content.artifact.artifact_sha256,
            byte_size: item.content.artifact.byte_size,
          },
  };
}
