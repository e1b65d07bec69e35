/**
 * The transport objects of observation validation (spec ch. 12), as strict zod schemas.
 *
 * Guarantees: every object rejects unknown fields at every level; an inline payload can never
 * carry a lone surrogate (it would have two UTF-8 spellings and two digests); an observation
 * carries exactly one of an inline payload or an artifact reference, never raw binary bytes; a
 * locator is one of six closed, typed kinds; authority is the closed value
 * `untrusted_evidence_only` and has no second member to be converted into; every receipt body is
 * a union on `receipt_version`, strict for each version, and version 2 names its signal release.
 * Never: decides anything (that is `validate.ts`), reads a clock, or does I/O.
 */
import { z } from 'zod';
import { CanonicalizationError, canonicalize } from '../canonical/canonical.js';
import { hasLoneSurrogate } from '../canonical/json.js';
import { MediaType } from '../policy.js';
import { Count, Identifier, Label, Sha256, UnixMs, strict } from '../schema.js';

// ---------------------------------------------------------------------------------------------
// Bounds that hold whatever a policy says (a policy can only narrow them)

export const OBSERVATION_LIMITS = {
  /** Inline payloads above this never reach a digest or a scanner, whatever the policy. */
  maxInlinePayloadBytes: 4 * 1024 * 1024,
  /** Artifacts are referenced, never inlined; this bounds what a reference may declare. */
  maxArtifactBytes: 16 * 1024 * 1024 * 1024,
  maxLocators: 256,
  maxLocatorBytes: 4096,
  maxPointerChars: 512,
  maxErrorDetailBytes: 64 * 1024,
  maxClockSkewMs: 10 * 60 * 1000,
} as const;

export const OBSERVATION_POLICY_VERSION = 1;

// ---------------------------------------------------------------------------------------------
// Primitives

/** `type/subtype`, lowercase, no parameters: the tenant policy's own definition, so both agree. */
export { MediaType };
export type MediaType = z.infer<typeof MediaType>;

/** Text that UTF-8 can represent exactly (no lone surrogates), so its digest is unambiguous. */
const ExactText = (max: number) =>
  z
    .string()
    .max(max)
    .refine((s) => !hasLoneSurrogate(s), 'must not contain a lone surrogate');

/** RFC 6901 JSON Pointer into the observed payload. Non-empty: a locator names a part, not the whole. */
export const PayloadPointer = z
  .string()
  .max(OBSERVATION_LIMITS.maxPointerChars)
  .regex(/^(\/([^~/]|~[01])*)+$/, 'must be a non-empty RFC 6901 JSON Pointer');

// ---------------------------------------------------------------------------------------------
// Authority and signals

/**
 * The only authority an observation, or anything derived from one, ever has. There is no
 * trusted-instruction member: instruction authority comes from the control plane, never from
 * tool output, and a closed one-member enum leaves no value to convert into.
 */
export const OBSERVATION_AUTHORITIES = ['untrusted_evidence_only'] as const;
export const ObservationAuthority = z.enum(OBSERVATION_AUTHORITIES);
export type ObservationAuthority = z.infer<typeof ObservationAuthority>;

/** Routing hints over the payload. A signal never deletes evidence and its absence proves nothing. */
export const OBSERVATION_SIGNALS = [
  'authority_claim',
  'credential_like_text',
  'hidden_characters',
  'instruction_like_text',
  'unscanned_content',
] as const;
export const ObservationSignal = z.enum(OBSERVATION_SIGNALS);
export type ObservationSignal = z.infer<typeof ObservationSignal>;

/** The outermost encoding a signal was found under (`plain` is the payload as given). */
export const SIGNAL_ENCODINGS = ['base64', 'escape', 'hex', 'html_entity', 'percent', 'plain'] as const;
export const SignalEncoding = z.enum(SIGNAL_ENCODINGS);
export type SignalEncoding = z.infer<typeof SignalEncoding>;

/** Which rule fired, never the matched text (a matched secret must not reach a receipt or a log). */
export const SignalHit = strict({
  signal: ObservationSignal,
  rule: z.string().regex(/^[a-z]+\.[a-z0-9_]+$/, 'must be a rule id'),
  encoding: SignalEncoding,
});
export type SignalHit = z.infer<typeof SignalHit>;

