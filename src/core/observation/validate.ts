/**
 * `validateObservation`: are these the exact, bounded bytes of that verified execution, and what
 * may the harness believe about them (spec ch. 12, "Bind output to its complete upstream chain")?
 *
 * Guarantees: the upstream execution receipt is replayed from its inputs before anything else is
 * believed; tenant, policy, contract, invocation and execution-receipt identities are joined
 * against trusted context and both upstream receipts; the byte bound is applied to the payload
 * before it is hashed, parsed or scanned; the executor's output digest, the claimed digest and
 * SHA-256 of the payload bytes must agree, and so must the three byte counts. Only a
 * `verified_succeeded` execution yields success evidence (indeterminate, failed and rejected
 * executions never do). Every well-formed observation gets a receipt with every violation,
 * sorted and unique; it is accepted only when there are none, and then only as a
 * `ToolEvidenceCandidate` whose authority is `untrusted_evidence_only`, with its signals attached.
 * Malformed input is a typed `CoreError`, never a receipt. Receipts are issued under the current
 * receipt version, whose body names the signal release that produced its signals; an earlier
 * version is computed only when replay asks for it (`receiptVersion`), with that version's rules.
 * A classifier outcome recorded in the trusted context only ever adds a signal (never a
 * violation, never removes a hit, never changes the decision).
 * Never: reads a clock (`now` is an argument), does I/O, deletes or rewrites payload content,
 * follows anything the payload says, or lets a payload choose its own authority.
 */
import { z } from 'zod';
import { digestOf, sha256Hex } from '../canonical/canonical.js';
import { contractDigest, validateContract } from '../contracts/contract.js';
import { coreError, fromZodError, type CoreError, type CoreErrorReason } from '../errors.js';
import { decodeJsonText, utf8ByteLength, utf8Encode, type JsonValue } from '../canonical/json.js';
import {
  AuthorizationReceipt,
  type ExecutionStatus,
  ExecutionReceipt,
  ToolContract,
  ToolExecutionObservation,
} from '../model.js';
import { verifyExecutionReceipt } from '../receipts/replay.js';
import { err, ok, type Result } from '../result.js';
import { Count, Sha256, UnixMs, strict } from '../schema.js';
import { checkArtifact } from './artifact.js';
import { checkFreshness } from './freshness.js';
import { checkLocators, type LocatorTarget } from './locators.js';
import {
  type ErrorObservationReceipt,
  type ErrorObservationReceiptBody,
  OBSERVATION_LIMITS,
  OBSERVATION_RECEIPT_VERSION,
  type ObservationReceipt,
  ObservationReceiptVersion,
  type ObservationReceiptBody,
  ObservationPolicy,
  ObservationTrustedContext,
  ObservationViolation,
  RawToolErrorObservation,
  RawToolObservation,
  SignalHit,
  canonicalizable,
  ObservationSignal,
  type VersionlessBody,
  versionedBody,
  type ToolErrorEvidence,
  type ToolEvidenceCandidate,
  isJsonMediaType,
  isTextMediaType,
} from './schema.js';
import { longestEncodedRun } from './signals.js';
import { scanContentUnder } from './signals/releases.js';
import { withClassifierOutcome } from './signals/classifier.js';

// ---------------------------------------------------------------------------------------------
// Inputs and outputs

/** The verified upstream execution: the stored receipt and the executor observation it was computed from. */
export const ExecutionEvidence = strict({
  receipt: ExecutionReceipt,
  observation: ToolExecutionObservation,
});
export type ExecutionEvidence = z.infer<typeof ExecutionEvidence>;

const commonInput = {
  /** Established by the adapter (authenticated tenant, current policy, storage lookups). */
  trusted: ObservationTrustedContext,
  /** The tenant's observation policy; its digest is bound into the receipt. */
  policy: ObservationPolicy,
  /** The pinned contract the call was authorized under. */
  contract: ToolContract,
  /** The stored authorization receipt of the call. */
  authorization: AuthorizationReceipt,
  execution: ExecutionEvidence,
  /** Validation time, read once by the adapter. Strict replay passes the original value. */
  now: UnixMs,
};

export const ObservationValidationInput = strict({ ...commonInput, observation: RawToolObservation });
export type ObservationValidationInput = z.infer<typeof ObservationValidationInput>;

