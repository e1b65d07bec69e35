/**
 * Offline receipt bundles: one receipt, its signature, everything needed to recompute it, the
 * issuer's public keys and (normally) its transparency-log proof. `verifyBundle` needs no network
 * and no database (format: docs/receipts.md).
 *
 * Guarantees: a bundle is valid only when, in this order, (1) it parses (bounded, duplicate keys
 * refused, strict schemas), (2) the receipt recomputed from `inputs` by the core's own replay
 * equals the stored receipt field for field and digest for digest, (3) the signature envelope
 * verifies (strict Ed25519) under the trusted keys given out of band (`key_trust: "pinned"`) or,
 * only if none are given, under the bundle's own keys (`key_trust: "bundle"`: proves consistency,
 * not origin), and (4) the injected log verifier proves the leaf (the canonical signature
 * envelope) is in the tenant's log, unless the caller passes `allowUnlogged`. The signature is
 * always required: whether it is never depends on what the bundle contains.
 * Never: reads a clock, does I/O, or trusts a stored decision (it is recomputed).
 */
import { z } from 'zod';
import type { CosignatureVerdict } from '../core/log/cosignature.js';
import { canonicalize } from '../core/canonical/canonical.js';
import { decodeJsonBytes, type JsonValue, utf8Encode } from '../core/canonical/json.js';
import { reconcileOperation, storedReconciliationVersion } from '../core/execution/reconciliation.js';
import {
  AuthorizationReceipt,
  ExecutionReceipt,
  ToolContract,
  ToolExecutionObservation,
  ToolGrant,
  ToolInvocation,
  TrustedState,
} from '../core/model.js';
import {
  ErrorObservationValidationInput,
  ObservationValidationInput,
  WithheldContent,
  WithheldErrorObservation,
  WithheldObservation,
} from '../core/observation/validate.js';
import {
  verifyErrorObservationReceipt,
  verifyObservationReceipt,
  verifyWithheldErrorObservationReceipt,
  verifyWithheldObservationReceipt,
} from '../core/observation/replay.js';
import { parsePublicKeySet, PublicKeySet, type TrustedKeys } from '../core/receipts/keys.js';
import {
  compare,
  type ReplayReport,
  verifyAuthorizationReceipt as replayAuthorization,
  verifyExecutionReceipt,
} from '../core/receipts/replay.js';
import {
  SignatureEnvelope,
  type SignatureFailureReason,
  verifyReceiptSignature,
} from '../core/receipts/signing.js';
import type { Result } from '../core/result.js';
import { Count, Identifier, Sha256, UnixMs, strict } from '../core/schema.js';

export const BUNDLE_VERSION = 1;
/** Bundles carry observation outputs; 16 MiB bounds the largest before parsing. */
export const BUNDLE_MAX_BYTES = 16 * 1024 * 1024;
const BUNDLE_LIMITS = { maxBytes: BUNDLE_MAX_BYTES, maxDepth: 64 } as const;

// ---------------------------------------------------------------------------------------------
// The log seam: the transparency-log library provides the real verifier.

/** The log section of a bundle: C2SP texts, verified only by the injected `LogVerifier`. */
export const LogSection = strict({
  /** C2SP tlog-proof text: the leaf index, tree size and inclusion proof. */
  proof: z.string().max(64 * 1024),
  /** C2SP signed-note checkpoint text of the tenant's log. */
  checkpoint: z.string().max(64 * 1024),
});
export type LogSection = z.infer<typeof LogSection>;

export interface LogInclusion {
  /** The receipt's sequence: its leaf index in the tenant's log. */
  readonly index: number;
  readonly tree_size: number;
  /** The checkpoint's origin line (the log's name). */
  readonly origin: string;
  /** Present only when the verifier was given a witness policy: the witnesses that cosigned. */
  readonly witnesses?: CosignatureVerdict;
}

/** The `LogFailure` reason of a verifier that cannot check at all (not that the proof is wrong). */
export const LOG_NOT_CHECKED = 'log_not_checked';

export interface LogFailure {
  readonly reason: string;
  readonly message: string;
}

/** Whose log the leaf must be in: the verifier checks the checkpoint names this tenant's log. */
export interface LogContext {
  readonly tenant_id: string;
  readonly issuer: string;
  /** The keys the signature was verified under (pinned, or the bundle's): they also sign checkpoints. */
  readonly keys: TrustedKeys;
}

/**
 * Prove that `leaf` (the UTF-8 of the RFC 8785 canonical signature envelope, signature included)
 * is included in the log named by the checkpoint, and that the checkpoint is signed by a log key
 * the verifier trusts. Pure and synchronous.
 */
