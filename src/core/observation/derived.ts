/**
 * Derived evidence: redacted views, summaries, OCR, transcripts and other transformations of
 * evidence (spec ch. 12, "Avoid the laundering problem", "Solution guidance").
 *
 * Guarantees: a derived item binds, in a hashed receipt, its ordered input content digests and
 * input receipt digests, the transform kind and release, the digest of its parameters, its output
 * digest (computed here from the output bytes, never taken from the producer), its locator map
 * and omissions. Its authority is the lowest of its inputs' (with one closed value, always
 * `untrusted_evidence_only`): no transformation can raise it, and no parameter or output text
 * can set it. Signals are inherited: a summary of hostile text stays marked hostile. A redacted
 * view has its own digest and names the protected original only as an input, so a redacted
 * digest is never presented as the original's. Inputs from two tenants are refused. The receipt
 * is versioned like an observation receipt (its `signals` depend on the signal release) and
 * replays under the version written in it.
 * Never: runs the transform (the caller did; this binds what it produced), reads a clock, or
 * does I/O.
 */
import { z } from 'zod';
import { canonicalize, digestOf, sha256Hex } from '../canonical/canonical.js';
import { coreError, fromZodError, safeText, type CoreError } from '../errors.js';
import { decodeJsonText, utf8Encode } from '../canonical/json.js';
import type { ReplayReport } from '../receipts/replay.js';
import { compare } from '../receipts/replay.js';
import { err, ok, type Result } from '../result.js';
import { Count, Identifier, Label, Sha256, strict } from '../schema.js';
import {
  ArtifactReference,
  EvidenceContent,
  MediaType,
  OBSERVATION_AUTHORITIES,
  OBSERVATION_LIMITS,
  type ObservationAuthority,
  ObservationAuthority as ObservationAuthoritySchema,
  ObservationSignal,
  SignalHit,
  ToolEvidenceCandidate,
  canonicalizable,
  receiptVersionFields,
  versionedReceiptBody,
} from './schema.js';
import {
  credentialSpansAsRead,
  credentialSpansUnder,
  scanContentUnder,
  type SignalScan,
} from './signals/releases.js';
import { type ReceiptVersionOption, parseVersion } from './validate.js';
import { storedReceiptVersion } from './replay.js';

export const TRANSFORM_KINDS = [
  'caption',
  'classification',
  'extraction',
  'ocr',
  'redaction',
  'summary',
  'transcription',
  'translation',
] as const;
export const TransformKind = z.enum(TRANSFORM_KINDS);
export type TransformKind = z.infer<typeof TransformKind>;

export const MAX_TRANSFORM_PARAMETER_BYTES = 16 * 1024;

/** The transform that produced an output: kind, exact release, and the parameters it ran with. */
export const TransformSpec = strict({
  kind: TransformKind,
  release: Label,
  parameters: z
    .record(z.string().max(128), z.json())
    // Parameters are stored and replayed: they must survive Writ's own strict decoder (no unsafe
    // integers, no prototype keys, bounded depth), or the receipt could not be verified later.
    .refine(
      (p) => decodeJsonText(canonicalize(p), { maxBytes: MAX_TRANSFORM_PARAMETER_BYTES, maxDepth: 16 }).ok,
      'parameters must be strict json of at most 16384 bytes',
    ),
});
export type TransformSpec = z.infer<typeof TransformSpec>;

/** Which input locator an output draws on: locators stay attached through summarization. */
export const SourceLocatorRef = strict({
  input_index: z.number().int().min(0).max(63),
  locator_id: Identifier,
});
export type SourceLocatorRef = z.infer<typeof SourceLocatorRef>;

/** Whether the output covers all of its inputs (`partial` for a summary that leaves things out). */
export const Omissions = z.enum(['none', 'partial', 'unknown']);

/** One strict body per receipt version; version 2 names the signal release its `signals` come from. */
export const DerivedObservationReceiptBody = versionedReceiptBody({
  receipt_kind: z.literal('derived_observation'),
  tenant_id: Identifier,
  transform: TransformKind,
  transform_release: Label,
  parameters_sha256: Sha256,
  /** Ordered: input order is part of what the transform saw. */
  input_content_sha256s: z.array(Sha256).min(1).max(64),
  input_receipt_sha256s: z.array(Sha256).min(1).max(64),
  output_sha256: Sha256,
  output_bytes: Count,
  output_media_type: MediaType,
  source_locators: z.array(SourceLocatorRef).max(1024),
  omissions: Omissions,
  authority: ObservationAuthoritySchema,
  /** Every signal of every input, transitively: taint is never dropped by transformation. */
  inherited_signals: z.array(ObservationSignal),
  signals: z.array(ObservationSignal),
  signal_hits: z.array(SignalHit),
});
export type DerivedObservationReceiptBody = z.infer<typeof DerivedObservationReceiptBody>;