export const ErrorObservationValidationInput = strict({
  ...commonInput,
  observation: RawToolErrorObservation,
});
export type ErrorObservationValidationInput = z.infer<typeof ErrorObservationValidationInput>;

export interface ObservationOutcome {
  readonly receipt: ObservationReceipt;
  /** Present exactly when `receipt.body.decision` is `accepted_untrusted_evidence`. */
  readonly candidate: ToolEvidenceCandidate | null;
}

/**
 * Which receipt version to compute. New receipts are always the current version (the default);
 * an earlier version is for replay only: recomputing a stored receipt under the version and
 * signal release it was issued with.
 */
export interface ReceiptVersionOption {
  readonly receiptVersion?: ObservationReceiptVersion;
}

export interface ErrorObservationOutcome {
  readonly receipt: ErrorObservationReceipt;
  /** Present exactly when `receipt.body.decision` is `accepted_error_diagnostic`. */
  readonly evidence: ToolErrorEvidence | null;
}

/**
 * What a refused observation keeps of the content it refused: never the bytes, only the raw
 * observation's digest and every finding the bytes produced, so its receipt still replays
 * (`verifyWithheldObservationReceipt`). The findings cannot be recomputed without the bytes; they
 * are bound by the receipt's digest, and everything else in the receipt is recomputed.
 */
export const WithheldContent = strict({
  raw_observation_sha256: Sha256,
  /** UTF-8 length of the refused payload (or error detail). */
  actual_bytes: Count,
  /** SHA-256 of its bytes; null when it was over the bound and never hashed. */
  actual_sha256: Sha256.nullable(),
  /** Violations read from the bytes: encoded blob, malformed JSON, locators checked against them. */
  content_violations: z.array(ObservationViolation),
  signals: z.array(ObservationSignal),
  signal_hits: z.array(SignalHit),
});
export type WithheldContent = z.infer<typeof WithheldContent>;

const { payload: _payload, ...observationFields } = RawToolObservation.shape;
/** A raw output observation as stored for a refusal: every field but the payload. */
export const WithheldObservation = strict(observationFields);
export type WithheldObservation = z.infer<typeof WithheldObservation>;

const { detail: _detail, ...errorObservationFields } = RawToolErrorObservation.shape;
/** A raw error observation as stored for a refusal: every field but the detail. */
export const WithheldErrorObservation = strict(errorObservationFields);
export type WithheldErrorObservation = z.infer<typeof WithheldErrorObservation>;

/** The payload (or detail) text, or what was kept of it when it was refused. */
type Content = { readonly text: string } | { readonly withheld: WithheldContent };

// ---------------------------------------------------------------------------------------------
// Success-output observations

export function validateObservation(
  input: ObservationValidationInput,
  options: ReceiptVersionOption = {},
): Result<ObservationOutcome, CoreError> {
  const version = parseVersion(options);
  if (!version.ok) return version;
  const parsed = parseInput(ObservationValidationInput, input);
  if (!parsed.ok) return parsed;
  const o = parsed.value.observation;
  return ok(
    decideObservation(parsed.value, o, o.payload === null ? null : { text: o.payload }, version.value),
  );
}

/** The findings of an inline payload's bytes (what a refusal keeps instead of the bytes). */
export function inlineContentFindings(
  o: RawToolObservation,
  policy: ObservationPolicy,
  version: ObservationReceiptVersion = OBSERVATION_RECEIPT_VERSION,
): WithheldContent {
  const payload = o.payload ?? '';
  const actualBytes = utf8ByteLength(payload);
  const withinBound = actualBytes <= policy.max_payload_bytes && o.payload_bytes <= policy.max_payload_bytes;
  const base = { raw_observation_sha256: digestOf(o), actual_bytes: actualBytes };
  // The bound is applied before hashing, parsing or scanning.
  if (!withinBound) {
    return {
      ...base,
      actual_sha256: null,
      content_violations: checkLocators(o.locators, policy, null, o.observed_at_unix_ms),
      signals: [],
      signal_hits: [],
    };
  }
  const v = new Set<ObservationViolation>();
  const bytes = utf8Encode(payload);
  // An unbounded base64/hex run is binary content masquerading as text.
  if (longestEncodedRun(payload) > policy.max_inline_encoded_chars) v.add('inline_encoded_blob');
  const isJson = isJsonMediaType(o.media_type);
  let json: JsonValue | undefined;
  if (isJson) {
    // Strict decode: duplicate keys would let two consumers read two different documents.
    const decoded = decodeJsonText(payload, { maxBytes: policy.max_payload_bytes, maxDepth: 64 });
    if (decoded.ok) json = decoded.value;
    else v.add('payload_malformed');
  }
  const target: LocatorTarget = { kind: 'inline', bytes, isJson, json };
  for (const x of checkLocators(o.locators, policy, target, o.observed_at_unix_ms)) v.add(x);
  // The signal rule set of the receipt version being computed (signals/releases.ts); from
  // version 4, JSON content is also scanned as a model reads its strings (version 5: at each
  // level of JSON text held in strings, as the redactor reads them; version 6: the credential
  // rules also over each of those texts as written, every rule also with invisibles as spaces;
  // version 7: every default-ignorable character invisible and flagged, the credential rules also
  // over each text read through invisibles and across a line break inside a token).
  const signals = scanContentUnder(version, payload, o.media_type);
  return {
    ...base,
    actual_sha256: sha256Hex(bytes),
    content_violations: [...v].sort(),
    signals: signals.signals,
    signal_hits: signals.hits,
  };
}

