/**
 * Approval requests: an agent submits the exact canonical input for a pinned contract; an
 * approver who is not the requester approves or denies it. An approval binds tenant, policy,
 * contract, input digest, effect and expiry, and is consumed by exactly one authorization
 * (src/services/authorize.ts); its record is never deleted, so it outlives its expiry.
 *
 * Guarantees: the input is stored as its canonical text (the bytes the executor will consume)
 * with its digest; the target is derived from it by the contract; a quarantined contract or a
 * policy that changed since the request cannot be approved; the requester never decides its own
 * request; two approvers racing yield one decision; a call whose effect the policy does not put
 * behind approval is refused (409 `conflict`) rather than queued; an approval given with the
 * digests an approver was shown (`ApprovalBinding`) is refused if any of them no longer holds;
 * the history (`approvalHistory`) shows each decided approval with only its own tenant's
 * operation and receipts, one bounded store query per page whatever the history's length.
 */
import { z } from 'zod';
import { toToolApproval } from '../core/authorization/approval.js';
import { canonicalize, sha256Hex } from '../core/canonical/canonical.js';
import { utf8Encode } from '../core/canonical/json.js';
import { resolveTarget } from '../core/contracts/target.js';
import type { JsonValue } from '../core/canonical/json.js';
import { safeText } from '../core/errors.js';
import { IdempotencyKey, ResourceRef, type ToolContract } from '../core/model.js';
import { approvalRequestTtlMs } from '../core/policy.js';
import { Identifier, JsonInput, Label, Sha256, UnixMs } from '../core/schema.js';
import { textWarnings } from '../core/text.js';
import { parseStoredJson, storedJsonReadsBack } from '../db/documents.js';
import { newId } from '../db/ids.js';
import { type TenantContext, ROLES_FOR, assertNamedIdentity, requireRole } from './context.js';
import { ServiceError, notFound, unwrap } from './errors.js';
import { SAME_INPUT_ATTEMPTS_SHOWN, openAttemptsOfInput, unresolvedAttemptFor } from './executions.js';
import { MAX_PAGE_SIZE, PageQuery, decodeCursor, encodeCursor, page } from './pagination.js';
import {
  APPROVAL_STATUSES,
  DECIDED_APPROVAL_STATUSES,
  type ApprovalDecision,
  type ApprovalHistoryRow,
  type ApprovalRow,
  type ApprovalWithContract,
} from './ports.js';

export const CreateApprovalRequest = z.strictObject({
  tool_contract_sha256: Sha256,
  input: JsonInput,
  /** Optional: if present it must equal the target the contract derives from `input`. */
  target: ResourceRef.optional(),
  tenant_id: Identifier.optional(),
  principal_id: Identifier.optional(),
  /**
   * Optional: the idempotency key the agent will authorize the call with. An earlier unresolved
   * attempt under that key is shown to the approver beside the request (issue 14).
   */
  idempotency_key: IdempotencyKey.optional(),
});
export type CreateApprovalRequest = z.infer<typeof CreateApprovalRequest>;

export const ApproveRequest = z.strictObject({
  /** Defaults to, and may not exceed, the policy's `approval_max_lifetime_ms`. */
  expires_in_ms: z.number().int().min(1).optional(),
  reason: Label.optional(),
});
export type ApproveRequest = z.infer<typeof ApproveRequest>;

export const DenyRequest = z.strictObject({ reason: Label.optional() });
export type DenyRequest = z.infer<typeof DenyRequest>;

/**
 * The statuses a request is shown with: the stored ones, and `expired`, derived at read for a
 * pending request older than the policy's `approval_request_ttl_ms` (never stored, so no
 * migration and no sweeper: the clock of the read decides).
 */
export const APPROVAL_VIEW_STATUSES = [...APPROVAL_STATUSES, 'expired'] as const;
export type ApprovalViewStatus = (typeof APPROVAL_VIEW_STATUSES)[number];

export const ApprovalListQuery = z.strictObject({
  status: z.enum(APPROVAL_VIEW_STATUSES).optional(),
  ...PageQuery,
});
export type ApprovalListQuery = z.infer<typeof ApprovalListQuery>;

/**
 * What an approver was shown (the approval console renders it into its form): the approval
 * binds exactly these digests, or is refused.
 */
