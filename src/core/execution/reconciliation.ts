/**
 * Reconciliation receipts: resolving an operation whose outcome was indeterminate, rejected, or
 * never reported (spec ch. 11, "publish a new reconciliation receipt linked to the original").
 *
 * Guarantees: a receipt is built only from a target observation that `verifyExecution` verifies
 * against the operation's own contract and authorization receipt, with outcome `succeeded` or
 * `failed_no_effect`; a still-indeterminate or rejected observation is refused with every
 * violation, sorted and unique. The receipt links the original execution receipt (or `null` when
 * the owner never reported) and the authorization receipt by digest; it never changes either.
 * Version 2 receipts (the default) also bind the clock skew the check allowed; version 1 is
 * computed only when replay asks for it.
 * Never: reads a clock (`now` is an argument), does I/O, or decides who may reconcile (the
 * adapter checks the reconciliation owner).
 */
import { z } from 'zod';
import { digestOf } from '../canonical/canonical.js';
import { type CoreError, fromZodError } from '../errors.js';
import { verifyExecution } from './execution.js';
import { ReconciliationResolution } from './idempotency.js';
import {
  type AuthorizationReceipt,
  EXECUTION_VIOLATIONS,
  type ExecutionReceipt,
  RECEIPT_VERSION,
  type ToolContract,
  type ToolExecutionObservation,
} from '../model.js';
import { err, ok, type Result } from '../result.js';
import { Count, Identifier, Sha256, UnixMs, strict } from '../schema.js';

/** Violations of the execution check, plus what only a reconciliation can get wrong. */
export const RECONCILIATION_VIOLATIONS = [
  ...EXECUTION_VIOLATIONS,
  'effect_id_mismatch',
  'observed_after_reconciliation',
  'original_receipt_mismatch',
  'outcome_indeterminate',
] as const;
export const ReconciliationViolation = z.enum(RECONCILIATION_VIOLATIONS);
export type ReconciliationViolation = z.infer<typeof ReconciliationViolation>;

/**
 * Reconciliation receipt versions. Version 1 did not bind the clock skew its check allowed: the
 * skew is the tenant policy's at reconciliation, so a verifier given it out of band could check
 * it only from below (a larger skew recomputes the same receipt). Version 2 binds
 * `max_clock_skew_ms` in the body, so exactly one value replays. A receipt is recomputed under the
 * version written in its own body (`storedReconciliationVersion`).
 */
export const RECONCILIATION_RECEIPT_VERSIONS = [1, 2] as const;
export const ReconciliationReceiptVersion = z.union([z.literal(1), z.literal(2)]);
export type ReconciliationReceiptVersion = z.infer<typeof ReconciliationReceiptVersion>;
/** The version new reconciliation receipts are issued under. */
export const RECONCILIATION_RECEIPT_VERSION = 2 satisfies ReconciliationReceiptVersion;

const RECONCILIATION_BODY_FIELDS = {
  receipt_kind: z.literal('reconciliation'),
  tenant_id: Identifier,
  operation_id: Sha256,
  tool_contract_sha256: Sha256,
  authorization_receipt_sha256: Sha256,
  /** The receipt this one resolves; `null` when the owner never reported (crashed while pending). */
  original_execution_receipt_sha256: Sha256.nullable(),
  target_observation_sha256: Sha256,
  resolution: ReconciliationResolution,
  effect_id: Identifier.nullable(),
  reconciled_by: Identifier,
  reconciled_at_unix_ms: UnixMs,
  /** Always empty on a published receipt: a violating observation is refused, not receipted. */
  violations: z.array(ReconciliationViolation),
} as const;

export const ReconciliationReceiptBody = z.discriminatedUnion('receipt_version', [
  strict({ ...RECONCILIATION_BODY_FIELDS, receipt_version: z.literal(RECEIPT_VERSION) }),
  strict({
    ...RECONCILIATION_BODY_FIELDS,
    receipt_version: z.literal(2),
    /** The tenant policy's allowed observer clock skew at reconciliation, as the check used it. */
    max_clock_skew_ms: Count,
  }),
]);
export type ReconciliationReceiptBody = z.infer<typeof ReconciliationReceiptBody>;

export const ReconciliationReceipt = strict({ sha256: Sha256, body: ReconciliationReceiptBody });
export type ReconciliationReceipt = z.infer<typeof ReconciliationReceipt>;

export interface ReconciliationInputs {
  readonly contract: ToolContract;
  readonly authorization: AuthorizationReceipt;
  readonly operation_id: string;
  /** The operation's execution receipt, if its owner ever reported one. */
  readonly original: ExecutionReceipt | null;
  readonly observation: ToolExecutionObservation;
  readonly reconciled_by: string;
  readonly now: number;
  /** From the tenant policy: how far the observer's clock may run ahead of ours. */
  readonly max_clock_skew_ms: number;
}

