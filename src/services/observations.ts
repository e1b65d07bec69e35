/**
 * Observe: a raw observation of a recorded execution in, an observation receipt and (when
 * accepted) the evidence out (spec ch. 12, built on `validateObservation` /
 * `validateErrorObservation` in src/core/observation).
 *
 * Guarantees: the execution receipt the observation names is looked up in the caller's tenant and
 * re-hashed, with the executor observation it was computed from; its authorization receipt and
 * contract come from trusted storage, the observation policy from the tenant policy in force; the
 * core decides. Every well-formed observation gets a stored receipt: accepted (with the evidence,
 * whose authority is only ever `untrusted_evidence_only`) or rejected (every violation). An
 * observation id already recorded for different content is a violation
 * (`observation_id_conflict`); the same content again replays the stored receipt (strict replay,
 * with the original evaluation time).
 * Never: takes tenant, policy, time or upstream receipts from the body, or follows anything the
 * payload says.
 */
import { z } from 'zod';
import { digestOf } from '../core/canonical/canonical.js';
import { ExecutionReceipt, ToolExecutionObservation } from '../core/model.js';
import type { CoreError } from '../core/errors.js';
import type { Result } from '../core/result.js';
import {
  type ErrorObservationOutcome,
  type ErrorObservationValidationInput,
  type ObservationOutcome,
  ObservationPolicy,
  ObservationTrustedContext,
  type ObservationValidationInput,
  RawToolErrorObservation,
  RawToolObservation,
  observationPolicyFromTenantPolicy,
  validateErrorObservation,
  validateObservation,
} from '../core/observation/index.js';
import { UnixMs, strict } from '../core/schema.js';
import { StoredDocumentError, parseStored } from '../db/documents.js';
import { type TenantContext, ROLES_FOR, requireRole } from './context.js';
import { notFound, unwrap } from './errors.js';
import { loadAuthorizationReceipt, requireExecutorOf } from './executions.js';
import type { TenantStore } from './ports.js';

export const ObservationBody = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('output'), observation: RawToolObservation }),
  z.strictObject({ kind: z.literal('error'), observation: RawToolErrorObservation }),
]);
export type ObservationBody = z.infer<typeof ObservationBody>;

/** What an execution receipt was computed from, as the operation's object stores it. */
const ExecutionEvidence = z.strictObject({ observation: ToolExecutionObservation });

/** The validation inputs an observation receipt was computed from, less the stored upstream receipts. */
const StoredObservationEvidence = strict({
  kind: z.enum(['output', 'error']),
  trusted: ObservationTrustedContext,
  policy: ObservationPolicy,
  observation: z.unknown(),
  evaluated_at_unix_ms: UnixMs,
});

const RECEIPT_KIND = { output: 'observation', error: 'error_observation' } as const;

export async function observe(ctx: TenantContext, body: ObservationBody) {
  const { caller, store } = ctx;
  requireRole(caller, ROLES_FOR.observe);
  const t = caller.tenant_id;
  const o = body.observation;
  ctx.log({ observation_id: o.observation_id, execution_receipt_sha256: o.execution_receipt_sha256 });

  const execution = await loadExecution(store, o.execution_receipt_sha256);
  if (execution === null) throw notFound('execution receipt');
  const [authorization, inForce, recorded] = await Promise.all([
    loadAuthorizationReceipt(store, execution.receipt.body.authorization_receipt_sha256),
    store.currentPolicy(),
    store.recordedObservations(RECEIPT_KIND[body.kind], o.observation_id),
  ]);
  // The contract the call was authorized under (the core checks the execution names the same one).
  const pinned =
    authorization === null ? null : await store.getContract(authorization.body.tool_contract_sha256);
  if (authorization === null || pinned === null) {
    throw new StoredDocumentError('execution receipt refers to a missing authorization or contract');
  }
  requireExecutorOf(caller, pinned);

  const raw = digestOf(o);
  const same = recorded.find((r) => r.raw_observation_sha256 === raw);
  let evaluatedAt = ctx.now;
  let trusted: ObservationTrustedContext = {
    tenant_id: t,
    policy_sha256: inForce.policy_sha256,
    // The same id for different content would let two payloads pass as one observation.
    observation_id_conflict: recorded.some((r) => r.raw_observation_sha256 !== raw),
    min_source_generation: null,
    // No artifact store yet: an artifact reference is never found (`artifact_not_found`).
    artifact_record: null,
  };
  let policy: ObservationPolicy = observationPolicyFromTenantPolicy(inForce.policy);
  if (same !== undefined) {
    // A retry of a recorded observation is replayed with the inputs it was decided on.
    const e = parseStored('observation evidence', StoredObservationEvidence, same.evidence);
    evaluatedAt = e.evaluated_at_unix_ms;
    trusted = e.trusted;
    policy = e.policy;
  }
  const common = { trusted, policy, contract: pinned.contract, authorization, execution, now: evaluatedAt };
  const result: Result<ObservationOutcome | ErrorObservationOutcome, CoreError> =
    body.kind === 'output'
      ? validateObservation({ ...common, observation: body.observation } satisfies ObservationValidationInput)
      : validateErrorObservation({
          ...common,
          observation: body.observation,
        } satisfies ErrorObservationValidationInput);
  const decided = unwrap(result);
  const { receipt } = decided;
  const evidence = 'candidate' in decided ? { candidate: decided.candidate } : { evidence: decided.evidence };
  ctx.log({ observation_receipt_sha256: receipt.sha256, decision: receipt.body.decision });

  if (same !== undefined) {
    // Strict replay must reproduce the stored receipt exactly, or the store was tampered with.
    if (same.sha256 !== receipt.sha256)
      throw new StoredDocumentError('stored observation receipt does not replay');
  } else {
    await store.insertReceipt({
      kind: receipt.body.receipt_kind,
      receipt,
      outcome: receipt.body.decision,
      principal_id: caller.principal_id,
      // Everything replay needs besides the stored upstream receipts, the raw observation included.
      evidence: { kind: body.kind, trusted, policy, observation: o, evaluated_at_unix_ms: evaluatedAt },
      created_at_unix_ms: ctx.now,
    });
  }
  return {
    decision: receipt.body.decision,
    violations: receipt.body.violations,
    receipt,
    ...evidence,
    replayed: same !== undefined,
  };
}

/** The tenant's execution receipt with the observation it was computed from, verified, or null. */
async function loadExecution(store: TenantStore, sha256: string) {
  const stored = await store.getReceipt(sha256);
  if (stored === null || stored.kind !== 'execution') return null;
  const receipt = ExecutionReceipt.safeParse(stored.receipt);
  const evidence = ExecutionEvidence.safeParse(stored.evidence);
  // Stored evidence that does not parse or hash to its key is corruption: fail closed (500).
  if (
    !receipt.success ||
    !evidence.success ||
    receipt.data.sha256 !== sha256 ||
    digestOf(receipt.data.body) !== sha256 ||
    receipt.data.body.tenant_id !== store.tenant_id ||
    digestOf(evidence.data.observation) !== receipt.data.body.observation_sha256
  ) {
    throw new StoredDocumentError('stored execution receipt does not verify');
  }
  return { receipt: receipt.data, observation: evidence.data.observation };
}