export interface ApprovalBinding {
  readonly input_sha256: string;
  readonly tool_contract_sha256: string;
  readonly policy_sha256: string;
}

export async function requestApproval(ctx: TenantContext, body: CreateApprovalRequest) {
  const { caller, store, now } = ctx;
  requireRole(caller, ROLES_FOR.requestApproval);
  assertNamedIdentity(caller, body);
  const [pinned, inForce] = await Promise.all([
    store.getContract(body.tool_contract_sha256),
    store.currentPolicy(),
  ]);
  if (pinned === null) throw notFound('contract');
  // Approving a quarantined definition would spend a reviewer's attention on a dead call.
  if (pinned.quarantined_at_unix_ms !== null)
    throw new ServiceError('contract_quarantined', 'contract is quarantined');
  const contract = pinned.contract;
  // A call that needs no approval must not queue for a person: it would train approvers to
  // click through, and an approval for it would authorize nothing the grant did not already.
  if (!inForce.policy.approval_required_effects.includes(contract.effect)) {
    throw new ServiceError(
      'conflict',
      `effect "${contract.effect}" does not need approval under the policy in force`,
    );
  }
  const input = canonicalize(body.input);
  const inputBytes = utf8Encode(input);
  if (inputBytes.byteLength > contract.max_input_bytes) {
    throw new ServiceError('invalid_request', 'input exceeds the contract limit', [
      { path: 'input', message: `must be at most ${contract.max_input_bytes} bytes` },
    ]);
  }
  // The stored text must read back as it is shown (`approvalView`) and imported (tenant-moves.ts).
  if (!storedJsonReadsBack(input)) {
    throw new ServiceError('invalid_request', 'input does not read back as canonical JSON', [
      { path: 'input', message: 'must hold no integer-valued number outside the safe range' },
    ]);
  }
  const target = unwrap(resolveTarget(contract, body.input, body.target));
  const approval_id = newId('approval');
  const input_sha256 = sha256Hex(inputBytes);
  const row: ApprovalRow = {
    approval_id,
    tenant_id: caller.tenant_id,
    requester_principal_id: caller.principal_id,
    policy_sha256: inForce.policy_sha256,
    tool_contract_sha256: pinned.tool_contract_sha256,
    input_sha256,
    input_bytes: inputBytes.byteLength,
    input,
    target: canonicalize(target),
    effect: contract.effect,
    status: 'pending',
    created_at_unix_ms: now,
    decided_by: null,
    decided_at_unix_ms: null,
    expires_at_unix_ms: null,
    decision_reason: null,
    consumed_at_unix_ms: null,
    consumed_by_receipt_sha256: null,
    first_approved_by: null,
    first_approved_at_unix_ms: null,
    first_approval_lifetime_ms: null,
    idempotency_key: body.idempotency_key ?? null,
  };
  await store.insertApproval(row);
  ctx.log({ approval_id, tool_contract_sha256: pinned.tool_contract_sha256, input_sha256 });
  return approvalView({ approval: row, contract }, { now, ttl_ms: approvalRequestTtlMs(inForce.policy) });
}

/** Oldest first; `next_cursor` continues after the last one (src/services/pagination.ts). */
export async function listApprovals(ctx: TenantContext, q: ApprovalListQuery) {
  const { store, now } = ctx;
  requireRole(ctx.caller, ROLES_FOR.listApprovals);
  const status = q.status ?? 'pending';
  // 100 by default, as before pagination: a client that never pages sees what it always saw.
  const limit = q.limit ?? MAX_PAGE_SIZE;
  const after =
    q.cursor === undefined
      ? null
      : decodeCursor(q.cursor, z.tuple([z.literal('approvals'), z.literal(status), UnixMs, Identifier]));
  const clock = await requestClock(ctx);
  // A pending request is live while younger than the TTL; `expired` lists the others.
  const created =
    status === 'pending'
      ? { after: now - clock.ttl_ms }
      : status === 'expired'
        ? { at_or_before: now - clock.ttl_ms }
        : undefined;
  const rows = await store.listApprovals({
    status: status === 'expired' ? 'pending' : status,
    ...(created === undefined ? {} : { created }),
    after: after === null ? null : { created_at_unix_ms: after[2], approval_id: after[3] },
    limit: limit + 1,
  });
  const { items, next_cursor } = page(rows, limit, (r) => [
    'approvals',
    status,
    r.approval.created_at_unix_ms,
    r.approval.approval_id,
  ]);
  return { status, items: items.map((r) => approvalView(r, clock)), next_cursor };
}

