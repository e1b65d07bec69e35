/**
 * The idempotency state machine of one logical operation (spec ch. 11, "Idempotency is a
 * logical-operation contract", "Indeterminate is an honest terminal observation").
 *
 * One operation is named by (tenant, tool name, idempotency key): the spec's (tenant, tool,
 * idempotency_key), so a re-pinned contract of the same tool reaches the same operation. Its states:
 *
 *   (none) --claim--> pending --report ok/no effect--> succeeded | failed_no_effect
 *                       |  \--report indeterminate or rejected--\
 *                       \--lease expired (crash?)----------------> reconciliation_required
 *   reconciliation_required --deadline passed--> escalated
 *   reconciliation_required | escalated --reconcile--> reconciled_succeeded | reconciled_no_effect
 *
 * Guarantees: at most one `proceed` per operation, ever; a claim with a different input is
 * refused before anything else is looked at, and the refusal carries nothing of the stored
 * input; a pending operation whose lease ran out is never handed to a new owner (its owner may
 * have crashed after the effect) but routed to reconciliation; only the current owner's fencing
 * token completes a pending operation, and only before its lease ends; terminal outcomes replay;
 * a claim under another contract digest of the same tool never proceeds (an unresolved or live
 * operation blocks it, a settled one is a used key).
 * Time-driven transitions (lease expiry, escalation) are applied on every event, so the answer
 * never depends on whether an alarm already ran.
 * Never: reads a clock or randomness (`now` and the fencing nonce are arguments), does I/O, or
 * throws for an expected refusal (a refusal is an answer).
 */
import { z } from 'zod';
import { digestOf } from '../canonical/canonical.js';
import {
  type AuthorizationReceiptBody,
  ExecutionStatus,
  IdempotencyKey,
  type ToolContract,
} from '../model.js';
import { Identifier, Sha256, UnixMs, strict } from '../schema.js';

// ---------------------------------------------------------------------------------------------
// Names

/**
 * Domain tags of operation names. Versioned: a change in what names an operation is a new tag,
 * never a silent re-interpretation of existing objects. v1 named a keyed operation by contract
 * digest (a re-pinned contract of the same tool started a fresh operation under the same key);
 * v2 names it by tool name. v1 objects still exist and are reached through the D1 index
 * (`legacyKeyClaim`), never by a new name.
 */
export const OPERATION_NAME_TAG_V1 = 'writ.idempotency.v1';
export const OPERATION_NAME_TAG = 'writ.idempotency.v2';
/** Read-only contracts carry no key: each authorization receipt is its own single-use operation. */
export const SINGLE_USE_NAME_TAG = 'writ.idempotency.single-use.v1';

export type OperationKey =
  | { readonly kind: 'idempotency_key'; readonly idempotency_key: string }
  | { readonly kind: 'authorization'; readonly authorization_receipt_sha256: string };

/** What an operation belongs to: the tool (its operation family) and the contract authorized. */
export interface OperationScope {
  readonly tool_name: string;
  readonly tool_contract_sha256: string;
}

/**
 * The operation id (and Durable Object name): SHA-256 over the canonical JSON array of a
 * versioned tag and the scope. A JSON array is unambiguous where string concatenation is not
 * (`"a:b" + "c"` and `"a" + "b:c"` collide); the two tags keep a key that happens to look like
 * a receipt digest from ever naming a single-use operation. A keyed operation is scoped by
 * tenant and tool (spec: "scoped by tenant and operation family"); a single-use one by the
 * receipt, which already binds the contract.
 */
export function operationId(tenantId: string, scope: OperationScope, key: OperationKey): string {
  return key.kind === 'idempotency_key'
    ? digestOf([OPERATION_NAME_TAG, tenantId, scope.tool_name, key.idempotency_key])
    : digestOf([SINGLE_USE_NAME_TAG, tenantId, scope.tool_contract_sha256, key.authorization_receipt_sha256]);
}

/** The v1 name of a keyed operation (by contract digest): only to recognise objects made before v2. */
export function legacyOperationId(
  tenantId: string,
  toolContractSha256: string,
  idempotencyKey: string,
): string {
  return digestOf([OPERATION_NAME_TAG_V1, tenantId, toolContractSha256, idempotencyKey]);
}

/** What the D1 index says of an operation under the same tenant, tool and key. */
export interface IndexedKeyOperation {
  readonly operation_id: string;
  readonly tool_contract_sha256: string;
  readonly input_sha256: string;
  /** The mirrored status; it may lag the object (a lease may have run out since). */
  readonly state: string;
}

