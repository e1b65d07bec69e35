/**
 * `verifyExecution`: what execution outcome the executor's observation proves (spec ch. 11,
 * "Verify the effect, not only the response").
 *
 * Guarantees: the status is `verified_succeeded`, `verified_failed_no_effect` or `indeterminate`
 * (with `reconciliation_required: true`) only when every check passes; otherwise it is `rejected`
 * with every violation, sorted and unique. An authorization receipt that was denied, altered, or
 * issued for another contract or invocation never verifies an execution.
 * Never: infers authorization from a successful response, treats a timeout as "no effect",
 * reads a clock (times come from the observation and the receipt), or does I/O.
 */
import { digestOf, guardCanonical } from '../canonical/canonical.js';
import { contractDigest, validateContract } from '../contracts/contract.js';
import type { CoreError } from '../errors.js';
import {
  type AuthorizationReceipt,
  type ExecutionReceipt,
  type ExecutionReceiptBody,
  type ExecutionStatus,
  type ExecutionViolation,
  RECEIPT_VERSION,
  type ToolContract,
  type ToolExecutionObservation,
  WRITE_EFFECTS,
} from '../model.js';
import { ok, type Result } from '../result.js';

export function verifyExecution(
  contract: ToolContract,
  authorization: AuthorizationReceipt,
  observation: ToolExecutionObservation,
): Result<ExecutionReceipt, CoreError> {
  return guardCanonical(() => verifyExecutionUnchecked(contract, authorization, observation));
}

function verifyExecutionUnchecked(
  contract: ToolContract,
  authorization: AuthorizationReceipt,
  observation: ToolExecutionObservation,
): Result<ExecutionReceipt, CoreError> {
  const checked = validateContract(contract);
  if (!checked.ok) return checked;

  const v = new Set<ExecutionViolation>();
  const auth = authorization.body;
  const o = observation;

  // A receipt whose body no longer hashes to its identity was edited after issue.
  if (digestOf(auth) !== authorization.sha256) v.add('authorization_altered');
  // The executor must refuse a denied call; reporting one is a security incident, not success.
  if (auth.decision !== 'authorized' || auth.violations.length > 0) v.add('authorization_denied');
  // An authorization for one contract cannot cover an execution of another.
  if (auth.tool_contract_sha256 !== contractDigest(contract)) v.add('authorization_contract_mismatch');
  // Output from call A must not be attached to the authorization of call B.
  if (o.authorization_receipt_sha256 !== authorization.sha256) v.add('authorization_mismatch');
  if (o.invocation_sha256 !== auth.invocation_sha256) v.add('invocation_mismatch');
  // An unreviewed implementation interpreted the input (executor drift).
  if (o.executor_release !== contract.executor_release) v.add('executor_release_mismatch');
  // A retry under another key is another logical operation.
  if (o.idempotency_key !== auth.idempotency_key) v.add('idempotency_key_mismatch');

  // Impossible timelines mean the observation is not of this call.
  if (o.started_at_unix_ms < auth.evaluated_at_unix_ms) v.add('started_before_authorization');
  if (o.completed_at_unix_ms < auth.requested_at_unix_ms) v.add('completed_before_request');
  if (o.completed_at_unix_ms < o.started_at_unix_ms) v.add('completed_before_start');
  else if (o.completed_at_unix_ms - o.started_at_unix_ms > contract.timeout_ms)
    v.add('completed_after_timeout');

  // The output bound is enforced on every outcome: an oversized body is resource abuse regardless.
  if (o.output_bytes > contract.max_output_bytes) v.add('output_too_large');
  if (o.output_bytes > 0 && o.output_sha256 === null) v.add('output_missing_digest');

  const hasEffectClaim =
    o.effect_id !== null || o.before_state_sha256 !== null || o.after_state_sha256 !== null;
  switch (o.outcome) {
    case 'succeeded':
      // Success needs bounded, non-empty, identified output.
      if (o.output_bytes === 0) v.add('output_empty');
      if (o.output_sha256 === null) v.add('output_missing_digest');
      if (WRITE_EFFECTS.has(contract.effect)) {
        // A 200 is not proof of a write: the effect and its before/after state are.
        if (o.effect_id === null) v.add('write_effect_id_missing');
        if (o.before_state_sha256 === null) v.add('write_before_state_missing');
        if (o.after_state_sha256 === null) v.add('write_after_state_missing');
      } else if (contract.effect === 'creates_draft') {
        if (o.effect_id === null) v.add('draft_effect_id_missing');
      }
      break;
    case 'failed_no_effect':
      // "No effect" with an effect id or after-state is a contradiction; use indeterminate.
      if (o.effect_id !== null || o.after_state_sha256 !== null) v.add('effect_claimed_on_no_effect_failure');
      break;
    case 'indeterminate':
      break;
  }
  // Effect-shaped metadata on a read is suspicious: it may hide an unreviewed write.
  if (contract.effect === 'read_only' && hasEffectClaim) v.add('effect_claimed_on_read_only');

  const violations = [...v].sort();
  const status: ExecutionStatus =
    violations.length > 0
      ? 'rejected'
      : o.outcome === 'succeeded'
        ? 'verified_succeeded'
        : o.outcome === 'failed_no_effect'
          ? 'verified_failed_no_effect'
          : 'indeterminate';
  const body: ExecutionReceiptBody = {
    receipt_kind: 'execution',
    receipt_version: RECEIPT_VERSION,
    tenant_id: auth.tenant_id,
    tool_contract_sha256: contractDigest(contract),
    authorization_receipt_sha256: authorization.sha256,
    observation_sha256: digestOf(o),
    invocation_sha256: auth.invocation_sha256,
    status,
    reconciliation_required: status === 'indeterminate',
    output_sha256: o.output_sha256,
    output_bytes: o.output_bytes,
    effect_id: o.effect_id,
    idempotency_key: o.idempotency_key,
    completed_at_unix_ms: o.completed_at_unix_ms,
    violations,
  };
  return ok({ sha256: digestOf(body), body });
}