export async function getApproval(ctx: TenantContext, approval_id: string) {
  const { caller } = ctx;
  requireRole(caller, ROLES_FOR.readApproval);
  const found = await find(ctx, approval_id);
  // An agent sees its own requests only; to anyone else they do not exist.
  if (
    !caller.roles.includes('approver') &&
    !caller.roles.includes('tenant_admin') &&
    found.approval.requester_principal_id !== caller.principal_id
  ) {
    throw notFound('approval request');
  }
  return withEarlierAttempt(ctx, found, await requestClock(ctx));
}

export async function approve(
  ctx: TenantContext,
  approval_id: string,
  body: ApproveRequest,
  expected?: ApprovalBinding,
) {
  const { caller, store, now } = ctx;
  requireRole(caller, ROLES_FOR.decideApproval);
  const a = (await find(ctx, approval_id)).approval;
  const [inForce, pinned] = await Promise.all([
    store.currentPolicy(),
    store.getContract(a.tool_contract_sha256),
  ]);
  const clock = { now, ttl_ms: approvalRequestTtlMs(inForce.policy) };
  assertDecidable(a, caller.principal_id, clock);
  // The approver decided on a rendering; anything that differs from it was not reviewed.
  if (expected !== undefined) assertShown(expected, a, inForce.policy_sha256);
  // The request was previewed under another policy: its approval would be denied as drifted.
  if (a.policy_sha256 !== inForce.policy_sha256) {
    throw new ServiceError('conflict', 'the policy changed since the request; request a new approval');
  }
  // Quarantined since the request: as at the request, no approval for a definition nothing may run.
  if (pinned === null) throw notFound('contract');
  if (pinned.quarantined_at_unix_ms !== null) {
    throw new ServiceError('contract_quarantined', 'contract is quarantined');
  }
  const max = inForce.policy.approval_max_lifetime_ms;
  const ttl = body.expires_in_ms ?? max;
  if (ttl > max) {
    throw new ServiceError('invalid_request', 'approval lifetime exceeds the policy', [
      { path: 'expires_in_ms', message: `must be at most ${max}` },
    ]);
  }
  if (a.effect === 'irreversible') {
    if (a.first_approved_by === null) {
      // The first of two: recorded, and the request stays pending for a second approver.
      const first = await ctx.store.recordFirstApproval(a.approval_id, {
        first_approved_by: caller.principal_id,
        first_approved_at_unix_ms: now,
        first_approval_lifetime_ms: ttl,
      });
      if (first !== 'recorded') {
        throw new ServiceError(
          'conflict',
          'another approver gave the first approval concurrently; review the request again',
        );
      }
      ctx.log({ approval_id: a.approval_id, decision: 'first_approval' });
      return approvalView(await find(ctx, a.approval_id), clock);
    }
    // One person clicking twice is not two reviews.
    if (a.first_approved_by === caller.principal_id) {
      throw new ServiceError(
        'self_approval',
        'an irreversible effect needs a second, distinct approver; you gave the first approval',
      );
    }
  }
  // Of two approvals the shorter lifetime holds: neither approver agreed to more.
  const lifetime = Math.min(ttl, a.first_approval_lifetime_ms ?? ttl);
  await decide(ctx, a.approval_id, {
    status: 'approved',
    decided_by: caller.principal_id,
    decided_at_unix_ms: now,
    expires_at_unix_ms: now + lifetime,
    decision_reason: body.reason ?? null,
  });
  ctx.log({ approval_id: a.approval_id, decision: 'approved' });
  return approvalView(await find(ctx, a.approval_id), clock);
}

export async function deny(ctx: TenantContext, approval_id: string, body: DenyRequest) {
  const { caller, now } = ctx;
  requireRole(caller, ROLES_FOR.decideApproval);
  const a = (await find(ctx, approval_id)).approval;
  const clock = await requestClock(ctx);
  assertDecidable(a, caller.principal_id, clock);
  await decide(ctx, a.approval_id, {
    status: 'denied',
    decided_by: caller.principal_id,
    decided_at_unix_ms: now,
    expires_at_unix_ms: null,
    decision_reason: body.reason ?? null,
  });
  ctx.log({ approval_id: a.approval_id, decision: 'denied' });
  return approvalView(await find(ctx, a.approval_id), clock);
}