/** One decision for validation and for replay of a refusal; `content` null for an artifact. */
function decideObservation(
  i: Omit<ObservationValidationInput, 'observation'>,
  o: WithheldObservation & { readonly payload?: string | null },
  content: Content | null,
  version: ObservationReceiptVersion,
): ObservationOutcome {
  const contractSha = contractDigest(i.contract);
  const exec = i.execution.receipt.body;

  const v = new Set<ObservationViolation>(checkUpstream(i, o, contractSha));
  // Indeterminate, failed and rejected executions never enter the success-evidence path: the
  // payload may be a proxy error, a partial response, or another attempt's response.
  if (exec.status !== ('verified_succeeded' satisfies ExecutionStatus)) v.add('execution_not_succeeded');
  // A policy that does not allow the media type has not reviewed how it is consumed.
  if (!i.policy.allowed_media_types.includes(o.media_type)) v.add('media_type_not_allowed');

  let findings: WithheldContent | null = null;
  if (content !== null) {
    // Binary smuggled as inline text; it belongs in an artifact.
    if (!isTextMediaType(o.media_type)) v.add('inline_media_type_not_text');
    findings =
      'withheld' in content
        ? content.withheld
        : inlineContentFindings({ ...o, payload: content.text } as RawToolObservation, i.policy, version);
    // The bound is applied to the declared and the actual size before hashing, parsing or scanning.
    const withinBound =
      findings.actual_bytes <= i.policy.max_payload_bytes && o.payload_bytes <= i.policy.max_payload_bytes;
    if (!withinBound) v.add('payload_too_large');
    // Truncation or representation disagreement between executor, reporter and bytes.
    if (findings.actual_bytes !== o.payload_bytes || exec.output_bytes !== o.payload_bytes)
      v.add('payload_bytes_mismatch');
    // Substitution: the reported output is not what the executor returned.
    if (exec.output_sha256 !== o.payload_sha256) v.add('payload_digest_mismatch');
    if (findings.actual_sha256 !== null && findings.actual_sha256 !== o.payload_sha256)
      v.add('payload_digest_mismatch');
    for (const x of findings.content_violations) v.add(x);
  } else if (o.artifact !== null) {
    const a = o.artifact;
    for (const x of checkArtifact(a, o.media_type, i.policy, i.trusted)) v.add(x);
    if (o.payload_bytes > i.policy.max_artifact_bytes) v.add('payload_too_large');
    // The artifact is the output: its identity must be the executor's and the reporter's.
    if (a.byte_size !== o.payload_bytes || exec.output_bytes !== o.payload_bytes)
      v.add('payload_bytes_mismatch');
    if (a.artifact_sha256 !== o.payload_sha256 || exec.output_sha256 !== o.payload_sha256) {
      v.add('payload_digest_mismatch');
    }
    for (const x of checkLocators(
      o.locators,
      i.policy,
      { kind: 'artifact', artifact: a },
      o.observed_at_unix_ms,
    ))
      v.add(x);
  }
  for (const x of checkFreshness(o, i.policy, i.trusted, i.now)) v.add(x);
  // The classifier's recorded verdict can only add a signal, never a violation or authority.
  const signals = withClassifierOutcome(
    { signals: findings?.signals ?? [], hits: findings?.signal_hits ?? [] },
    i.trusted.classifier,
  );

  const violations = [...v].sort();
  const accepted = violations.length === 0;
  const common: VersionlessBody<ObservationReceiptBody> = {
    receipt_kind: 'observation',
    ...receiptJoins(i, o, contractSha, findings?.raw_observation_sha256 ?? digestOf(o)),
    source_generation: o.source_generation,
    source_as_of_unix_ms: o.source_as_of_unix_ms,
    media_type: o.media_type,
    content_kind: content !== null ? 'inline' : 'artifact',
    payload_sha256: o.payload_sha256,
    payload_bytes: o.payload_bytes,
    locators_sha256: digestOf(o.locators),
    locator_count: o.locators.length,
    observed_at_unix_ms: o.observed_at_unix_ms,
    evaluated_at_unix_ms: i.now,
    decision: accepted ? 'accepted_untrusted_evidence' : 'rejected',
    authority: accepted ? 'untrusted_evidence_only' : null,
    signals: signals.signals,
    signal_hits: signals.hits,
    violations,
  };
  // Versions 3 to 5 bind the received bytes' digest and size themselves, not only whether they differ
  // from the declared ones: a withheld refusal's findings then have exactly one value that replays.
  const body: ObservationReceiptBody = versionedBody(version, common, {
    actual_sha256: findings?.actual_sha256 ?? null,
    actual_bytes: findings?.actual_bytes ?? null,
  });
  const receipt: ObservationReceipt = { sha256: digestOf(body), body };
  // Withheld content is only ever a refusal's: without the bytes there is nothing to admit.
  if (!accepted || (content !== null && 'withheld' in content)) return { receipt, candidate: null };

  const candidate: ToolEvidenceCandidate = {
    evidence_kind: 'tool_observation',
    // Set here, by the validator, from nothing in the payload: the only value there is.
    authority: 'untrusted_evidence_only',
    observation_receipt_sha256: receipt.sha256,
    observation_id: o.observation_id,
    tenant_id: i.trusted.tenant_id,
    policy_sha256: i.trusted.policy_sha256,
    tool_contract_sha256: contractSha,
    invocation_sha256: o.invocation_sha256,
    execution_receipt_sha256: i.execution.receipt.sha256,
    source_release: o.source_release,
    source_generation: o.source_generation,
    source_as_of_unix_ms: o.source_as_of_unix_ms,
    observed_at_unix_ms: o.observed_at_unix_ms,
    media_type: o.media_type,
    content:
      content !== null && 'text' in content
        ? { kind: 'inline', text: content.text, sha256: o.payload_sha256, bytes: o.payload_bytes }
        : { kind: 'artifact', artifact: o.artifact as NonNullable<typeof o.artifact> },
    locators: o.locators,
    signals: signals.signals,
    signal_hits: signals.hits,
  };
  return { receipt, candidate };
}