export type LegacyKeyClaim =
  | { readonly kind: 'none' }
  /** A v1 object holds this very (contract, key): it answers the claim, as it did before v2. */
  | { readonly kind: 'route'; readonly operation_id: string }
  | { readonly kind: 'refused'; readonly reason: ClaimRefusal; readonly operation_id: string | null };

/**
 * Before a keyed claim reaches its v2 object: does a v1 object (named by contract digest) already
 * hold the same tenant, tool and key? Then the v2 name must not bypass it. The same contract is
 * routed to its v1 object; another contract is refused by the same rules as inside one object
 * (`claim`): another input is a reused key, a live or unresolved operation blocks, a settled one
 * is a used key. `rows` are the index rows of the tenant, tool and key; the v2 object's own row
 * (`v2Id`) is ignored, since that object decides for itself.
 */
export function legacyKeyClaim(
  rows: readonly IndexedKeyOperation[],
  v2Id: string,
  c: {
    readonly tenant_id: string;
    readonly tool_contract_sha256: string;
    readonly idempotency_key: string;
    readonly input_sha256: string;
  },
): LegacyKeyClaim {
  // A row is v1 only if its id is the v1 name of its own contract and key: nothing else is routed.
  const legacy = rows.filter(
    (r) =>
      r.operation_id !== v2Id &&
      r.operation_id === legacyOperationId(c.tenant_id, r.tool_contract_sha256, c.idempotency_key),
  );
  const same = legacy.find((r) => r.tool_contract_sha256 === c.tool_contract_sha256);
  if (same !== undefined) return { kind: 'route', operation_id: same.operation_id };
  const sorted = [...legacy].sort((a, b) => (a.operation_id < b.operation_id ? -1 : 1));
  if (sorted.some((r) => r.input_sha256 !== c.input_sha256)) {
    return { kind: 'refused', reason: 'idempotency_key_reused', operation_id: null };
  }
  const live = sorted.find((r) => r.state === 'pending');
  if (live !== undefined) return { kind: 'refused', reason: 'in_progress', operation_id: live.operation_id };
  const open = sorted.find((r) => !REPLAYABLE_STATUSES.has(r.state as OperationStatus));
  if (open !== undefined) {
    return { kind: 'refused', reason: 'reconciliation_required', operation_id: open.operation_id };
  }
  return sorted.length > 0
    ? { kind: 'refused', reason: 'idempotency_key_reused', operation_id: null }
    : { kind: 'none' };
}

// ---------------------------------------------------------------------------------------------
// Dispatch: may this authorization receipt still be claimed, by this executor, now?

/**
 * Added to the contract's timeout to make the owner's lease: time to reach the target and to
 * deliver the report. Past the lease, silence counts as a possible crash after the effect.
 */
export const CLAIM_LEASE_GRACE_MS = 30_000;

export function leaseMs(contract: Pick<ToolContract, 'timeout_ms'>): number {
  return contract.timeout_ms + CLAIM_LEASE_GRACE_MS;
}

export type DispatchRefusal =
  'authorization_denied' | 'authorization_expired' | 'authorization_revoked' | 'executor_mismatch';

/** Trusted state the adapter read for the receipt, at claim time. */
export interface DispatchState {
  readonly receipt: Pick<
    AuthorizationReceiptBody,
    'decision' | 'violations' | 'evaluated_at_unix_ms' | 'policy_sha256'
  >;
  /** From the policy the receipt binds. */
  readonly authorization_max_dispatch_ms: number;
  /** The tenant's policy in force now: a changed policy must re-authorize. */
  readonly current_policy_sha256: string;
  readonly grant_expires_at_unix_ms: number;
  readonly grant_revoked: boolean;
  /** `null` when the receipt names no approval. */
  readonly approval_expires_at_unix_ms: number | null;
  readonly contract_quarantined: boolean;
  /** The agent that was authorized. */
  readonly principal_revoked: boolean;
  /** The principal that approved the receipt's approval is revoked (false when none). */
  readonly approver_revoked: boolean;
  readonly contract_executor_release: string;
  /** The executor presenting the receipt (`null`: not an executor at all). */
  readonly executor_release: string | null;
  /**
   * The one executor principal the receipt names (a version 2 receipt's `executor_principal_id`),
   * or `null`: any principal running the release (and every version 1 receipt).
   */
  readonly audience_principal_id: string | null;
  /** The principal presenting the receipt. */
  readonly executor_principal_id: string;
}