// ---------------------------------------------------------------------------------------------
// Policy

/**
 * What the tenant's behaviour policy allows an observation to be. Supplied by the adapter from
 * the tenant policy; its digest is bound into every observation receipt.
 */
export const ObservationPolicy = strict({
  policy_version: z.literal(OBSERVATION_POLICY_VERSION),
  /** Sorted, unique; empty allows nothing. Inline payloads must also be text (see `isTextMediaType`). */
  allowed_media_types: z.array(MediaType).max(64),
  max_payload_bytes: z.number().int().min(1).max(OBSERVATION_LIMITS.maxInlinePayloadBytes),
  max_artifact_bytes: z.number().int().min(1).max(OBSERVATION_LIMITS.maxArtifactBytes),
  max_locators: z.number().int().min(0).max(OBSERVATION_LIMITS.maxLocators),
  max_locator_bytes: z.number().int().min(64).max(OBSERVATION_LIMITS.maxLocatorBytes),
  require_locator: z.boolean(),
  /** Oldest source state (now - source_as_of) the policy accepts. */
  max_age_ms: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
  /** How far an observation time may lie ahead of the validator's clock (executor clock skew). */
  max_clock_skew_ms: z.number().int().min(0).max(OBSERVATION_LIMITS.maxClockSkewMs),
  require_source_generation: z.boolean(),
  /** Longest base64/hex-looking run an inline payload may carry (binary belongs in an artifact). */
  max_inline_encoded_chars: z.number().int().min(64).max(OBSERVATION_LIMITS.maxInlinePayloadBytes),
});
export type ObservationPolicy = z.infer<typeof ObservationPolicy>;

// ---------------------------------------------------------------------------------------------
// Typed locators

const LocatorId = Identifier;

/** A JSON Pointer into the payload, with the source snapshot (ETag, resource version) it was read at. */
export const JsonPointerLocator = strict({
  kind: z.literal('json_pointer'),
  locator_id: LocatorId,
  pointer: PayloadPointer,
  source_snapshot: Label,
});

/** A database row by primary key and the row version it was read at. */
export const DatabaseRowLocator = strict({
  kind: z.literal('database_row'),
  locator_id: LocatorId,
  database: Identifier,
  table: Identifier,
  primary_key: z
    .record(Identifier, z.string().min(1).max(256))
    .refine((r) => Object.keys(r).length > 0 && Object.keys(r).length <= 16, 'must name 1-16 key columns'),
  row_version: Label,
});

/** A log event by id, with the time range the event lies in. */
export const LogEventLocator = strict({
  kind: z.literal('log_event'),
  locator_id: LocatorId,
  log_stream: Label,
  event_id: Label,
  start_unix_ms: UnixMs,
  end_unix_ms: UnixMs,
});

/** Bytes `[byte_start, byte_end)` of the payload, which lie on lines `line_start..line_end` (1-based). */
export const SourceSpanLocator = strict({
  kind: z.literal('source_span'),
  locator_id: LocatorId,
  byte_start: Count,
  byte_end: Count,
  line_start: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
  line_end: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
});

export const Region = strict({
  x: Count,
  y: Count,
  width: z
    .number()
    .int()
    .min(1)
    .max(1 << 20),
  height: z
    .number()
    .int()
    .min(1)
    .max(1 << 20),
});
export type Region = z.infer<typeof Region>;

/**
 * A pixel region of an image artifact, in the coordinate space of the stored image after the
 * named rotation (`orientation_degrees`), under a named map (e.g. a page or tile id).
 */
export const ImageRegionLocator = strict({
  kind: z.literal('image_region'),
  locator_id: LocatorId,
  region: Region,
  orientation_degrees: z.union([z.literal(0), z.literal(90), z.literal(180), z.literal(270)]),
  map_id: Label,
});

/** An audio/video interval in canonical milliseconds, optionally a track and a frame region. */
export const MediaTimeRangeLocator = strict({
  kind: z.literal('media_time_range'),
  locator_id: LocatorId,
  track: Label.nullable(),
  start_ms: Count,
  end_ms: Count,
  frame_region: Region.nullable(),
});