/** Recompute a refused output observation's receipt from what was kept of it (replay only). */
export function decideWithheldObservation(
  input: Omit<ObservationValidationInput, 'observation'> & {
    readonly observation: WithheldObservation;
    readonly withheld: WithheldContent;
  },
  options: ReceiptVersionOption = {},
): Result<ObservationReceipt, CoreError> {
  const version = parseVersion(options);
  if (!version.ok) return version;
  const { observation, withheld, ...common } = input;
  const parsed = parseInput(ObservationValidationInput, {
    ...common,
    observation: { ...observation, payload: '' },
  });
  if (!parsed.ok) return parsed;
  const o = WithheldObservation.safeParse(observation);
  const w = WithheldContent.safeParse(withheld);
  if (!o.success) return err(fromZodError('invalid_observation', 'observation', o.error));
  if (!w.success) return err(fromZodError('invalid_observation', 'withheld', w.error));
  return ok(decideObservation(parsed.value, o.data, { withheld: w.data }, version.value).receipt);
}

// ---------------------------------------------------------------------------------------------
// Failed-execution diagnostics: a distinct contract (spec ch. 12, "give it a distinct
// error-observation contract. Do not feed it through a success-output schema")

export function validateErrorObservation(
  input: ErrorObservationValidationInput,
  options: ReceiptVersionOption = {},
): Result<ErrorObservationOutcome, CoreError> {
  const version = parseVersion(options);
  if (!version.ok) return version;
  const parsed = parseInput(ErrorObservationValidationInput, input);
  if (!parsed.ok) return parsed;
  const o = parsed.value.observation;
  return ok(decideErrorObservation(parsed.value, o, { text: o.detail }, version.value));
}