/**
 * The first reason, in a fixed order, that this receipt may not be dispatched now, or `null`.
 * The executor re-checks what the authorizer checked because time passed in between (TOCTOU):
 * a receipt is short-lived and single-purpose, never a standing permission.
 */
export function dispatchRefusal(s: DispatchState, now: number): DispatchRefusal | null {
  // A denied receipt dispatched anyway is the confused deputy the executor exists to stop.
  if (s.receipt.decision !== 'authorized' || s.receipt.violations.length > 0) return 'authorization_denied';
  // A receipt found in a log hours later must not become a standing permission.
  if (
    now >= s.receipt.evaluated_at_unix_ms + s.authorization_max_dispatch_ms ||
    now >= s.grant_expires_at_unix_ms ||
    (s.approval_expires_at_unix_ms !== null && now >= s.approval_expires_at_unix_ms)
  ) {
    return 'authorization_expired';
  }
  // Revocation, quarantine or a new policy after evaluation wins over the earlier decision.
  if (
    s.grant_revoked ||
    s.contract_quarantined ||
    s.principal_revoked ||
    // An approval is the approver's standing judgement: it ends with the approver's authority.
    s.approver_revoked ||
    s.current_policy_sha256 !== s.receipt.policy_sha256
  ) {
    return 'authorization_revoked';
  }
  // Another executor release would interpret the reviewed input with unreviewed code.
  if (s.executor_release === null || s.executor_release !== s.contract_executor_release)
    return 'executor_mismatch';
  // A receipt addressed to one executor principal is that principal's alone, whatever else runs
  // the same release.
  if (s.audience_principal_id !== null && s.audience_principal_id !== s.executor_principal_id)
    return 'executor_mismatch';
  return null;
}

// ---------------------------------------------------------------------------------------------
// State

export const OPERATION_STATUSES = [
  'pending',
  'succeeded',
  'failed_no_effect',
  'reconciliation_required',
  'escalated',
  'reconciled_succeeded',
  'reconciled_no_effect',
] as const;
export const OperationStatus = z.enum(OPERATION_STATUSES);
export type OperationStatus = z.infer<typeof OperationStatus>;

/** Statuses whose stored outcome a claim with the same input replays. */
export const REPLAYABLE_STATUSES: ReadonlySet<OperationStatus> = new Set<OperationStatus>([
  'succeeded',
  'failed_no_effect',
  'reconciled_succeeded',
  'reconciled_no_effect',
]);

/** Statuses that block automatic retries until someone reconciles the target. */
export const UNRESOLVED_STATUSES: ReadonlySet<OperationStatus> = new Set<OperationStatus>([
  'reconciliation_required',
  'escalated',
]);

/** Why an operation needs reconciliation. */
export const ReconciliationReason = z.enum(['indeterminate', 'rejected', 'lease_expired']);
export type ReconciliationReason = z.infer<typeof ReconciliationReason>;

export const FencingNonce = z.string().regex(/^[0-9a-f]{32}$/, 'must be 32 lowercase hex digits');
/** Positive safe integers only: milliseconds of a lease or a reconciliation window. */
const Duration = z.number().int().min(1).max(Number.MAX_SAFE_INTEGER);

/** Everything an operation is, as stored. `fencing_nonce` is the owner's secret: never shown. */
export const Operation = strict({
  operation_id: Sha256,
  tenant_id: Identifier,
  /** The contract of the claim that proceeded. */
  tool_contract_sha256: Sha256,
  /** The tool (operation family) the name is scoped by; null for a v1 operation (by contract). */
  tool_name: Identifier.nullable(),
  idempotency_key: IdempotencyKey.nullable(),
  input_sha256: Sha256,
  /** The authorization receipt of the claim that proceeded. */
  authorization_receipt_sha256: Sha256,
  owner_principal_id: Identifier,
  status: OperationStatus,
  fencing_generation: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
  fencing_nonce: FencingNonce,
  lease_expires_at_unix_ms: UnixMs,
  execution_receipt_sha256: Sha256.nullable(),
  execution_status: ExecutionStatus.nullable(),
  reconciliation_reason: ReconciliationReason.nullable(),
  reconciliation_owner: Identifier,
  reconciliation_window_ms: Duration,
  reconciliation_deadline_unix_ms: UnixMs.nullable(),
  escalated_at_unix_ms: UnixMs.nullable(),
  reconciliation_receipt_sha256: Sha256.nullable(),
  /** When the one claim that proceeded was made: an effect must not start before it. */
  created_at_unix_ms: UnixMs,
  /** Strictly increases with every transition: a version for whoever mirrors this state. */
  updated_at_unix_ms: UnixMs,
});
export type Operation = z.infer<typeof Operation>;