export const LOCATOR_KINDS = [
  'database_row',
  'image_region',
  'json_pointer',
  'log_event',
  'media_time_range',
  'source_span',
] as const;

export const Locator = z.discriminatedUnion('kind', [
  JsonPointerLocator,
  DatabaseRowLocator,
  LogEventLocator,
  SourceSpanLocator,
  ImageRegionLocator,
  MediaTimeRangeLocator,
]);
export type Locator = z.infer<typeof Locator>;

// ---------------------------------------------------------------------------------------------
// Artifact references

/** What a decoder release measured about a media artifact, so locators can be checked against it. */
export const ArtifactMedia = z.discriminatedUnion('kind', [
  strict({ kind: z.literal('image'), width_px: z.number().int().min(1), height_px: z.number().int().min(1) }),
  strict({ kind: z.literal('audio'), duration_ms: z.number().int().min(1) }),
  strict({
    kind: z.literal('video'),
    duration_ms: z.number().int().min(1),
    width_px: z.number().int().min(1),
    height_px: z.number().int().min(1),
  }),
]);
export type ArtifactMedia = z.infer<typeof ArtifactMedia>;

/**
 * Large or binary output, published to tenant-scoped content-addressed storage. The reference
 * carries identity and metadata only: there is no field that could hold the bytes.
 */
export const ArtifactReference = strict({
  artifact_sha256: Sha256,
  byte_size: z.number().int().min(1).max(OBSERVATION_LIMITS.maxArtifactBytes),
  media_type: MediaType,
  storage_tenant_id: Identifier,
  decoder_release: Label.nullable(),
  media: ArtifactMedia.nullable(),
});
export type ArtifactReference = z.infer<typeof ArtifactReference>;

/** What the adapter found in the artifact store, looked up under the requesting tenant's scope. */
export const StoredArtifactRecord = strict({
  tenant_id: Identifier,
  artifact_sha256: Sha256,
  byte_size: Count,
  media_type: MediaType,
});
export type StoredArtifactRecord = z.infer<typeof StoredArtifactRecord>;

// ---------------------------------------------------------------------------------------------
// Raw observation

/**
 * What an executor (or the adapter in front of it) reports it returned. The spec's fields, with
 * typed `locators` in place of `locator_ids`, freshness fields, and an artifact alternative to
 * the inline payload. Authority-free: every field is checked, none is believed.
 */
export const RawToolObservation = strict({
  observation_id: Identifier,
  tenant_id: Identifier,
  policy_sha256: Sha256,
  tool_contract_sha256: Sha256,
  invocation_sha256: Sha256,
  execution_receipt_sha256: Sha256,
  source_release: Label,
  /** Monotonic generation of the source state (resource version, index snapshot), if it has one. */
  source_generation: Count.nullable(),
  /** When the source state was current (event, commit or cache-creation time): freshness is measured from here. */
  source_as_of_unix_ms: UnixMs,
  media_type: MediaType,
  /** Inline UTF-8 text, or `null` when `artifact` names the output. */
  payload: ExactText(OBSERVATION_LIMITS.maxInlinePayloadBytes).nullable(),
  artifact: ArtifactReference.nullable(),
  payload_sha256: Sha256,
  payload_bytes: Count,
  locators: z.array(Locator).max(OBSERVATION_LIMITS.maxLocators),
  observed_at_unix_ms: UnixMs,
}).refine((o) => (o.payload === null) !== (o.artifact === null), {
  message: 'exactly one of payload and artifact must be present',
  path: ['payload'],
});
export type RawToolObservation = z.infer<typeof RawToolObservation>;

/**
 * Trusted context the adapter established and passes in: the authenticated tenant, its current
 * policy identity, and storage lookups. Never taken from a request body.
 */
/** A model name or label as a classifier reports it: printable ASCII, no spaces. */
const ClassifierToken = (max: number) =>
  z
    .string()
    .min(1)
    .max(max)
    .regex(/^[\x21-\x7e]+$/, 'must be printable ASCII');