function assertShown(shown: ApprovalBinding, a: ApprovalRow, policyInForce: string): void {
  const changed = [
    shown.input_sha256 !== a.input_sha256 ? 'input' : null,
    shown.tool_contract_sha256 !== a.tool_contract_sha256 ? 'tool contract' : null,
    shown.policy_sha256 !== a.policy_sha256 || shown.policy_sha256 !== policyInForce ? 'policy' : null,
  ].filter((x) => x !== null);
  if (changed.length > 0) {
    throw new ServiceError(
      'conflict',
      `the ${changed.join(', ')} changed after the request was shown; review it again`,
    );
  }
}

function assertDecidable(a: ApprovalRow, approver: string, clock: RequestClock): void {
  // An approval by the requester is no independent review.
  if (a.requester_principal_id === approver) {
    throw new ServiceError('self_approval', 'the requester cannot decide its own approval request');
  }
  if (a.status !== 'pending') throw new ServiceError('conflict', `approval request is already ${a.status}`);
  // A request nobody decided in time is stale context: deciding it now would approve a call the
  // agent may have long given up on (or re-planned around); it must ask again.
  if (viewStatus(a, clock) === 'expired') {
    throw new ServiceError(
      'conflict',
      `approval request expired after ${clock.ttl_ms} ms without a decision; request a new approval`,
    );
  }
}

/** The read instant and the pending-request lifetime in force, for deriving `expired`. */
export interface RequestClock {
  readonly now: number;
  readonly ttl_ms: number;
}

async function requestClock(ctx: TenantContext): Promise<RequestClock> {
  const inForce = await ctx.store.currentPolicy();
  return { now: ctx.now, ttl_ms: approvalRequestTtlMs(inForce.policy) };
}

/** The stored status, or `expired` for a pending request at least `ttl_ms` old. */
export function viewStatus(a: ApprovalRow, clock: RequestClock): ApprovalViewStatus {
  return a.status === 'pending' && clock.now - a.created_at_unix_ms >= clock.ttl_ms ? 'expired' : a.status;
}

async function decide(ctx: TenantContext, approval_id: string, decision: ApprovalDecision): Promise<void> {
  if ((await ctx.store.decideApproval(approval_id, decision)) !== 'decided') {
    throw new ServiceError('conflict', 'approval request was decided concurrently');
  }
}

async function find(ctx: TenantContext, approval_id: string): Promise<ApprovalWithContract> {
  const found = await ctx.store.getApproval(approval_id);
  if (found === null) throw notFound('approval request');
  return found;
}

/** The wire form of an approval request, with the preview an approver decides on. */
export function approvalView({ approval: a, contract }: ApprovalWithContract, clock: RequestClock) {
  const target = parseStoredJson('approval target', a.target);
  const input = parseStoredJson('approval input', a.input);
  return {
    approval_id: a.approval_id,
    status: viewStatus(a, clock),
    /** When a still-pending request expires (null once decided). */
    request_expires_at_unix_ms: a.status === 'pending' ? a.created_at_unix_ms + clock.ttl_ms : null,
    tenant_id: a.tenant_id,
    requester_principal_id: a.requester_principal_id,
    policy_sha256: a.policy_sha256,
    tool_contract_sha256: a.tool_contract_sha256,
    input_sha256: a.input_sha256,
    input_bytes: a.input_bytes,
    effect: a.effect,
    target,
    /** The exact canonical input the approver approves and the executor will consume. */
    input,
    preview: contract === null ? null : preview(contract, target, input, a.decision_reason),
    created_at_unix_ms: a.created_at_unix_ms,
    decided_by: a.decided_by,
    decided_at_unix_ms: a.decided_at_unix_ms,
    expires_at_unix_ms: a.expires_at_unix_ms,
    decision_reason: a.decision_reason,
    consumed_at_unix_ms: a.consumed_at_unix_ms,
    consumed_by_receipt_sha256: a.consumed_by_receipt_sha256,
    /** 2 for an `irreversible` effect: a second, distinct approver completes it (issue 14). */
    approvals_required: a.effect === 'irreversible' ? 2 : 1,
    /** The first of two approvals, while the request waits for the second (and after). */
    first_approved_by: a.first_approved_by,
    first_approved_at_unix_ms: a.first_approved_at_unix_ms,
    idempotency_key: a.idempotency_key,
    approval: toToolApproval(a),
  };
}