/** What anyone but the owner may see of an operation. */
export type OperationView = Omit<Operation, 'fencing_nonce'>;

export function viewOf(op: Operation): OperationView {
  const { fencing_nonce: _secret, ...view } = op;
  return view;
}

// ---------------------------------------------------------------------------------------------
// Fencing tokens

/** `<generation>.<nonce>`: the generation orders owners, the nonce makes the token unguessable. */
export function formatFencingToken(generation: number, nonce: string): string {
  return `${generation}.${nonce}`;
}

export const FencingToken = z
  .string()
  .max(64)
  .regex(/^[1-9][0-9]{0,15}\.[0-9a-f]{32}$/, 'must be a fencing token returned by a claim');

function tokenMatches(op: Operation, token: string): boolean {
  const dot = token.indexOf('.');
  if (dot < 0) return false;
  const generation = Number(token.slice(0, dot));
  // Both halves are compared whatever the first says, so timing does not tell which one differs.
  const sameGeneration = generation === op.fencing_generation;
  const sameNonce = constantTimeEqual(token.slice(dot + 1), op.fencing_nonce);
  return sameGeneration && sameNonce;
}

/** Equality whose running time depends only on the length of the inputs. */
export function constantTimeEqual(a: string, b: string): boolean {
  let diff = a.length ^ b.length;
  const n = Math.max(a.length, b.length);
  for (let i = 0; i < n; i++) diff |= (a.charCodeAt(i) | 0) ^ (b.charCodeAt(i) | 0);
  return diff === 0;
}

// ---------------------------------------------------------------------------------------------
// Events and answers

export interface ClaimEvent {
  readonly operation_id: string;
  readonly tenant_id: string;
  readonly tool_contract_sha256: string;
  readonly tool_name: string | null;
  readonly idempotency_key: string | null;
  readonly input_sha256: string;
  readonly authorization_receipt_sha256: string;
  readonly principal_id: string;
  /** How long the owner may take before its silence counts as a possible crash. */
  readonly lease_ms: number;
  readonly reconciliation_owner: string;
  readonly reconciliation_window_ms: number;
  /** Fresh randomness from the adapter; used only when this claim proceeds. */
  readonly fencing_nonce: string;
}

export interface ReportEvent {
  readonly principal_id: string;
  readonly fencing_token: string;
  readonly execution_receipt_sha256: string;
  readonly execution_status: ExecutionStatus;
}

export const RECONCILIATION_RESOLUTIONS = ['verified_succeeded', 'verified_failed_no_effect'] as const;
export const ReconciliationResolution = z.enum(RECONCILIATION_RESOLUTIONS);
export type ReconciliationResolution = z.infer<typeof ReconciliationResolution>;

export interface ReconcileEvent {
  readonly reconciliation_receipt_sha256: string;
  readonly resolution: ReconciliationResolution;
}

export type ClaimRefusal = 'idempotency_key_reused' | 'in_progress' | 'reconciliation_required';
export type ReportRefusal = 'not_found' | 'stale_fencing_token';
export type ReconcileRefusal = 'not_found' | 'not_reconcilable';

export type ClaimAnswer =
  | { readonly kind: 'proceed'; readonly fencing_token: string; readonly lease_expires_at_unix_ms: number }
  | { readonly kind: 'replay' }
  | { readonly kind: 'refused'; readonly reason: ClaimRefusal };

export type ReportAnswer =
  | { readonly kind: 'recorded' }
  | { readonly kind: 'replay' }
  | { readonly kind: 'refused'; readonly reason: ReportRefusal };

export type ReconcileAnswer =
  | { readonly kind: 'recorded' }
  | { readonly kind: 'replay' }
  | { readonly kind: 'refused'; readonly reason: ReconcileRefusal };

/**
 * The outcome of one event: the state to store (`null`: there is none) and the answer.
 * `changed` is true exactly when `state` differs from what was loaded and must be written.
 */
export interface Transition<A> {
  readonly state: Operation | null;
  readonly changed: boolean;
  readonly answer: A;
}