export type LogVerifier = (
  leaf: Uint8Array,
  log: LogSection,
  context: LogContext,
) => Result<LogInclusion, LogFailure>;

/** The leaf bytes a receipt's log entry holds. */
export function logLeafOf(envelope: SignatureEnvelope): Uint8Array {
  return utf8Encode(canonicalize(envelope));
}

// ---------------------------------------------------------------------------------------------
// The bundle

const AuthorizationBundleInputs = strict({
  kind: z.literal('authorization'),
  contract: ToolContract,
  grant: ToolGrant,
  invocation: ToolInvocation,
  trusted_state: TrustedState,
  evaluated_at_unix_ms: UnixMs,
  /**
   * Version 2 only: the audience and dispatch window the receipt was issued with, and the
   * identities the request named (absent: none); `null` for v1.
   */
  dispatch: strict({
    dispatch_window_ms: Count,
    executor_principal_id: Identifier.nullable(),
    named: strict({ tenant_id: Identifier.nullable(), principal_id: Identifier.nullable() }).optional(),
  }).nullable(),
});

const ExecutionBundleInputs = strict({
  kind: z.literal('execution'),
  contract: ToolContract,
  authorization: AuthorizationReceipt,
  observation: ToolExecutionObservation,
});

const ReconciliationBundleInputs = strict({
  kind: z.literal('reconciliation'),
  contract: ToolContract,
  authorization: AuthorizationReceipt,
  /** The execution receipt the reconciliation resolves, or `null` if the owner never reported. */
  original: ExecutionReceipt.nullable(),
  observation: ToolExecutionObservation,
  /**
   * From the policy in force at reconciliation (`observation_limits.max_clock_skew_ms`), as the
   * reconciliation's stored evidence keeps it (receipts issued before it was kept have no bundle).
   * A version 2 receipt binds it exactly; version 1 only from below (docs/receipts.md).
   */
  max_clock_skew_ms: Count,
  /** Stated by the receipt itself: the operation, who reconciled, when. */
  operation_id: Sha256,
  reconciled_by: Identifier,
  reconciled_at_unix_ms: UnixMs,
});

const ObservationBundleInputs = strict({
  kind: z.literal('observation'),
  validation: ObservationValidationInput,
});
const ErrorObservationBundleInputs = strict({
  kind: z.literal('error_observation'),
  validation: ErrorObservationValidationInput,
});

/**
 * A refused observation whose payload (or error detail) was not kept: the raw observation less
 * those bytes, and what was kept of them (`withheld`: raw digest, size, findings). The core's
 * withheld replay recomputes every other check; the findings are bound by the receipt's digest.
 */
const WithheldObservationBundleInputs = strict({
  kind: z.literal('observation'),
  validation: ObservationValidationInput.omit({ observation: true }).extend({
    observation: WithheldObservation,
    withheld: WithheldContent,
  }),
});
const WithheldErrorObservationBundleInputs = strict({
  kind: z.literal('error_observation'),
  validation: ErrorObservationValidationInput.omit({ observation: true }).extend({
    observation: WithheldErrorObservation,
    withheld: WithheldContent,
  }),
});

/**
 * By kind; an observation kind has two forms told apart by `validation.withheld` (the schemas are
 * strict, so no input parses as both).
 */
export const BundleInputs = z.union([
  z.discriminatedUnion('kind', [
    AuthorizationBundleInputs,
    ExecutionBundleInputs,
    ReconciliationBundleInputs,
    ObservationBundleInputs,
    ErrorObservationBundleInputs,
  ]),
  WithheldObservationBundleInputs,
  WithheldErrorObservationBundleInputs,
]);
export type BundleInputs = z.infer<typeof BundleInputs>;

/** The receipt as stored: identity and body. The body is checked by recomputation, not by shape. */
const StoredReceipt = strict({
  sha256: Sha256,
  body: z.record(
    z.string(),
    z.custom<JsonValue>((v) => v !== undefined),
  ),
});

export const ReceiptBundle = strict({
  bundle_version: z.literal(BUNDLE_VERSION),
  receipt: StoredReceipt,
  signature: SignatureEnvelope,
  inputs: BundleInputs,
  keys: PublicKeySet,
  log: LogSection.nullable(),
});
export type ReceiptBundle = z.infer<typeof ReceiptBundle>;

// ---------------------------------------------------------------------------------------------
// The verdict

export type BundleFailureReason =
  | 'malformed_bundle'
  | 'kind_mismatch'
  | 'receipt_mismatch'
  | 'invalid_bundle_keys'
  | 'keys_mismatch'
  | SignatureFailureReason
  | 'unlogged'
  | 'log_not_checked'
  | 'log_failed';