/** The findings of an error detail's bytes (what a refusal keeps instead of the bytes). */
export function errorDetailFindings(
  o: RawToolErrorObservation,
  policy: ObservationPolicy,
  version: ObservationReceiptVersion = OBSERVATION_RECEIPT_VERSION,
): WithheldContent {
  const bound = Math.min(policy.max_payload_bytes, OBSERVATION_LIMITS.maxErrorDetailBytes);
  const actualBytes = utf8ByteLength(o.detail);
  const withinBound = actualBytes <= bound && o.detail_bytes <= bound;
  const signals = withinBound ? scanContentUnder(version, o.detail, o.media_type) : { signals: [], hits: [] };
  return {
    raw_observation_sha256: digestOf(o),
    actual_bytes: actualBytes,
    actual_sha256: withinBound ? sha256Hex(utf8Encode(o.detail)) : null,
    content_violations: [],
    signals: signals.signals,
    signal_hits: signals.hits,
  };
}

function decideErrorObservation(
  i: Omit<ErrorObservationValidationInput, 'observation'>,
  o: WithheldErrorObservation,
  content: Content,
  version: ObservationReceiptVersion,
): ErrorObservationOutcome {
  const contractSha = contractDigest(i.contract);
  const exec = i.execution.receipt.body;

  const v = new Set<ObservationViolation>(checkUpstream(i, o, contractSha));
  // Only a verified no-effect failure has diagnostics; success output and indeterminate attempts
  // must not be laundered through the error channel.
  if (exec.status !== ('verified_failed_no_effect' satisfies ExecutionStatus))
    v.add('execution_not_failed_no_effect');
  if (!i.policy.allowed_media_types.includes(o.media_type)) v.add('media_type_not_allowed');
  if (!isTextMediaType(o.media_type)) v.add('inline_media_type_not_text');
  const bound = Math.min(i.policy.max_payload_bytes, OBSERVATION_LIMITS.maxErrorDetailBytes);
  const findings =
    'withheld' in content
      ? content.withheld
      : errorDetailFindings({ ...o, detail: content.text } as RawToolErrorObservation, i.policy, version);
  const withinBound = findings.actual_bytes <= bound && o.detail_bytes <= bound;
  if (!withinBound) v.add('payload_too_large');
  if (findings.actual_bytes !== o.detail_bytes || exec.output_bytes !== o.detail_bytes)
    v.add('payload_bytes_mismatch');
  // Detail the executor never bound by digest is unverifiable: it may come from anywhere.
  if (exec.output_sha256 !== o.detail_sha256) v.add('payload_digest_mismatch');
  if (findings.actual_sha256 !== null && findings.actual_sha256 !== o.detail_sha256)
    v.add('payload_digest_mismatch');
  for (const x of findings.content_violations) v.add(x);
  const signals = withClassifierOutcome(
    { signals: findings.signals, hits: findings.signal_hits },
    i.trusted.classifier,
  );
  if (o.observed_at_unix_ms > i.now + i.policy.max_clock_skew_ms) v.add('observed_after_evaluation');

  const violations = [...v].sort();
  const accepted = violations.length === 0;
  const common: VersionlessBody<ErrorObservationReceiptBody> = {
    receipt_kind: 'error_observation',
    ...receiptJoins(i, o, contractSha, findings.raw_observation_sha256),
    error_code: o.error_code,
    media_type: o.media_type,
    detail_sha256: o.detail_sha256,
    detail_bytes: o.detail_bytes,
    observed_at_unix_ms: o.observed_at_unix_ms,
    evaluated_at_unix_ms: i.now,
    decision: accepted ? 'accepted_error_diagnostic' : 'rejected',
    authority: accepted ? 'untrusted_evidence_only' : null,
    signals: signals.signals,
    signal_hits: signals.hits,
    violations,
  };
  // As for output observations: versions 3 to 6 bind the received detail's digest and size exactly.
  const body: ErrorObservationReceiptBody = versionedBody(version, common, {
    actual_sha256: findings.actual_sha256,
    actual_bytes: findings.actual_bytes,
  });
  const receipt: ErrorObservationReceipt = { sha256: digestOf(body), body };
  // Withheld content is only ever a refusal's: without the bytes there is nothing to admit.
  if (!accepted || !('text' in content)) return { receipt, evidence: null };
  return {
    receipt,
    evidence: {
      evidence_kind: 'execution_error_diagnostic',
      authority: 'untrusted_evidence_only',
      error_observation_receipt_sha256: receipt.sha256,
      observation_id: o.observation_id,
      tenant_id: i.trusted.tenant_id,
      tool_contract_sha256: contractSha,
      invocation_sha256: o.invocation_sha256,
      execution_receipt_sha256: i.execution.receipt.sha256,
      source_release: o.source_release,
      error_code: o.error_code,
      media_type: o.media_type,
      detail: content.text,
      detail_sha256: o.detail_sha256,
      detail_bytes: o.detail_bytes,
      signals: signals.signals,
      signal_hits: signals.hits,
    },
  };
}