/** Why a configured classifier gave no verdict (a typed note; it changes no signal). */
export const CLASSIFIER_UNAVAILABLE_REASONS = ['error', 'malformed_answer', 'no_binding', 'timeout'] as const;

/**
 * What the tenant's optional classifier said about the observed text, as the adapter recorded
 * it: a verdict (score and the policy's threshold), or why there was none. Trusted context: it
 * comes from a binding the tenant configured, never from the payload, and it is bound into the
 * receipt (`trusted_context_sha256`) so replay recomputes the same signals without the model.
 */
export const ClassifierOutcome = z.discriminatedUnion('status', [
  strict({
    status: z.literal('verdict'),
    model: ClassifierToken(128),
    injection_score: z.number().min(0).max(1),
    threshold: z.number().gt(0).max(1),
  }),
  strict({
    status: z.literal('unavailable'),
    model: ClassifierToken(128),
    reason: z.enum(CLASSIFIER_UNAVAILABLE_REASONS),
  }),
]);
export type ClassifierOutcome = z.infer<typeof ClassifierOutcome>;

export const ObservationTrustedContext = strict({
  tenant_id: Identifier,
  policy_sha256: Sha256,
  /** The observation id is already recorded for a different raw observation. */
  observation_id_conflict: z.boolean(),
  /** The source generation the decision needs at least (e.g. the deployment generation acted on). */
  min_source_generation: Count.nullable(),
  /** The artifact store entry for `artifact.artifact_sha256` under this tenant, or `null` if absent. */
  artifact_record: StoredArtifactRecord.nullable(),
  /**
   * The configured classifier's outcome; absent when none is configured or no text was
   * classified (absent keeps the digest of every context recorded before the classifier).
   */
  classifier: ClassifierOutcome.optional(),
});
export type ObservationTrustedContext = z.infer<typeof ObservationTrustedContext>;

// ---------------------------------------------------------------------------------------------
// Violations

/**
 * Every reason a well-formed observation is rejected. Receipts list them sorted and unique; the
 * list is stable (codes may be added, never change meaning).
 */
export const OBSERVATION_VIOLATIONS = [
  'artifact_cross_tenant',
  'artifact_media_type_mismatch',
  'artifact_not_found',
  'artifact_record_mismatch',
  'contract_mismatch',
  'duplicate_locator',
  'execution_not_failed_no_effect',
  'execution_not_succeeded',
  'execution_receipt_mismatch',
  'execution_receipt_replay_failed',
  'inline_encoded_blob',
  'inline_media_type_not_text',
  'invocation_mismatch',
  'locator_kind_mismatch',
  'locator_missing',
  'locator_out_of_range',
  'locator_too_large',
  'locator_unresolved',
  'media_type_not_allowed',
  'observation_id_conflict',
  'observation_stale',
  'observed_after_evaluation',
  'observed_before_completion',
  'payload_bytes_mismatch',
  'payload_digest_mismatch',
  'payload_malformed',
  'payload_too_large',
  'policy_mismatch',
  'source_generation_missing',
  'source_generation_stale',
  'source_time_after_observation',
  'tenant_mismatch',
  'too_many_locators',
] as const;
export const ObservationViolation = z.enum(OBSERVATION_VIOLATIONS);
export type ObservationViolation = z.infer<typeof ObservationViolation>;

// ---------------------------------------------------------------------------------------------
// Observation receipt and evidence candidate