export type LogStatus =
  | { readonly status: 'included'; readonly inclusion: LogInclusion }
  | { readonly status: 'unlogged_allowed' }
  /** The log verifier could not check (e.g. no log library); accepted only with `allowUnlogged`. */
  | { readonly status: 'not_checked'; readonly message: string }
  | { readonly status: 'failed'; readonly reason: string; readonly message: string }
  | { readonly status: 'not_reached' };

export interface BundleVerdict {
  readonly valid: boolean;
  readonly failure: {
    readonly reason: BundleFailureReason;
    readonly message: string;
    /** For `receipt_mismatch`: the differing fields, as replay names them. */
    readonly differences: readonly string[];
  } | null;
  readonly receipt: { readonly kind: string; readonly sha256: string; readonly tenant_id: string } | null;
  readonly signature: {
    readonly issuer: string;
    readonly key_id: string;
    readonly issued_at_unix_ms: number;
  } | null;
  readonly key_trust: 'pinned' | 'bundle' | null;
  readonly log: LogStatus;
}

export interface VerifyBundleOptions {
  /** The issuer's keys obtained out of band; they take precedence over the bundle's own. */
  readonly trustedKeys?: TrustedKeys;
  readonly logVerifier: LogVerifier;
  /**
   * Accept a bundle without a log section, or whose log the verifier reports it cannot check
   * (`LOG_NOT_CHECKED`); the verdict still says so. A log proof that fails is never accepted.
   */
  readonly allowUnlogged?: boolean;
}

/** Verify a bundle from the bytes of its JSON text (a file). */
export function verifyBundleBytes(bytes: Uint8Array, o: VerifyBundleOptions): BundleVerdict {
  const decoded = decodeJsonBytes(bytes, BUNDLE_LIMITS);
  if (!decoded.ok) return invalid('malformed_bundle', `bundle is not valid json: ${decoded.error.reason}`);
  return verifyBundle(decoded.value, o);
}

/** Verify a bundle already decoded from JSON (untrusted). */
export function verifyBundle(value: unknown, o: VerifyBundleOptions): BundleVerdict {
  const parsed = ReceiptBundle.safeParse(value);
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    return invalid(
      'malformed_bundle',
      `bundle does not match its schema${first ? `: ${first.path.join('.')}` : ''}`,
    );
  }
  const b = parsed.data;
  const kind = b.receipt.body.receipt_kind;
  const tenant = b.receipt.body.tenant_id;
  const subject =
    typeof kind === 'string' && typeof tenant === 'string'
      ? { kind, sha256: b.receipt.sha256, tenant_id: tenant }
      : null;
  const base = {
    receipt: subject,
    signature: null,
    key_trust: null,
    log: { status: 'not_reached' },
  } as const;

  // (1) Recompute: the stored decision is evidence to check, never a fact to believe.
  if (kind !== b.inputs.kind) {
    return { ...base, valid: false, failure: fail('kind_mismatch', 'inputs are for another receipt kind') };
  }
  const replay = recompute(b.receipt, b.inputs);
  if (!replay.ok || subject === null) {
    return {
      ...base,
      valid: false,
      failure: {
        ...fail('receipt_mismatch', 'the receipt does not recompute from its inputs'),
        differences: replay.differences,
      },
    };
  }

  // (2) Keys: pinned keys win; the bundle's own keys prove only that the bundle is self-consistent.
  const own = parsePublicKeySet(b.keys);
  if (!own.ok) return { ...base, valid: false, failure: fail('invalid_bundle_keys', own.error.message) };
  let keys = own.value;
  let key_trust: 'pinned' | 'bundle' = 'bundle';
  if (o.trustedKeys !== undefined) {
    const conflict = keysConflict(own.value, o.trustedKeys);
    if (conflict !== null) return { ...base, valid: false, failure: fail('keys_mismatch', conflict) };
    keys = o.trustedKeys;
    key_trust = 'pinned';
  }
  const sig = verifyReceiptSignature(
    b.signature,
    { sha256: b.receipt.sha256, body: { receipt_kind: subject.kind, tenant_id: subject.tenant_id } },
    keys,
  );
  const signature = {
    issuer: b.signature.issuer,
    key_id: b.signature.key_id,
    issued_at_unix_ms: b.signature.issued_at_unix_ms,
  };
  if (!sig.ok) {
    return {
      ...base,
      key_trust,
      signature,
      valid: false,
      failure: fail(sig.error.reason, sig.error.message),
    };
  }

  // (3) Log: the receipt's sequence and its visibility to everyone who audits the tenant's log.
  const withSig = { ...base, key_trust, signature };
  if (b.log === null) {
    if (o.allowUnlogged === true)
      return { ...withSig, valid: true, failure: null, log: { status: 'unlogged_allowed' } };
    return { ...withSig, valid: false, failure: fail('unlogged', 'the bundle has no log proof') };
  }
  const inclusion = o.logVerifier(logLeafOf(b.signature), b.log, {
    tenant_id: subject.tenant_id,
    issuer: keys.issuer,
    keys,
  });
  if (!inclusion.ok && inclusion.error.reason === LOG_NOT_CHECKED && o.allowUnlogged === true) {
    return {
      ...withSig,
      valid: true,
      failure: null,
      log: { status: 'not_checked', message: inclusion.error.message },
    };
  }
  if (!inclusion.ok) {
    const reason = inclusion.error.reason === LOG_NOT_CHECKED ? 'log_not_checked' : 'log_failed';
    return {
      ...withSig,
      valid: false,
      failure: fail(reason, inclusion.error.message),
      log: { status: 'failed', reason: inclusion.error.reason, message: inclusion.error.message },
    };
  }
  return { ...withSig, valid: true, failure: null, log: { status: 'included', inclusion: inclusion.value } };
}