export const DerivedObservationReceipt = strict({ sha256: Sha256, body: DerivedObservationReceiptBody });
export type DerivedObservationReceipt = z.infer<typeof DerivedObservationReceipt>;

/** Derived evidence: the receipt plus the content and transform it binds. */
export const DerivedEvidence = strict({
  evidence_kind: z.literal('derived_observation'),
  authority: ObservationAuthoritySchema,
  receipt: DerivedObservationReceipt,
  tenant_id: Identifier,
  transform: TransformSpec,
  media_type: MediaType,
  content: EvidenceContent,
  source_locators: z.array(SourceLocatorRef),
  signals: z.array(ObservationSignal),
  inherited_signals: z.array(ObservationSignal),
});
export type DerivedEvidence = z.infer<typeof DerivedEvidence>;

/** Anything that can be transformed: accepted tool evidence or earlier derived evidence. */
export const EvidenceItem = z.discriminatedUnion('evidence_kind', [ToolEvidenceCandidate, DerivedEvidence]);
export type EvidenceItem = z.infer<typeof EvidenceItem>;

/** What the caller's transform produced. */
export const DerivedOutput = z.discriminatedUnion('kind', [
  strict({
    kind: z.literal('inline'),
    media_type: MediaType,
    text: z.string().max(OBSERVATION_LIMITS.maxInlinePayloadBytes),
  }),
  strict({ kind: z.literal('artifact'), artifact: ArtifactReference }),
]);
export type DerivedOutput = z.infer<typeof DerivedOutput>;

export const DerivationInput = strict({
  inputs: z.array(EvidenceItem).min(1).max(64),
  transform: TransformSpec,
  output: DerivedOutput,
  source_locators: z.array(SourceLocatorRef).max(1024),
  omissions: Omissions,
});
export type DerivationInput = z.infer<typeof DerivationInput>;

// ---------------------------------------------------------------------------------------------
// Authority

/** Rank of each authority, lowest first. A transform's output takes the minimum of its inputs. */
const AUTHORITY_RANK: Readonly<Record<ObservationAuthority, number>> = { untrusted_evidence_only: 0 };

export function authorityRank(a: ObservationAuthority): number {
  return AUTHORITY_RANK[a];
}

/** The lowest authority among `authorities` (never higher than any of them). */
export function combineAuthority(authorities: readonly ObservationAuthority[]): ObservationAuthority {
  let lowest: ObservationAuthority = OBSERVATION_AUTHORITIES[0];
  let rank = Number.POSITIVE_INFINITY;
  for (const a of authorities) {
    if (AUTHORITY_RANK[a] < rank) {
      rank = AUTHORITY_RANK[a];
      lowest = a;
    }
  }
  return lowest;
}

// ---------------------------------------------------------------------------------------------
// Identities of evidence items

export function evidenceContentSha256(item: EvidenceItem): string {
  return item.content.kind === 'inline' ? item.content.sha256 : item.content.artifact.artifact_sha256;
}

export function evidenceReceiptSha256(item: EvidenceItem): string {
  return item.evidence_kind === 'tool_observation' ? item.observation_receipt_sha256 : item.receipt.sha256;
}

function locatorIds(item: EvidenceItem): ReadonlySet<string> {
  return new Set(item.evidence_kind === 'tool_observation' ? item.locators.map((l) => l.locator_id) : []);
}

// ---------------------------------------------------------------------------------------------
// Derivation