/**
 * Observation receipt versions. What a receipt binds includes the signals its payload raised, so
 * the signal rule set is part of the format: version 1 bound the signals of release
 * `writ-signals/1` without naming it; version 2 names `writ-signals/2` in the body. Version 3 (same
 * signal release) also binds the digest and size of the bytes actually received
 * (`actual_sha256`, `actual_bytes`) in the output and error-observation bodies: before it, a
 * refusal whose payload was withheld bound them only as "differs from the declared value", so an
 * offline bundle could carry another differing value unnoticed. A derived-observation body of
 * version 3 binds what version 2 did (one version line for every observation kind). Version 4
 * binds what version 3 did, its signals from release `writ-signals/3`: the same rules, run over
 * JSON content both as it is and as a model reads its strings (`signals/as-read.ts`); before it, a
 * quote inside a JSON string was `\"` to the rules, so `{"text": "{\"client_secret\": …}"}` raised
 * no credential signal. Version 5 binds what version 4 did, its signals from release
 * `writ-signals/4`: the same rules, run over JSON content as it is and over the strings read at
 * each level of JSON text held in strings, `AS_READ_DEPTH` (4) levels deep, as the
 * `writ-redactor/3` redactor reads them; before it, a credential in JSON text in a string in a
 * string was redacted yet raised no signal. Version 6 binds what version 5 did, its signals from
 * release `writ-signals/5`: `writ-signals/4`, with the credential rules also run over each text
 * as written (invisible characters kept, so they are boundaries, as to the redactor) and every
 * rule also over each text with invisible characters read as spaces; before it, a key ended by a
 * soft hyphen and a letter was redacted yet raised no signal, and words separated by soft hyphens
 * ran together into one token. Version 7 binds what version 6 did, its signals from release
 * `writ-signals/6`: `writ-signals/5`, with every Default_Ignorable_Code_Point and format character
 * read as invisible and flagged (`hidden.format_character`: the soft hyphen among them), and the
 * credential rules also run over each text as the `writ-redactor/4` redactor reads it (through
 * invisible characters, tag characters and compatibility forms, and across a line break inside a
 * token); before it, a soft hyphen raised no `hidden_characters`, and a key split by a zero-width
 * space was signalled yet not redacted, and one wrapped by a newline neither. A change to
 * what a receipt binds, or to the detector's output for any text, is a new receipt version; replay
 * recomputes a stored receipt under the version written in its own body (docs/observations.md).
 */
export const OBSERVATION_RECEIPT_VERSIONS = [1, 2, 3, 4, 5, 6, 7] as const;
export const ObservationReceiptVersion = z.union([
  z.literal(1),
  z.literal(2),
  z.literal(3),
  z.literal(4),
  z.literal(5),
  z.literal(6),
  z.literal(7),
]);
export type ObservationReceiptVersion = z.infer<typeof ObservationReceiptVersion>;

/** The version new observation, error-observation and derived-observation receipts are issued under. */
export const OBSERVATION_RECEIPT_VERSION = 7 satisfies ObservationReceiptVersion;

/**
 * The signal rule-set release each receipt version binds (version 1 implicitly, the others by
 * name): `writ-signals/3` is `writ-signals/2`'s rules over a JSON content's text and its strings
 * as read one level deep, `writ-signals/4` the same rules over the text and its strings read
 * `AS_READ_DEPTH` levels deep, `writ-signals/5` that with each text also read as
 * `WRIT_SIGNALS_5_READING` says, `writ-signals/6` as `WRIT_SIGNALS_6_READING` says
 * (`signals/releases.ts`, `scanContentUnder`).
 */
export const SIGNALS_RELEASES = {
  1: 'writ-signals/1',
  2: 'writ-signals/2',
  3: 'writ-signals/2',
  4: 'writ-signals/3',
  5: 'writ-signals/4',
  6: 'writ-signals/5',
  7: 'writ-signals/6',
} as const satisfies Readonly<Record<ObservationReceiptVersion, string>>;

/** The release new receipts are issued with (`signals.ts`, as `scanContentUnder` runs it). */
export const SIGNALS_RELEASE = SIGNALS_RELEASES[OBSERVATION_RECEIPT_VERSION];

/**
 * The version-specific head of every observation receipt body: version 1 as it was issued, later
 * versions with the signal release named, so a reader (and a digest) sees which rule set spoke.
 */