/** Recompute a refused error observation's receipt from what was kept of it (replay only). */
export function decideWithheldErrorObservation(
  input: Omit<ErrorObservationValidationInput, 'observation'> & {
    readonly observation: WithheldErrorObservation;
    readonly withheld: WithheldContent;
  },
  options: ReceiptVersionOption = {},
): Result<ErrorObservationReceipt, CoreError> {
  const version = parseVersion(options);
  if (!version.ok) return version;
  const { observation, withheld, ...common } = input;
  const parsed = parseInput(ErrorObservationValidationInput, {
    ...common,
    observation: { ...observation, detail: '' },
  });
  if (!parsed.ok) return parsed;
  const o = WithheldErrorObservation.safeParse(observation);
  const w = WithheldContent.safeParse(withheld);
  if (!o.success) return err(fromZodError('invalid_observation', 'observation', o.error));
  if (!w.success) return err(fromZodError('invalid_observation', 'withheld', w.error));
  return ok(decideErrorObservation(parsed.value, o.data, { withheld: w.data }, version.value).receipt);
}

// ---------------------------------------------------------------------------------------------
// Shared checks

interface Envelope {
  readonly tenant_id: string;
  readonly policy_sha256: string;
  readonly tool_contract_sha256: string;
  readonly invocation_sha256: string;
  readonly execution_receipt_sha256: string;
  readonly observed_at_unix_ms: number;
}

type CommonInput = Omit<ObservationValidationInput, 'observation'>;

/** The identity fields shared by the output and error-diagnostic receipt bodies. */
function receiptJoins(
  i: CommonInput,
  o: Envelope & { readonly observation_id: string; readonly source_release: string },
  contractSha: string,
  rawSha: string,
) {
  return {
    observation_id: o.observation_id,
    tenant_id: i.trusted.tenant_id,
    policy_sha256: i.trusted.policy_sha256,
    observation_policy_sha256: digestOf(i.policy),
    trusted_context_sha256: digestOf(i.trusted),
    tool_contract_sha256: contractSha,
    authorization_receipt_sha256: i.authorization.sha256,
    execution_receipt_sha256: i.execution.receipt.sha256,
    invocation_sha256: o.invocation_sha256,
    raw_observation_sha256: rawSha,
    source_release: o.source_release,
  };
}