// ---------------------------------------------------------------------------------------------
// Transitions

/**
 * Apply the transitions that only the passage of time causes. A pending operation past its
 * lease may have had its effect before its owner crashed, so it needs reconciliation; an
 * unresolved operation past its deadline is escalated. Returns the same object when nothing is due.
 */
export function advance(op: Operation, now: number): Operation {
  let cur = op;
  if (cur.status === 'pending' && now >= cur.lease_expires_at_unix_ms) {
    cur = {
      ...cur,
      status: 'reconciliation_required',
      reconciliation_reason: 'lease_expired',
      // The uncertainty began when the lease ended, not when someone noticed.
      reconciliation_deadline_unix_ms: cur.lease_expires_at_unix_ms + cur.reconciliation_window_ms,
    };
  }
  if (
    cur.status === 'reconciliation_required' &&
    cur.reconciliation_deadline_unix_ms !== null &&
    now >= cur.reconciliation_deadline_unix_ms
  ) {
    cur = { ...cur, status: 'escalated', escalated_at_unix_ms: now };
  }
  return cur === op ? op : touch(cur, op, now);
}

/** A claim: the first one proceeds, a repeat with the same input replays or waits, any other input is refused. */
export function claim(current: Operation | null, e: ClaimEvent, now: number): Transition<ClaimAnswer> {
  if (current === null) {
    const lease = now + e.lease_ms;
    const state: Operation = {
      operation_id: e.operation_id,
      tenant_id: e.tenant_id,
      tool_contract_sha256: e.tool_contract_sha256,
      tool_name: e.tool_name,
      idempotency_key: e.idempotency_key,
      input_sha256: e.input_sha256,
      authorization_receipt_sha256: e.authorization_receipt_sha256,
      owner_principal_id: e.principal_id,
      status: 'pending',
      fencing_generation: 1,
      fencing_nonce: e.fencing_nonce,
      lease_expires_at_unix_ms: lease,
      execution_receipt_sha256: null,
      execution_status: null,
      reconciliation_reason: null,
      reconciliation_owner: e.reconciliation_owner,
      reconciliation_window_ms: e.reconciliation_window_ms,
      reconciliation_deadline_unix_ms: null,
      escalated_at_unix_ms: null,
      reconciliation_receipt_sha256: null,
      created_at_unix_ms: now,
      updated_at_unix_ms: now,
    };
    return {
      state,
      changed: true,
      answer: {
        kind: 'proceed',
        fencing_token: formatFencingToken(1, e.fencing_nonce),
        lease_expires_at_unix_ms: lease,
      },
    };
  }
  const op = advance(current, now);
  const changed = op !== current;
  // The same key for different parameters is a client bug or an attack; it is refused whatever
  // the state, so the refusal can reveal neither the stored input nor how far the operation got.
  if (op.input_sha256 !== e.input_sha256) {
    return { state: op, changed, answer: { kind: 'refused', reason: 'idempotency_key_reused' } };
  }
  if (op.tool_contract_sha256 !== e.tool_contract_sha256) {
    // Another reviewed contract of the same tool (e.g. re-pinned after drift): the operation
    // under the first one may still have its effect, so it blocks; once settled, the key named
    // that contract's operation, and another contract's call needs a new key.
    const reason: ClaimRefusal =
      op.status === 'pending'
        ? 'in_progress'
        : UNRESOLVED_STATUSES.has(op.status)
          ? 'reconciliation_required'
          : 'idempotency_key_reused';
    return { state: op, changed, answer: { kind: 'refused', reason } };
  }
  switch (op.status) {
    case 'pending':
      return { state: op, changed, answer: { kind: 'refused', reason: 'in_progress' } };
    case 'reconciliation_required':
    case 'escalated':
      // A retry could repeat an effect that may already have happened.
      return { state: op, changed, answer: { kind: 'refused', reason: 'reconciliation_required' } };
    case 'succeeded':
    case 'failed_no_effect':
    case 'reconciled_succeeded':
    case 'reconciled_no_effect':
      return { state: op, changed, answer: { kind: 'replay' } };
  }
}