const RECEIPT_V1_FIELDS = { receipt_version: z.literal(1) } as const;
const RECEIPT_V2_FIELDS = {
  receipt_version: z.literal(2),
  signals_release: z.literal(SIGNALS_RELEASES[2]),
} as const;
const RECEIPT_V3_FIELDS = {
  receipt_version: z.literal(3),
  signals_release: z.literal(SIGNALS_RELEASES[3]),
} as const;
const RECEIPT_V4_FIELDS = {
  receipt_version: z.literal(4),
  signals_release: z.literal(SIGNALS_RELEASES[4]),
} as const;
const RECEIPT_V5_FIELDS = {
  receipt_version: z.literal(5),
  signals_release: z.literal(SIGNALS_RELEASES[5]),
} as const;
const RECEIPT_V6_FIELDS = {
  receipt_version: z.literal(6),
  signals_release: z.literal(SIGNALS_RELEASES[6]),
} as const;
const RECEIPT_V7_FIELDS = {
  receipt_version: z.literal(7),
  signals_release: z.literal(SIGNALS_RELEASES[7]),
} as const;

/**
 * Build a discriminated union of one body per receipt version, each strict; `v3` holds the fields
 * versions 3 to 7 bind and earlier ones do not (none for a derived observation).
 */
export function versionedReceiptBody<
  const F extends z.ZodRawShape,
  const G extends z.ZodRawShape = Record<never, never>,
>(fields: F, v3?: G) {
  return z.discriminatedUnion('receipt_version', [
    strict({ ...fields, ...RECEIPT_V1_FIELDS }),
    strict({ ...fields, ...RECEIPT_V2_FIELDS }),
    strict({ ...fields, ...((v3 ?? {}) as G), ...RECEIPT_V3_FIELDS }),
    strict({ ...fields, ...((v3 ?? {}) as G), ...RECEIPT_V4_FIELDS }),
    strict({ ...fields, ...((v3 ?? {}) as G), ...RECEIPT_V5_FIELDS }),
    strict({ ...fields, ...((v3 ?? {}) as G), ...RECEIPT_V6_FIELDS }),
    strict({ ...fields, ...((v3 ?? {}) as G), ...RECEIPT_V7_FIELDS }),
  ]);
}

/** The version fields of a body issued under `version` (spread into every body the core builds). */
export function receiptVersionFields(version: ObservationReceiptVersion) {
  switch (version) {
    case 1:
      return { receipt_version: 1 as const };
    case 2:
      return { receipt_version: 2 as const, signals_release: SIGNALS_RELEASES[2] };
    case 3:
      return { receipt_version: 3 as const, signals_release: SIGNALS_RELEASES[3] };
    case 4:
      return { receipt_version: 4 as const, signals_release: SIGNALS_RELEASES[4] };
    case 5:
      return { receipt_version: 5 as const, signals_release: SIGNALS_RELEASES[5] };
    case 6:
      return { receipt_version: 6 as const, signals_release: SIGNALS_RELEASES[6] };
    case 7:
      return { receipt_version: 7 as const, signals_release: SIGNALS_RELEASES[7] };
  }
}

/** What every version of a receipt body binds (version 1's body less its version). */
export type VersionlessBody<B extends { receipt_version: number }> = Omit<
  Extract<B, { receipt_version: 1 }>,
  'receipt_version'
>;

/**
 * A body under `version`: the fields every version binds, plus `v3` (what versions 3 to 7 bind)
 * when it is version 3 or later. Never lets an older version carry a newer field: its digest would change.
 */
export function versionedBody<const B extends object, const E extends object>(
  version: ObservationReceiptVersion,
  common: B,
  v3: E,
) {
  switch (version) {
    case 1:
      return { ...common, receipt_version: 1 as const };
    case 2:
      return { ...common, receipt_version: 2 as const, signals_release: SIGNALS_RELEASES[2] };
    case 3:
      return { ...common, ...v3, receipt_version: 3 as const, signals_release: SIGNALS_RELEASES[3] };
    case 4:
      return { ...common, ...v3, receipt_version: 4 as const, signals_release: SIGNALS_RELEASES[4] };
    case 5:
      return { ...common, ...v3, receipt_version: 5 as const, signals_release: SIGNALS_RELEASES[5] };
    case 6:
      return { ...common, ...v3, receipt_version: 6 as const, signals_release: SIGNALS_RELEASES[6] };
    case 7:
      return { ...common, ...v3, receipt_version: 7 as const, signals_release: SIGNALS_RELEASES[7] };
  }
}