/** Upstream replay and identity joins, shared by the success and error contracts. */
function checkUpstream(i: CommonInput, o: Envelope, contractSha: string): ObservationViolation[] {
  const v = new Set<ObservationViolation>();
  const auth = i.authorization.body;
  const exec = i.execution.receipt.body;
  const tenant = i.trusted.tenant_id;

  // A stored execution receipt that does not reproduce from its inputs was forged or edited
  // (e.g. an indeterminate status rewritten to success with a recomputed digest).
  const replay = verifyExecutionReceipt(i.execution.receipt, {
    contract: i.contract,
    authorization: i.authorization,
    observation: i.execution.observation,
  });
  if (!replay.ok) v.add('execution_receipt_replay_failed');
  // Output of call A attached to the receipt of call B, or a receipt of another authorization.
  if (
    o.execution_receipt_sha256 !== i.execution.receipt.sha256 ||
    exec.authorization_receipt_sha256 !== i.authorization.sha256
  ) {
    v.add('execution_receipt_mismatch');
  }
  // Tenant A's output entering tenant B's context.
  if (o.tenant_id !== tenant || exec.tenant_id !== tenant || auth.tenant_id !== tenant)
    v.add('tenant_mismatch');
  // Output validated under a policy other than the one the call was authorized under.
  if (o.policy_sha256 !== i.trusted.policy_sha256 || auth.policy_sha256 !== i.trusted.policy_sha256) {
    v.add('policy_mismatch');
  }
  // Output of another (or a drifted) tool definition.
  if (
    o.tool_contract_sha256 !== contractSha ||
    exec.tool_contract_sha256 !== contractSha ||
    auth.tool_contract_sha256 !== contractSha
  ) {
    v.add('contract_mismatch');
  }
  // Output of another run's call: the invocation is the exact call, input and run envelope.
  if (o.invocation_sha256 !== exec.invocation_sha256 || o.invocation_sha256 !== auth.invocation_sha256) {
    v.add('invocation_mismatch');
  }
  // One observation id naming two different observations makes citations ambiguous.
  if (i.trusted.observation_id_conflict) v.add('observation_id_conflict');
  // Output observed before the execution completed is an impossible join, not this execution's.
  if (o.observed_at_unix_ms < exec.completed_at_unix_ms) v.add('observed_before_completion');
  return [...v].sort();
}

/** The receipt version asked for; a JavaScript caller can pass anything, so it is checked. */
export function parseVersion(options: ReceiptVersionOption): Result<ObservationReceiptVersion, CoreError> {
  const asked = options.receiptVersion;
  const v = ObservationReceiptVersion.safeParse(asked === undefined ? OBSERVATION_RECEIPT_VERSION : asked);
  // An unknown version has no rule set: recomputing under a guessed one would be a silent fork.
  if (!v.success) return err(fromZodError('invalid_request', 'receiptVersion', v.error));
  return ok(v.data);
}

const PART_REASONS: ReadonlyArray<readonly [string, CoreErrorReason]> = [
  ['trusted', 'invalid_request'],
  ['policy', 'invalid_policy'],
  ['contract', 'invalid_contract'],
  ['authorization', 'invalid_receipt'],
  ['execution', 'invalid_receipt'],
  ['observation', 'invalid_observation'],
  ['now', 'invalid_request'],
];

/**
 * Parse the whole input strictly (a typed caller can still hand over a value the types cannot
 * constrain: a lone surrogate, an unsorted policy, an extra field) and map the first failing
 * part to its error reason.
 */
function parseInput<S extends z.ZodType<CommonInput & { observation: unknown }>>(
  schema: S,
  input: unknown,
): Result<z.infer<S>, CoreError> {
  const parsed = schema.safeParse(input);
  if (!parsed.success) {
    const path = parsed.error.issues[0]?.path ?? [];
    const first = String(path[0] ?? '');
    // The executor's report inside `execution` is an observation, not a receipt.
    const reason =
      first === 'execution' && path[1] === 'observation'
        ? 'invalid_observation'
        : (PART_REASONS.find(([p]) => p === first)?.[1] ?? 'invalid_request');
    return err(fromZodError(reason, '', parsed.error));
  }
  const value = parsed.data;
  // A schema-valid string can still hold a lone surrogate (labels allow any non-control text);
  // it has no canonical form, so it must fail here as a typed error, never throw from a digest.
  if (!canonicalizable(value)) {
    return err(coreError('canonicalization_failed', 'input contains a string with a lone surrogate'));
  }
  const policyIssues = checkPolicy(value.policy);
  if (policyIssues !== null) return err(policyIssues);
  const contract = validateContract(value.contract);
  if (!contract.ok) return contract;
  return ok(value);
}

/** Policy metadata beyond its shape: one policy, one canonical form. */
export function checkPolicy(policy: ObservationPolicy): CoreError | null {
  const types = policy.allowed_media_types;
  for (let k = 1; k < types.length; k++) {
    // Unsorted or repeated lists give one policy two digests.
    if ((types[k] as string) <= (types[k - 1] as string)) {
      return coreError('invalid_policy', 'observation policy is not valid', [
        { path: `policy.allowed_media_types[${k}]`, message: 'media types must be sorted and unique' },
      ]);
    }
  }
  return null;
}
