/**
 * Observe: a raw observation of a recorded execution in, an observation receipt and (when
 * accepted) the evidence out (spec ch. 12, built on `validateObservation` /
 * `validateErrorObservation` in src/core/observation).
 *
 * Guarantees: the execution receipt the observation names is looked up in the caller's tenant and
 * re-hashed, with the executor observation it was computed from; its authorization receipt and
 * contract come from trusted storage, the observation policy from the tenant policy in force; the
 * core decides. Every well-formed observation gets a stored receipt: accepted (with the evidence,
 * whose authority is only ever `untrusted_evidence_only`) or rejected (every violation; the
 * refused payload itself is never stored, only its digests, sizes and findings). Only the executor
 * that reported the execution may observe it, or an observer the policy in force names
 * (`observers`). An
 * observation id already recorded for different content is a violation
 * (`observation_id_conflict`); the same content again replays the stored receipt (strict replay,
 * with the original evaluation time).
 * Never: takes tenant, policy, time or upstream receipts from the body, or follows anything the
 * payload says.
 */
import { z } from 'zod';
import { digestOf } from '../core/canonical/canonical.js';
import { utf8ByteLength } from '../core/canonical/json.js';
import { type AuthorizationReceipt, ExecutionReceipt, ToolExecutionObservation } from '../core/model.js';
import type { CoreError } from '../core/errors.js';
import type { Result } from '../core/result.js';
import {
  ClassifierOutcome,
  OBSERVATION_LIMITS,
  type ErrorObservationOutcome,
  type ErrorObservationValidationInput,
  type ObservationOutcome,
  ObservationPolicy,
  ObservationTrustedContext,
  type ObservationValidationInput,
  RawToolErrorObservation,
  type ReceiptVersionOption,
  RawToolObservation,
  WithheldContent,
  errorDetailFindings,
  inlineContentFindings,
  observationPolicyFromTenantPolicy,
  validateErrorObservation,
  validateObservation,
} from '../core/observation/index.js';
import { isNamedObserver } from '../core/policy.js';
import { UnixMs, strict } from '../core/schema.js';
import { StoredDocumentError, parseStored } from '../db/documents.js';
import { type TenantContext, ROLES_FOR, requireRole } from './context.js';
import { ServiceError, notFound, unwrap } from './errors.js';
import { loadAuthorizationReceipt, requireExecutorOf } from './executions.js';
import type { ObservationRecord, PinnedContract, PolicyRecord, TenantStore } from './ports.js';

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
  /** Present for a refusal whose payload (or detail) was not kept. */
  withheld: WithheldContent.optional(),
  evaluated_at_unix_ms: UnixMs,
});

const RECEIPT_KIND = { output: 'observation', error: 'error_observation' } as const;

/** Lost id races re-decided before giving up (`conflict`); the re-decision normally replays or conflicts. */
const MAX_ATTEMPTS = 3;