/**
 * What versions 3 to 7 bind of the content itself: the SHA-256 and UTF-8 length of the inline bytes
 * received (the findings a refusal keeps instead of the bytes). `actual_sha256` is null when the
 * bytes were over the bound and never hashed; both are null for an artifact (its digest and size
 * are the declared ones, already bound).
 */
const CONTENT_V3_FIELDS = {
  actual_sha256: Sha256.nullable(),
  actual_bytes: Count.nullable(),
} as const;

export const ObservationDecision = z.enum(['accepted_untrusted_evidence', 'rejected']);
export type ObservationDecision = z.infer<typeof ObservationDecision>;

/**
 * The identities every observation receipt (output or error diagnostic) binds: the observation,
 * the trusted tenant and policy it was validated for, and the whole upstream chain.
 */
const RECEIPT_JOIN_FIELDS = {
  observation_id: Identifier,
  /** From trusted context: the tenant and policy the observation was validated for. */
  tenant_id: Identifier,
  policy_sha256: Sha256,
  observation_policy_sha256: Sha256,
  trusted_context_sha256: Sha256,
  tool_contract_sha256: Sha256,
  authorization_receipt_sha256: Sha256,
  execution_receipt_sha256: Sha256,
  invocation_sha256: Sha256,
  /** The whole raw observation, payload included: every claimed field is bound. */
  raw_observation_sha256: Sha256,
  source_release: Label,
} as const;

/** What is hashed. Any envelope (issuer, signature, log position) wraps it, never joins it. */
export const ObservationReceiptBody = versionedReceiptBody(
  {
    receipt_kind: z.literal('observation'),
    ...RECEIPT_JOIN_FIELDS,
    source_generation: Count.nullable(),
    source_as_of_unix_ms: UnixMs,
    media_type: MediaType,
    content_kind: z.enum(['inline', 'artifact']),
    payload_sha256: Sha256,
    payload_bytes: Count,
    locators_sha256: Sha256,
    locator_count: Count,
    observed_at_unix_ms: UnixMs,
    evaluated_at_unix_ms: UnixMs,
    decision: ObservationDecision,
    /** `untrusted_evidence_only` when accepted; `null` when rejected (a rejection admits nothing). */
    authority: ObservationAuthority.nullable(),
    signals: z.array(ObservationSignal),
    signal_hits: z.array(SignalHit),
    violations: z.array(ObservationViolation),
  },
  CONTENT_V3_FIELDS,
);
export type ObservationReceiptBody = z.infer<typeof ObservationReceiptBody>;

export const ObservationReceipt = strict({ sha256: Sha256, body: ObservationReceiptBody });
export type ObservationReceipt = z.infer<typeof ObservationReceipt>;

/** Exact content an evidence item carries: inline text with its identity, or an artifact reference. */
export const EvidenceContent = z.discriminatedUnion('kind', [
  strict({
    kind: z.literal('inline'),
    text: ExactText(OBSERVATION_LIMITS.maxInlinePayloadBytes),
    sha256: Sha256,
    bytes: Count,
  }),
  strict({ kind: z.literal('artifact'), artifact: ArtifactReference }),
]);
export type EvidenceContent = z.infer<typeof EvidenceContent>;

/**
 * An accepted observation: exact content, its provenance, its signals, and the closed authority
 * `untrusted_evidence_only`. Never an instruction, permission, policy, approval or completion proof.
 */
export const ToolEvidenceCandidate = strict({
  evidence_kind: z.literal('tool_observation'),
  authority: ObservationAuthority,
  observation_receipt_sha256: Sha256,
  observation_id: Identifier,
  tenant_id: Identifier,
  policy_sha256: Sha256,
  tool_contract_sha256: Sha256,
  invocation_sha256: Sha256,
  execution_receipt_sha256: Sha256,
  source_release: Label,
  source_generation: Count.nullable(),
  source_as_of_unix_ms: UnixMs,
  observed_at_unix_ms: UnixMs,
  media_type: MediaType,
  content: EvidenceContent,
  locators: z.array(Locator),
  signals: z.array(ObservationSignal),
  signal_hits: z.array(SignalHit),
});
export type ToolEvidenceCandidate = z.infer<typeof ToolEvidenceCandidate>;

