/**
 * `POST /v1/observations` (executor of the contract's release): a raw observation of a recorded
 * execution in, an observation receipt and (when accepted) the evidence out (spec ch. 12, built on
 * `validateObservation` / `validateErrorObservation` in src/core/observation).
 *
 * Body: `{ "kind": "output", "observation": RawToolObservation }` for the output of a verified
 * success, or `{ "kind": "error", "observation": RawToolErrorObservation }` for the diagnostics
 * of a verified no-effect failure.
 *
 * Guarantees: the execution receipt the observation names is looked up in the caller's tenant and
 * re-hashed, with the executor observation it was computed from; its authorization receipt and
 * contract come from trusted storage, the observation policy from the tenant policy in force; the
 * core decides. Every well-formed observation gets a stored receipt: accepted (201, with the
 * evidence, whose authority is only ever `untrusted_evidence_only`) or rejected (403, every
 * violation). An observation id already recorded for different content is a violation
 * (`observation_id_conflict`); the same content again replays the stored receipt (strict replay,
 * with the original evaluation time).
 * Never: takes tenant, policy, time or upstream receipts from the body, or follows anything the
 * payload says.
 */
import { and, eq, sql } from 'drizzle-orm';
import { Hono } from 'hono';
import { z } from 'zod';
import { digestOf } from '../../core/canonical/canonical.js';
import { ExecutionReceipt, ToolExecutionObservation } from '../../core/model.js';
import {
  type ErrorObservationValidationInput,
  ObservationPolicy,
  ObservationTrustedContext,
  type ObservationValidationInput,
  RawToolErrorObservation,
  RawToolObservation,
  observationPolicyFromTenantPolicy,
  validateErrorObservation,
  validateObservation,
} from '../../core/observation/index.js';
import { UnixMs, strict } from '../../core/schema.js';
import { type Db, database } from '../../db/client.js';
import { StoredDocumentError, parseStored } from '../../db/documents.js';
import { currentPolicy, findContract } from '../../db/queries.js';
import { getReceipt, insertReceiptStatements } from '../../db/receipts.js';
import { receipts } from '../../db/schema.js';
import { requireRole } from '../auth.js';
import { readJson } from '../body.js';
import type { AppEnv } from '../env.js';
import { fromCoreError, notFound } from '../errors.js';
import { loadAuthorizationReceipt, requireExecutorOf } from './executions.js';

const ObservationBody = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('output'), observation: RawToolObservation }),
  z.strictObject({ kind: z.literal('error'), observation: RawToolErrorObservation }),
]);

/** What an execution receipt was computed from, as the execution routes store it. */
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

export const observationRoutes = new Hono<AppEnv>();

observationRoutes.post('/observations', requireRole('executor'), async (c) => {
  const body = await readJson(c, ObservationBody);
  const p = c.var.principal;
  const t = p.tenant_id;
  const db = database(c.env);
  const o = body.observation;
  c.set('log', {
    ...c.var.log,
    observation_id: o.observation_id,
    execution_receipt_sha256: o.execution_receipt_sha256,
  });

  const execution = await loadExecution(db, t, o.execution_receipt_sha256);
  if (execution === null) throw notFound('execution receipt');
  const [authorization, inForce, recorded] = await Promise.all([
    loadAuthorizationReceipt(db, t, execution.receipt.body.authorization_receipt_sha256),
    currentPolicy(db, t),
    recordedWithId(db, t, RECEIPT_KIND[body.kind], o.observation_id),
  ]);
  // The contract the call was authorized under (the core checks the execution names the same one).
  const pinned =
    authorization === null ? null : await findContract(db, t, authorization.body.tool_contract_sha256);
  if (authorization === null || pinned === null) {
    throw new StoredDocumentError('execution receipt refers to a missing authorization or contract');
  }
  requireExecutorOf(p, pinned);

  const raw = digestOf(o);
  const same = recorded.find((r) => r.raw_observation_sha256 === raw);
  let evaluatedAt = c.var.now;
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
  const decided =
    body.kind === 'output'
      ? validateObservation({ ...common, observation: body.observation } satisfies ObservationValidationInput)
      : validateErrorObservation({
          ...common,
          observation: body.observation,
        } satisfies ErrorObservationValidationInput);
  if (!decided.ok) throw fromCoreError(decided.error);
  const { receipt } = decided.value;
  const evidence =
    'candidate' in decided.value
      ? { candidate: decided.value.candidate }
      : { evidence: decided.value.evidence };
  c.set('log', { ...c.var.log, observation_receipt_sha256: receipt.sha256, decision: receipt.body.decision });

  if (same !== undefined) {
    // Strict replay must reproduce the stored receipt exactly, or the store was tampered with.
    if (same.sha256 !== receipt.sha256)
      throw new StoredDocumentError('stored observation receipt does not replay');
  } else {
    const [insert] = insertReceiptStatements(db, {
      tenant_id: t,
      kind: receipt.body.receipt_kind,
      receipt,
      outcome: receipt.body.decision,
      principal_id: p.principal_id,
      // Everything replay needs besides the stored upstream receipts, the raw observation included.
      evidence: { kind: body.kind, trusted, policy, observation: o, evaluated_at_unix_ms: evaluatedAt },
      created_at_unix_ms: c.var.now,
    });
    if (insert === undefined) throw new Error('no receipt statement');
    await insert.run();
  }
  const accepted = receipt.body.decision !== 'rejected';
  return c.json(
    { decision: receipt.body.decision, violations: receipt.body.violations, receipt, ...evidence },
    accepted ? (same === undefined ? 201 : 200) : 403,
  );
});

/** The tenant's execution receipt with the observation it was computed from, verified, or null. */
async function loadExecution(db: Db, tenant_id: string, sha256: string) {
  const stored = await getReceipt(db, tenant_id, sha256);
  if (stored === null || stored.kind !== 'execution') return null;
  const receipt = ExecutionReceipt.safeParse(stored.receipt);
  const evidence = ExecutionEvidence.safeParse(stored.evidence);
  // Stored evidence that does not parse or hash to its key is corruption: fail closed (500).
  if (
    !receipt.success ||
    !evidence.success ||
    receipt.data.sha256 !== sha256 ||
    digestOf(receipt.data.body) !== sha256 ||
    receipt.data.body.tenant_id !== tenant_id ||
    digestOf(evidence.data.observation) !== receipt.data.body.observation_sha256
  ) {
    throw new StoredDocumentError('stored execution receipt does not verify');
  }
  return { receipt: receipt.data, observation: evidence.data.observation };
}

/** Observation receipts of this kind already recorded under `observation_id` in the tenant. */
async function recordedWithId(db: Db, tenant_id: string, kind: string, observation_id: string) {
  const rows = await db
    .select({
      sha256: receipts.sha256,
      raw_observation_sha256: sql<
        string | null
      >`json_extract(${receipts.receipt}, '$.body.raw_observation_sha256')`,
      evidence: receipts.evidence,
    })
    .from(receipts)
    .where(
      and(
        eq(receipts.tenant_id, tenant_id),
        eq(receipts.kind, kind),
        sql`json_extract(${receipts.receipt}, '$.body.observation_id') = ${observation_id}`,
      ),
    )
    .limit(64);
  return rows.map((r) => {
    if (r.raw_observation_sha256 === null || r.evidence === null) {
      throw new StoredDocumentError('stored observation receipt is incomplete');
    }
    return { sha256: r.sha256, raw_observation_sha256: r.raw_observation_sha256, evidence: r.evidence };
  });
}