/** An earlier unresolved attempt of the same operation (tool, idempotency key), or null. */
export type EarlierAttempt = Awaited<ReturnType<typeof unresolvedAttemptFor>>;
/** Open attempts of the same tool and input under any key (`openAttemptsOfInput`). */
export type SameInputAttempts = Awaited<ReturnType<typeof openAttemptsOfInput>>;

/**
 * The single-request view adds what may already have acted, so an approver does not approve the
 * same rollback twice:
 * - `earlier_attempt`: an unresolved attempt of the same logical operation (same tool and
 *   idempotency key), or null (always null for a request without a key);
 * - `same_input_attempts` (approvers and tenant admins only): open operations (in flight or
 *   awaiting reconciliation) of the same tool and the same input digest under any key: a retry
 *   under a new key, or a request that named no key, is found this way. At most
 *   `SAME_INPUT_ATTEMPTS_SHOWN`, the `earlier_attempt` left out.
 * Lists leave both out (their reads per row would make a page cost its length in reads).
 */
async function withEarlierAttempt(ctx: TenantContext, found: ApprovalWithContract, clock: RequestClock) {
  const key = found.approval.idempotency_key;
  const contract = found.contract;
  // Other principals' operations (with their idempotency keys) are for those who decide or
  // administer: the agent reading its own request gets no `same_input_attempts`.
  const decides = ctx.caller.roles.includes('approver') || ctx.caller.roles.includes('tenant_admin');
  // Two reads of the operation index, concurrently (neither depends on the other).
  const [earlier_attempt, sameInput]: [EarlierAttempt, SameInputAttempts | null] =
    contract === null
      ? [null, decides ? [] : null]
      : await Promise.all([
          key === null ? null : unresolvedAttemptFor(ctx.store, contract.tool_name, key),
          decides ? openAttemptsOfInput(ctx.store, contract.tool_name, found.approval.input_sha256) : null,
        ]);
  const view = { ...approvalView(found, clock), earlier_attempt };
  if (sameInput === null) return view;
  const same_input_attempts = sameInput
    .filter((a) => a.operation_id !== earlier_attempt?.operation_id)
    .slice(0, SAME_INPUT_ATTEMPTS_SHOWN);
  return { ...view, same_input_attempts };
}

function preview(contract: ToolContract, target: JsonValue, input: JsonValue, reason: string | null) {
  // What the approver reads may not be what the bytes say: bidi controls reorder it, invisible
  // characters hide in it. They are legal (a digest is over the exact bytes) but flagged here.
  const { warnings, omitted } = textWarnings([
    ['/input', input],
    ['/target', target],
    ['/preview/contract_release', contract.contract_release],
    ['/preview/executor_release', contract.executor_release],
    ['/decision_reason', reason],
  ]);
  return {
    /** Bidi controls and invisible characters in what is shown; paths are escaped. */
    warnings: warnings.map((w) => ({ ...w, path: safeText(w.path) })),
    warnings_omitted: omitted,
    tool_name: contract.tool_name,
    contract_release: contract.contract_release,
    executor_release: contract.executor_release,
    effect: contract.effect,
    reversible: contract.reversible,
    required_capabilities: contract.required_capabilities,
    target,
  };
}

// ---------------------------------------------------------------------------------------------
// The console's history (issue 14): decided approvals and the receipts each led to

/** Rows per history page by default (the console's page size). */
export const HISTORY_PAGE_SIZE = 25;
/**
 * The count of decided approvals stops here and reads "more than" beyond: counting is a walk of
 * an index, so an uncapped count would cost a page its tenant's whole history.
 */
export const HISTORY_COUNT_CAP = 10_000;

export const ApprovalHistoryQuery = z.strictObject({
  /** One stored outcome, or every decided request when absent. */
  status: z.enum(DECIDED_APPROVAL_STATUSES).optional(),
  ...PageQuery,
});
export type ApprovalHistoryQuery = z.infer<typeof ApprovalHistoryQuery>;