function fail(reason: BundleFailureReason, message: string) {
  return { reason, message, differences: [] as readonly string[] };
}

function invalid(reason: BundleFailureReason, message: string): BundleVerdict {
  return {
    valid: false,
    failure: fail(reason, message),
    receipt: null,
    signature: null,
    key_trust: null,
    log: { status: 'not_reached' },
  };
}

/**
 * A bundle key that the pinned set also lists must be the same key with the same window, except
 * that the pinned window may since have been closed (rotation after the bundle was made); a
 * bundle key the pinned set does not list is refused. So no byte of the keys section goes unchecked.
 */
function keysConflict(bundle: TrustedKeys, pinned: TrustedKeys): string | null {
  if (bundle.issuer !== pinned.issuer) return `bundle keys are for issuer "${bundle.issuer}"`;
  for (const [id, k] of bundle.keys) {
    const p = pinned.keys.get(id);
    if (p === undefined) return `bundle key "${id}" is not a trusted key`;
    const sameKey =
      k.public_key.length === p.public_key.length && k.public_key.every((x, i) => x === p.public_key[i]);
    const sameWindow =
      k.valid_from_unix_ms === p.valid_from_unix_ms &&
      (k.signing_until_unix_ms === p.signing_until_unix_ms || k.signing_until_unix_ms === null);
    if (!sameKey || !sameWindow) return `bundle key "${id}" differs from the trusted key`;
  }
  return null;
}

function dispatchOptions(d: NonNullable<z.infer<typeof AuthorizationBundleInputs>['dispatch']>) {
  const o = { dispatch_window_ms: d.dispatch_window_ms, executor_principal_id: d.executor_principal_id };
  return d.named === undefined ? o : { ...o, named: d.named };
}

function recompute(
  stored: { sha256: string; body: Record<string, JsonValue> },
  i: BundleInputs,
): ReplayReport {
  switch (i.kind) {
    case 'authorization':
      return replayAuthorization(stored, {
        contract: i.contract,
        grant: i.grant,
        invocation: i.invocation,
        now: i.evaluated_at_unix_ms,
        trusted: i.trusted_state,
        ...(i.dispatch === null ? {} : { options: dispatchOptions(i.dispatch) }),
      });
    case 'execution':
      return verifyExecutionReceipt(stored, {
        contract: i.contract,
        authorization: i.authorization,
        observation: i.observation,
      });
    case 'reconciliation': {
      // Under the version the receipt names: version 2 binds the skew, version 1 checks it from below.
      const r = reconcileOperation(
        {
          contract: i.contract,
          authorization: i.authorization,
          operation_id: i.operation_id,
          original: i.original,
          observation: i.observation,
          reconciled_by: i.reconciled_by,
          now: i.reconciled_at_unix_ms,
          max_clock_skew_ms: i.max_clock_skew_ms,
        },
        { receiptVersion: storedReconciliationVersion(stored) },
      );
      if (!r.ok) return compare(stored, r);
      if (!r.value.ok) return { ok: false, differences: ['recompute_failed: reconciliation_refused'] };
      return compare(stored, { ok: true, value: r.value.receipt });
    }
    case 'observation':
      return 'withheld' in i.validation
        ? verifyWithheldObservationReceipt(stored, i.validation)
        : verifyObservationReceipt(stored, i.validation);
    case 'error_observation':
      return 'withheld' in i.validation
        ? verifyWithheldErrorObservationReceipt(stored, i.validation)
        : verifyErrorObservationReceipt(stored, i.validation);
  }
}