export function deriveObservation(
  input: DerivationInput,
  options: ReceiptVersionOption = {},
): Result<DerivedEvidence, CoreError> {
  const version = parseVersion(options);
  if (!version.ok) return version;
  const parsed = DerivationInput.safeParse(input);
  if (!parsed.success) return err(fromZodError('invalid_observation', 'derivation', parsed.error));
  const d = parsed.data;
  // A lone surrogate anywhere has no canonical form: a typed error, never a throw from a digest.
  if (!canonicalizable(d)) {
    return err(coreError('canonicalization_failed', 'derivation contains a string with a lone surrogate'));
  }
  const tenant = d.inputs[0]?.tenant_id as string;
  // Mixing tenants in one derived item is cross-tenant disclosure through a summary.
  const other = d.inputs.find((x) => x.tenant_id !== tenant);
  if (other !== undefined) {
    return err(
      coreError('invalid_observation', `derived inputs span tenants "${tenant}" and "${other.tenant_id}"`),
    );
  }
  // Each item must still be what it claims to be: inline content whose digest is its bytes.
  for (const [k, item] of d.inputs.entries()) {
    if (item.content.kind === 'inline' && sha256Hex(utf8Encode(item.content.text)) !== item.content.sha256) {
      return err(coreError('invalid_observation', `input ${k} content does not match its digest`));
    }
  }
  // A locator map pointing at locators the inputs do not have is provenance made up after the fact.
  for (const ref of d.source_locators) {
    const item = d.inputs[ref.input_index];
    if (item === undefined || !locatorIds(item).has(ref.locator_id)) {
      return err(
        coreError(
          'invalid_observation',
          `source locator "${ref.locator_id}" is not a locator of input ${ref.input_index}`,
        ),
      );
    }
  }
  let content: EvidenceContent;
  let mediaType: string;
  let scan: SignalScan = { signals: [], hits: [] };
  if (d.output.kind === 'inline') {
    const bytes = utf8Encode(d.output.text);
    // The output's identity is computed from its bytes: it can never borrow an input's digest.
    content = { kind: 'inline', text: d.output.text, sha256: sha256Hex(bytes), bytes: bytes.length };
    mediaType = d.output.media_type;
    scan = scanContentUnder(version.value, d.output.text, d.output.media_type);
  } else {
    // A derived artifact stored under another tenant is the same disclosure by reference.
    if (d.output.artifact.storage_tenant_id !== tenant) {
      return err(
        coreError(
          'invalid_observation',
          `derived artifact is stored under tenant "${d.output.artifact.storage_tenant_id}"`,
        ),
      );
    }
    content = { kind: 'artifact', artifact: d.output.artifact };
    mediaType = d.output.artifact.media_type;
  }
  const inherited = new Set<z.infer<typeof ObservationSignal>>();
  for (const item of d.inputs) {
    for (const s of item.signals) inherited.add(s);
    if (item.evidence_kind === 'derived_observation')
      for (const s of item.inherited_signals) inherited.add(s);
  }
  const authority = combineAuthority(d.inputs.map((x) => x.authority));
  const sourceLocators = [...d.source_locators].sort(
    (a, b) =>
      a.input_index - b.input_index ||
      (a.locator_id < b.locator_id ? -1 : a.locator_id > b.locator_id ? 1 : 0),
  );
  const body: DerivedObservationReceiptBody = {
    receipt_kind: 'derived_observation',
    ...receiptVersionFields(version.value),
    tenant_id: tenant,
    transform: d.transform.kind,
    transform_release: d.transform.release,
    parameters_sha256: digestOf(d.transform.parameters),
    input_content_sha256s: d.inputs.map(evidenceContentSha256),
    input_receipt_sha256s: d.inputs.map(evidenceReceiptSha256),
    output_sha256: content.kind === 'inline' ? content.sha256 : content.artifact.artifact_sha256,
    output_bytes: content.kind === 'inline' ? content.bytes : content.artifact.byte_size,
    output_media_type: mediaType,
    source_locators: sourceLocators,
    omissions: d.omissions,
    authority,
    inherited_signals: [...inherited].sort(),
    signals: scan.signals,
    signal_hits: scan.hits,
  };
  const receipt: DerivedObservationReceipt = { sha256: digestOf(body), body };
  return ok({
    evidence_kind: 'derived_observation',
    authority,
    receipt,
    tenant_id: tenant,
    transform: d.transform,
    media_type: mediaType,
    content,
    source_locators: sourceLocators,
    signals: scan.signals,
    inherited_signals: body.inherited_signals,
  });
}

/**
 * Recompute a stored derived-observation receipt from the derivation that produced it, under the
 * receipt version (and so the signal release) written in the stored body.
 */
export function verifyDerivedObservationReceipt(stored: unknown, input: DerivationInput): ReplayReport {
  const r = deriveObservation(input, { receiptVersion: storedReceiptVersion(stored) });
  return compare(stored, r.ok ? ok(r.value.receipt) : r);
}