// ---------------------------------------------------------------------------------------------
// Failed-execution diagnostics: a distinct contract, never the success-output schema

/** Error detail from a `failed_no_effect` execution. Not a `RawToolObservation`: it has no success shape. */
export const RawToolErrorObservation = strict({
  observation_id: Identifier,
  tenant_id: Identifier,
  policy_sha256: Sha256,
  tool_contract_sha256: Sha256,
  invocation_sha256: Sha256,
  execution_receipt_sha256: Sha256,
  source_release: Label,
  error_code: Identifier,
  media_type: MediaType,
  detail: ExactText(OBSERVATION_LIMITS.maxErrorDetailBytes),
  detail_sha256: Sha256,
  detail_bytes: Count,
  observed_at_unix_ms: UnixMs,
});
export type RawToolErrorObservation = z.infer<typeof RawToolErrorObservation>;

export const ErrorObservationReceiptBody = versionedReceiptBody(
  {
    receipt_kind: z.literal('error_observation'),
    ...RECEIPT_JOIN_FIELDS,
    error_code: Identifier,
    media_type: MediaType,
    detail_sha256: Sha256,
    detail_bytes: Count,
    observed_at_unix_ms: UnixMs,
    evaluated_at_unix_ms: UnixMs,
    decision: z.enum(['accepted_error_diagnostic', 'rejected']),
    authority: ObservationAuthority.nullable(),
    signals: z.array(ObservationSignal),
    signal_hits: z.array(SignalHit),
    violations: z.array(ObservationViolation),
  },
  CONTENT_V3_FIELDS,
);
export type ErrorObservationReceiptBody = z.infer<typeof ErrorObservationReceiptBody>;

export const ErrorObservationReceipt = strict({ sha256: Sha256, body: ErrorObservationReceiptBody });
export type ErrorObservationReceipt = z.infer<typeof ErrorObservationReceipt>;

/** Operational evidence about a failed attempt. It is not tool output and not a success. */
export const ToolErrorEvidence = strict({
  evidence_kind: z.literal('execution_error_diagnostic'),
  authority: ObservationAuthority,
  error_observation_receipt_sha256: Sha256,
  observation_id: Identifier,
  tenant_id: Identifier,
  tool_contract_sha256: Sha256,
  invocation_sha256: Sha256,
  execution_receipt_sha256: Sha256,
  source_release: Label,
  error_code: Identifier,
  media_type: MediaType,
  detail: ExactText(OBSERVATION_LIMITS.maxErrorDetailBytes),
  detail_sha256: Sha256,
  detail_bytes: Count,
  signals: z.array(ObservationSignal),
  signal_hits: z.array(SignalHit),
});
export type ToolErrorEvidence = z.infer<typeof ToolErrorEvidence>;

// ---------------------------------------------------------------------------------------------
// Media type classes

const TEXT_APPLICATION_TYPES = new Set([
  'application/json',
  'application/x-ndjson',
  'application/xml',
  'application/yaml',
  'application/x-yaml',
  'application/csv',
  'application/javascript',
  'application/toml',
]);

/** Media types that may be carried inline as UTF-8 text. Everything else must be an artifact. */
export function isTextMediaType(mediaType: string): boolean {
  return (
    mediaType.startsWith('text/') ||
    TEXT_APPLICATION_TYPES.has(mediaType) ||
    mediaType.endsWith('+json') ||
    mediaType.endsWith('+xml')
  );
}

/** Media types whose inline payload is parsed as strict JSON (so JSON Pointers can be resolved). */
export function isJsonMediaType(mediaType: string): boolean {
  return mediaType === 'application/json' || mediaType.endsWith('+json');
}

/**
 * Whether `value` has an RFC 8785 form. Schema-valid strings can still hold a lone surrogate
 * (labels allow any non-control text); such input must fail as a typed error before any digest.
 */
export function canonicalizable(value: unknown): boolean {
  try {
    canonicalize(value);
    return true;
  } catch (e) {
    if (e instanceof CanonicalizationError) return false;
    throw e;
  }
}