/** The owner's report of a verified execution receipt, fenced by its token and lease. */
export function report(current: Operation | null, e: ReportEvent, now: number): Transition<ReportAnswer> {
  if (current === null)
    return { state: null, changed: false, answer: { kind: 'refused', reason: 'not_found' } };
  const op = advance(current, now);
  const changed = op !== current;
  // Token and principal together: a token leaked to another principal still fences nothing.
  const owner = e.principal_id === op.owner_principal_id && tokenMatches(op, e.fencing_token);
  if (!owner) return { state: op, changed, answer: { kind: 'refused', reason: 'stale_fencing_token' } };
  if (op.status !== 'pending') {
    // The owner retrying a report whose answer it lost gets the same answer, nothing more.
    if (op.execution_receipt_sha256 === e.execution_receipt_sha256) {
      return { state: op, changed, answer: { kind: 'replay' } };
    }
    // Lease over, or a different report already recorded: the token fences nothing any more.
    return { state: op, changed, answer: { kind: 'refused', reason: 'stale_fencing_token' } };
  }
  const base = {
    ...op,
    execution_receipt_sha256: e.execution_receipt_sha256,
    execution_status: e.execution_status,
  };
  let next: Operation;
  switch (e.execution_status) {
    case 'verified_succeeded':
      next = { ...base, status: 'succeeded' };
      break;
    case 'verified_failed_no_effect':
      next = { ...base, status: 'failed_no_effect' };
      break;
    case 'indeterminate':
    case 'rejected':
      // A rejected report proves nothing about the target: the effect may have happened.
      next = {
        ...base,
        status: 'reconciliation_required',
        reconciliation_reason: e.execution_status,
        reconciliation_deadline_unix_ms: now + op.reconciliation_window_ms,
      };
      break;
  }
  return { state: touch(next, op, now), changed: true, answer: { kind: 'recorded' } };
}

/** Resolution of an unresolved operation by a verified reconciliation receipt. */
export function reconcile(
  current: Operation | null,
  e: ReconcileEvent,
  now: number,
): Transition<ReconcileAnswer> {
  if (current === null)
    return { state: null, changed: false, answer: { kind: 'refused', reason: 'not_found' } };
  const op = advance(current, now);
  const changed = op !== current;
  if (op.reconciliation_receipt_sha256 !== null) {
    const same = op.reconciliation_receipt_sha256 === e.reconciliation_receipt_sha256;
    // One resolution per operation: a second, different one would rewrite history.
    return {
      state: op,
      changed,
      answer: same ? { kind: 'replay' } : { kind: 'refused', reason: 'not_reconcilable' },
    };
  }
  // A pending operation has a live owner; a terminal one has nothing to resolve.
  if (!UNRESOLVED_STATUSES.has(op.status)) {
    return { state: op, changed, answer: { kind: 'refused', reason: 'not_reconcilable' } };
  }
  const next: Operation = {
    ...op,
    status: e.resolution === 'verified_succeeded' ? 'reconciled_succeeded' : 'reconciled_no_effect',
    reconciliation_receipt_sha256: e.reconciliation_receipt_sha256,
  };
  return { state: touch(next, op, now), changed: true, answer: { kind: 'recorded' } };
}

/** An alarm: only time passes. */
export function tick(current: Operation | null, now: number): Transition<null> {
  if (current === null) return { state: null, changed: false, answer: null };
  const op = advance(current, now);
  return { state: op, changed: op !== current, answer: null };
}

/** When the next time-driven transition is due, or `null` when none ever will be. */
export function nextAlarmAt(op: Operation): number | null {
  switch (op.status) {
    case 'pending':
      return op.lease_expires_at_unix_ms;
    case 'reconciliation_required':
      return op.reconciliation_deadline_unix_ms;
    case 'escalated':
    case 'succeeded':
    case 'failed_no_effect':
    case 'reconciled_succeeded':
    case 'reconciled_no_effect':
      return null;
  }
}

/**
 * An execution that started before its claim was not dispatched by the fenced owner: the effect
 * may have run without the operation's lease (a second executor, or one that acted first and
 * claimed after). The executor's clock may trail the Worker's by the policy's skew.
 */
export function startedBeforeClaim(
  op: Pick<Operation, 'created_at_unix_ms'>,
  started_at_unix_ms: number,
  max_clock_skew_ms: number,
): boolean {
  return started_at_unix_ms + max_clock_skew_ms < op.created_at_unix_ms;
}

/** Stamp a transition: `updated_at` strictly increases even when two land in the same millisecond. */
function touch(next: Operation, prev: Operation, now: number): Operation {
  return { ...next, updated_at_unix_ms: Math.max(now, prev.updated_at_unix_ms + 1) };
}