// ---------------------------------------------------------------------------------------------
// Deterministic redaction

/**
 * Release of the built-in redactor; a change to its rules is a new release. `writ-redactor/1`
 * located credentials with the `writ-signals/1` rules (kept, frozen, for that release name);
 * `writ-redactor/2` uses the current credential rules over the content's text; `writ-redactor/3`
 * also over every string of JSON content as a model reads it, and into JSON text held in those
 * strings `AS_READ_DEPTH` levels deep, the levels observation receipts of versions 5 to 7 scan
 * (`credentialSpansAsRead`): a secret quoted inside a JSON string is redacted there, and the
 * result is still JSON. `writ-redactor/4` (current) reads each of those texts also through
 * invisible characters, tag characters and compatibility forms, and across a line break inside a
 * token (`credentialSpansReadThrough`): a key with a zero-width space or a soft hyphen inside it,
 * written in fullwidth letters, or wrapped by a newline is redacted whole, where
 * `writ-redactor/3` left it in the clear although the detector signalled it. Whatever
 * `writ-redactor/4` locates raises `credential_like_text` in a version 7 scan of the same content
 * (`writ-signals/6` runs the same readings), and whatever `writ-redactor/3` locates in a version 6
 * scan.
 */
export const REDACTOR_RELEASE = 'writ-redactor/4';
const LEGACY_REDACTOR_RELEASE = 'writ-redactor/1';
const TEXT_REDACTOR_RELEASE = 'writ-redactor/2';
const AS_WRITTEN_REDACTOR_RELEASE = 'writ-redactor/3';

export interface Redaction {
  readonly rule: string;
  /** UTF-16 offsets into the protected original, `[start, end)`. */
  readonly start: number;
  readonly end: number;
}

export interface RedactedView {
  /** The derived item whose content is the redacted text; its receipt is the transformation record. */
  readonly evidence: DerivedEvidence;
  /** Digest of the protected original (stored under narrow access, never shown here). */
  readonly protected_original_sha256: string;
  /** Digest of the redacted bytes. Never equal to the original's when anything was redacted. */
  readonly redacted_sha256: string;
  readonly redactions: readonly Redaction[];
}

/**
 * Replace credential-like spans of an inline evidence item with `[redacted:<rule>]` markers. The
 * original is not modified; the view is new derived evidence bound to it by a `redaction` receipt.
 */
export function redactEvidence(
  item: EvidenceItem,
  release: string = REDACTOR_RELEASE,
): Result<RedactedView, CoreError> {
  if (item.content.kind !== 'inline') {
    return err(
      coreError(
        'invalid_observation',
        'only inline evidence can be redacted; derive a redacted artifact instead',
      ),
    );
  }
  const text = item.content.text;
  // A release name promises a rule set: an old name keeps the old rules, never the new ones, and
  // a name that promises none is refused.
  let spans;
  if (release === LEGACY_REDACTOR_RELEASE || release === TEXT_REDACTOR_RELEASE) {
    spans = credentialSpansUnder(release === LEGACY_REDACTOR_RELEASE, text);
  } else if (release === REDACTOR_RELEASE || release === AS_WRITTEN_REDACTOR_RELEASE) {
    spans = credentialSpansAsRead(text, item.media_type, release);
  } else {
    return err(coreError('invalid_request', `unknown redactor release ${safeText(JSON.stringify(release))}`));
  }
  const parts: string[] = [];
  let at = 0;
  for (const s of spans) {
    parts.push(text.slice(at, s.start), `[redacted:${s.rule}]`);
    at = s.end;
  }
  parts.push(text.slice(at));
  const derived = deriveObservation({
    inputs: [item],
    transform: {
      kind: 'redaction',
      release,
      parameters: { marker: '[redacted:<rule>]', rules: 'credential_like_text' },
    },
    output: { kind: 'inline', media_type: item.media_type, text: parts.join('') },
    source_locators: [],
    omissions: spans.length > 0 ? 'partial' : 'none',
  });
  if (!derived.ok) return derived;
  const evidence = derived.value;
  return ok({
    evidence,
    protected_original_sha256: item.content.sha256,
    redacted_sha256: evidence.receipt.body.output_sha256,
    redactions: spans.map((s) => ({ rule: s.rule, start: s.start, end: s.end })),
  });
}