const HistoryCursor = z.tuple([
  z.literal('history'),
  z.enum(['', ...DECIDED_APPROVAL_STATUSES]),
  z.enum(['older', 'newer']),
  UnixMs,
  Identifier,
]);

/**
 * What a decided approval led to, from the operation index: the authorization receipt that used
 * it, the operation that receipt was claimed as, its execution receipt and outcome, and the
 * reconciliation that settled it. Outcomes are the receipts' own words (`verified_succeeded`,
 * `verified_failed_no_effect`, `indeterminate`, `rejected`); null where nothing happened yet.
 */
export function historyReceipts(row: ApprovalHistoryRow) {
  const op = row.operation;
  const state = op?.state ?? null;
  return {
    authorization_receipt_sha256: row.approval.consumed_by_receipt_sha256,
    operation:
      op === null
        ? null
        : {
            operation_id: op.operation_id,
            status: op.state,
            reconciliation_deadline_unix_ms: op.reconciliation_deadline_unix_ms,
            escalated_at_unix_ms: op.escalated_at_unix_ms,
          },
    execution:
      op === null || op.execution_receipt_sha256 === null
        ? null
        : {
            sha256: op.execution_receipt_sha256,
            // An archived receipt's row is gone from D1: a settled state still says what it proved.
            outcome:
              op.execution_outcome ??
              (state === 'succeeded'
                ? 'verified_succeeded'
                : state === 'failed_no_effect'
                  ? 'verified_failed_no_effect'
                  : null),
          },
    reconciliation:
      state !== 'reconciled_succeeded' && state !== 'reconciled_no_effect'
        ? null
        : {
            // Null only for an operation reconciled before migration 0009 whose receipt was archived.
            sha256: op?.reconciliation_receipt_sha256 ?? null,
            resolution:
              state === 'reconciled_succeeded'
                ? ('verified_succeeded' as const)
                : ('verified_failed_no_effect' as const),
          },
  };
}

/**
 * Decided approvals, newest decision first, each with what it led to; `next_cursor` pages
 * older, `previous_cursor` newer (keyset both ways), `total` counts decided approvals of the
 * filter up to `HISTORY_COUNT_CAP` (`total_capped` when there are more). One batch of two
 * bounded queries per page, however long the history.
 */
export async function approvalHistory(ctx: TenantContext, q: ApprovalHistoryQuery) {
  const { store } = ctx;
  requireRole(ctx.caller, ROLES_FOR.listApprovals);
  const filter = q.status ?? '';
  const limit = q.limit ?? HISTORY_PAGE_SIZE;
  const from = q.cursor === undefined ? null : decodeCursor(q.cursor, HistoryCursor);
  // A cursor of another filter is a position in another list.
  if (from !== null && from[1] !== filter) {
    throw new ServiceError('invalid_request', 'cursor is not valid', [
      { path: 'cursor', message: 'must be a cursor of this list and filter' },
    ]);
  }
  const [clock, found] = await Promise.all([
    requestClock(ctx),
    store.approvalHistory({
      status: q.status,
      from: from === null ? null : { direction: from[2], decided_at_unix_ms: from[3], approval_id: from[4] },
      limit: limit + 1,
      count_cap: HISTORY_COUNT_CAP,
    }),
  ]);
  const more = found.rows.length > limit;
  const newer = from !== null && from[2] === 'newer';
  // A previous page is read nearest first: turned back into page order here.
  const rows = newer ? found.rows.slice(0, limit).reverse() : found.rows.slice(0, limit);
  const cursorAt = (direction: 'older' | 'newer', r: ApprovalHistoryRow | undefined) =>
    r === undefined || r.approval.decided_at_unix_ms === null
      ? null
      : encodeCursor(['history', filter, direction, r.approval.decided_at_unix_ms, r.approval.approval_id]);
  const first = rows[0];
  const last = rows[rows.length - 1];
  return {
    status: q.status ?? null,
    items: rows.map((r) => ({ ...approvalView(r, clock), led_to: historyReceipts(r) })),
    next_cursor: newer ? cursorAt('older', last) : more ? cursorAt('older', last) : null,
    previous_cursor: newer
      ? more
        ? cursorAt('newer', first)
        : null
      : from === null
        ? null
        : cursorAt('newer', first),
    total: Math.min(found.total, HISTORY_COUNT_CAP),
    total_capped: found.total > HISTORY_COUNT_CAP,
  };
}