export async function observe(ctx: TenantContext, body: ObservationBody) {
  const { caller, store } = ctx;
  requireRole(caller, ROLES_FOR.observe);
  const o = body.observation;
  ctx.log({ observation_id: o.observation_id, execution_receipt_sha256: o.execution_receipt_sha256 });

  const execution = await loadExecution(store, o.execution_receipt_sha256);
  if (execution === null) throw notFound('execution receipt');
  const [authorization, inForce] = await Promise.all([
    loadAuthorizationReceipt(store, execution.receipt.body.authorization_receipt_sha256),
    store.currentPolicy(),
  ]);
  // The contract the call was authorized under (the core checks the execution names the same one).
  const pinned =
    authorization === null ? null : await store.getContract(authorization.body.tool_contract_sha256);
  if (authorization === null || pinned === null) {
    throw new StoredDocumentError('execution receipt refers to a missing authorization or contract');
  }
  if (execution.principal_id === caller.principal_id) {
    requireExecutorOf(caller, pinned);
  } else if (!isNamedObserver(inForce.policy, caller)) {
    // Another executor of the same release must not speak for an execution it did not run, nor
    // take its observation id first: only the principal that reported the execution may, or an
    // observer the policy in force names (e.g. a collector service, whatever release it runs).
    throw new ServiceError(
      'executor_mismatch',
      'only the executor that reported this execution, or an observer the policy names, may observe it',
    );
  }

  const raw = digestOf(o);
  const kind = RECEIPT_KIND[body.kind];
  // Asked at most once per request, and never for a retry of a recorded observation (replay
  // takes the recorded outcome from the stored trusted context).
  let classified: Promise<ClassifierOutcome | undefined> | undefined;
  for (let attempt = 1; ; attempt++) {
    const recorded = await store.observationRecords(kind, o.observation_id, raw);
    const same = recorded.find((r) => r.raw_observation_sha256 === raw);
    classified ??= same === undefined ? classify(ctx, body, inForce) : undefined;
    const classifier = same === undefined ? await classified : undefined;
    const decided = decide(ctx, body, {
      inForce,
      pinned,
      authorization,
      execution,
      recorded,
      same,
      raw,
      classifier,
    });
    const { receipt } = decided;
    ctx.log({ observation_receipt_sha256: receipt.sha256, decision: receipt.body.decision, attempt });
    if (same !== undefined) {
      // Strict replay must reproduce the stored receipt exactly, or the store was tampered with.
      if (same.sha256 !== receipt.sha256)
        throw new StoredDocumentError('stored observation receipt does not replay');
    } else {
      const holds_id = !receipt.body.violations.includes('observation_id_conflict');
      const stored = await store.insertObservationReceipt({
        kind: receipt.body.receipt_kind,
        receipt,
        outcome: receipt.body.decision,
        principal_id: caller.principal_id,
        evidence: storedEvidence(
          body,
          decided.trusted,
          decided.policy,
          decided.evaluatedAt,
          receipt.body.decision,
        ),
        created_at_unix_ms: ctx.now,
        observation_id: o.observation_id,
        raw_observation_sha256: raw,
        holds_id,
      });
      if (stored === 'taken') {
        // Another observation took this id (or stored this content) between our read and write:
        // re-decide against it (normally `observation_id_conflict`, or a replay of the same content).
        if (attempt >= MAX_ATTEMPTS) throw new ServiceError('conflict', 'observation id is contended; retry');
        continue;
      }
    }
    const evidence =
      'candidate' in decided.outcome
        ? { candidate: decided.outcome.candidate }
        : { evidence: decided.outcome.evidence };
    const c = decided.trusted.classifier;
    return {
      decision: receipt.body.decision,
      violations: receipt.body.violations,
      receipt,
      ...evidence,
      // A configured classifier that gave no verdict is said, typed; it changed nothing.
      ...(c?.status === 'unavailable'
        ? { notes: [{ code: 'classifier_unavailable' as const, model: c.model, reason: c.reason }] }
        : {}),
      replayed: same !== undefined,
    };
  }
}