/** Why a reconciliation observation resolves nothing. */
export interface ReconciliationRefusal {
  readonly violations: readonly ReconciliationViolation[];
}

/**
 * Which version to compute: new receipts are the current version (the default); version 1 is for
 * replaying a receipt issued under it.
 */
export interface ReconciliationVersionOption {
  readonly receiptVersion?: ReconciliationReceiptVersion;
}

export type ReconciliationOutcome =
  | { readonly ok: true; readonly receipt: ReconciliationReceipt }
  | { readonly ok: false; readonly refusal: ReconciliationRefusal };

/**
 * Verify a target observation and, if it settles the outcome, build the reconciliation receipt.
 * `Err` is "cannot evaluate" (invalid contract); a refusal is a normal value.
 */
export function reconcileOperation(
  i: ReconciliationInputs,
  options: ReconciliationVersionOption = {},
): Result<ReconciliationOutcome, CoreError> {
  const version = ReconciliationReceiptVersion.safeParse(
    options.receiptVersion ?? RECONCILIATION_RECEIPT_VERSION,
  );
  if (!version.success) return err(fromZodError('invalid_request', 'receiptVersion', version.error));
  const verified = verifyExecution(i.contract, i.authorization, i.observation);
  if (!verified.ok) return err(verified.error);
  const exec = verified.value.body;

  const v = new Set<ReconciliationViolation>(exec.violations);
  // "Still indeterminate" is the state we already have; it resolves nothing.
  if (exec.status === 'indeterminate') v.add('outcome_indeterminate');
  // A receipt of another authorization cannot be the one this operation is resolving.
  if (i.original !== null && i.original.body.authorization_receipt_sha256 !== i.authorization.sha256) {
    v.add('original_receipt_mismatch');
  }
  // An original whose body does not hash to the digest it is linked by is not that receipt (an
  // edited copy would otherwise lend its effect id to the check below).
  if (i.original !== null && digestOf(i.original.body) !== i.original.sha256)
    v.add('original_receipt_mismatch');
  // The executor saw one effect; the target reporting another means they are not the same operation.
  if (
    i.original !== null &&
    i.original.body.effect_id !== null &&
    i.observation.effect_id !== null &&
    i.original.body.effect_id !== i.observation.effect_id
  ) {
    v.add('effect_id_mismatch');
  }
  // An observation dated after the resolution that cites it is not an observation of the past.
  if (i.observation.completed_at_unix_ms > i.now + i.max_clock_skew_ms)
    v.add('observed_after_reconciliation');

  if (v.size > 0 || exec.status === 'rejected' || exec.status === 'indeterminate') {
    return ok({ ok: false, refusal: { violations: [...v].sort() } });
  }
  const common = {
    receipt_kind: 'reconciliation' as const,
    tenant_id: i.authorization.body.tenant_id,
    operation_id: i.operation_id,
    tool_contract_sha256: exec.tool_contract_sha256,
    authorization_receipt_sha256: i.authorization.sha256,
    original_execution_receipt_sha256: i.original?.sha256 ?? null,
    target_observation_sha256: exec.observation_sha256,
    resolution: exec.status,
    effect_id: i.observation.effect_id,
    reconciled_by: i.reconciled_by,
    reconciled_at_unix_ms: i.now,
    violations: [],
  };
  const body: ReconciliationReceiptBody =
    version.data === 1
      ? { ...common, receipt_version: RECEIPT_VERSION }
      : { ...common, receipt_version: 2, max_clock_skew_ms: i.max_clock_skew_ms };
  return ok({ ok: true, receipt: { sha256: digestOf(body), body } });
}

/**
 * The reconciliation receipt version a stored receipt (untrusted data) names in its body. Anything
 * that is not a known version is recomputed as the current version, so it fails with every
 * differing field named rather than as an unreadable receipt.
 */
export function storedReconciliationVersion(stored: unknown): ReconciliationReceiptVersion {
  const v = ReconciliationReceiptVersion.safeParse(ownField(ownField(stored, 'body'), 'receipt_version'));
  return v.success ? v.data : RECONCILIATION_RECEIPT_VERSION;
}

function ownField(o: unknown, k: string): unknown {
  if (o === null || typeof o !== 'object' || Array.isArray(o)) return undefined;
  // Own properties only: a `__proto__` key must never read through to a prototype.
  return Object.prototype.hasOwnProperty.call(o, k) ? (o as Record<string, unknown>)[k] : undefined;
}
