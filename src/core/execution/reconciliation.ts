/**
 * Reconciliation receipts: resolving an operation whose outcome was indeterminate, rejected, or
 * never reported (spec ch. 11, "publish a new reconciliation receipt linked to the original").
 *
 * Guarantees: a receipt is built only from a target observation that `verifyExecution` verifies
 * against the operation's own contract and authorization receipt, with outcome `succeeded` or
 * `failed_no_effect`; a still-indeterminate or rejected observation is refused with every
 * violation, sorted and unique. The receipt links the original execution receipt (or `null` when
 * the owner never reported) and the authorization receipt by digest; it never changes either.
 * Never: reads a clock (`now` is an argument), does I/O, or decides who may reconcile (the
 * adapter checks the reconciliation owner).
 */
import { z } from 'zod';
import { digestOf } from '../canonical/canonical.js';
import type { CoreError } from '../errors.js';
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
import { Identifier, Sha256, UnixMs, strict } from '../schema.js';

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

export const ReconciliationReceiptBody = strict({
  receipt_kind: z.literal('reconciliation'),
  receipt_version: z.literal(RECEIPT_VERSION),
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
});
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

export type ReconciliationOutcome =
  | { readonly ok: true; readonly receipt: ReconciliationReceipt }
  | { readonly ok: false; readonly refusal: ReconciliationRefusal };

/**
 * Verify a target observation and, if it settles the outcome, build the reconciliation receipt.
 * `Err` is "cannot evaluate" (invalid contract); a refusal is a normal value.
 */
export function reconcileOperation(i: ReconciliationInputs): Result<ReconciliationOutcome, CoreError> {
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
  const body: ReconciliationReceiptBody = {
    receipt_kind: 'reconciliation',
    receipt_version: RECEIPT_VERSION,
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
  return ok({ ok: true, receipt: { sha256: digestOf(body), body } });
}