function decide(
  ctx: TenantContext,
  body: ObservationBody,
  s: {
    readonly inForce: PolicyRecord;
    readonly pinned: PinnedContract;
    readonly authorization: AuthorizationReceipt;
    readonly execution: {
      readonly receipt: ExecutionReceipt;
      readonly observation: ToolExecutionObservation;
    };
    readonly recorded: readonly ObservationRecord[];
    readonly same: ObservationRecord | undefined;
    readonly raw: string;
    readonly classifier: ClassifierOutcome | undefined;
  },
) {
  let evaluatedAt = ctx.now;
  let trusted: ObservationTrustedContext = {
    tenant_id: ctx.caller.tenant_id,
    policy_sha256: s.inForce.policy_sha256,
    // The same id for different content would let two payloads pass as one observation.
    observation_id_conflict: s.recorded.some((r) => r.holds_id && r.raw_observation_sha256 !== s.raw),
    min_source_generation: null,
    // No artifact store yet: an artifact reference is never found (`artifact_not_found`).
    artifact_record: null,
    ...(s.classifier === undefined ? {} : { classifier: s.classifier }),
  };
  let policy: ObservationPolicy = observationPolicyFromTenantPolicy(s.inForce.policy);
  // New receipts are issued under the current version (the core's default).
  let version: ReceiptVersionOption = {};
  if (s.same !== undefined) {
    // A retry of a recorded observation is replayed with the inputs it was decided on, under the
    // receipt version (and so the signal rules) it was issued with.
    const e = parseStored('observation evidence', StoredObservationEvidence, s.same.evidence);
    evaluatedAt = e.evaluated_at_unix_ms;
    trusted = e.trusted;
    policy = e.policy;
    version = { receiptVersion: s.same.receipt_version };
  }
  const common = {
    trusted,
    policy,
    contract: s.pinned.contract,
    authorization: s.authorization,
    execution: { receipt: s.execution.receipt, observation: s.execution.observation },
    now: evaluatedAt,
  };
  const result: Result<ObservationOutcome | ErrorObservationOutcome, CoreError> =
    body.kind === 'output'
      ? validateObservation(
          { ...common, observation: body.observation } satisfies ObservationValidationInput,
          version,
        )
      : validateErrorObservation(
          { ...common, observation: body.observation } satisfies ErrorObservationValidationInput,
          version,
        );
  const outcome = unwrap(result);
  return { outcome, receipt: outcome.receipt, trusted, policy, evaluatedAt };
}

/**
 * What replay needs besides the stored upstream receipts. An accepted observation keeps the raw
 * observation (its payload was admitted). A refused one never keeps more than was admitted: the
 * raw observation without its payload (or error detail) and the findings of those bytes, from
 * which `verifyWithheldObservationReceipt` replays the receipt.
 */
function storedEvidence(
  body: ObservationBody,
  trusted: ObservationTrustedContext,
  policy: ObservationPolicy,
  evaluated_at_unix_ms: number,
  decision: string,
) {
  const common = { kind: body.kind, trusted, policy, evaluated_at_unix_ms };
  if (decision !== 'rejected') return { ...common, observation: body.observation };
  if (body.kind === 'error') {
    const { detail: _detail, ...kept } = body.observation;
    return { ...common, observation: kept, withheld: errorDetailFindings(body.observation, policy) };
  }
  if (body.observation.payload === null) return { ...common, observation: body.observation };
  const { payload: _payload, ...kept } = body.observation;
  return { ...common, observation: kept, withheld: inlineContentFindings(body.observation, policy) };
}

/**
 * The configured classifier's outcome for the observed text, or undefined when the policy names
 * no classifier or there is no text to classify (an artifact, or text over the bound, which is
 * never scanned). Whatever the port does, this never throws: a failure is `unavailable`.
 */
async function classify(
  ctx: TenantContext,
  body: ObservationBody,
  inForce: PolicyRecord,
): Promise<ClassifierOutcome | undefined> {
  const settings = inForce.policy.observation_classifier;
  if (settings === undefined) return undefined;
  const text = body.kind === 'output' ? body.observation.payload : body.observation.detail;
  if (text === null) return undefined;
  const limits = observationPolicyFromTenantPolicy(inForce.policy);
  const bound =
    body.kind === 'output'
      ? limits.max_payload_bytes
      : Math.min(limits.max_payload_bytes, OBSERVATION_LIMITS.maxErrorDetailBytes);
  if (utf8ByteLength(text) > bound) return undefined;
  if (ctx.classifier === undefined)
    return { status: 'unavailable', model: settings.model, reason: 'no_binding' };
  try {
    const outcome = ClassifierOutcome.safeParse(await ctx.classifier.classify(text, settings));
    // An adapter's answer is parsed like any input: anything else is no verdict.
    return outcome.success
      ? outcome.data
      : { status: 'unavailable', model: settings.model, reason: 'malformed_answer' };
  } catch {
    return { status: 'unavailable', model: settings.model, reason: 'error' };
  }
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
  return { receipt: receipt.data, observation: evidence.data.observation, principal_id: stored.principal_id };
}
