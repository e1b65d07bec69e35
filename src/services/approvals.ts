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
 * digests an approver was shown (`ApprovalBinding`) is refused if any of them no longer holds.
 */
import { z } from 'zod';
import { toToolApproval } from '../core/authorization/approval.js';
import { canonicalize, sha256Hex } from '../core/canonical/canonical.js';
import { utf8Encode } from '../core/canonical/json.js';
import { resolveTarget } from '../core/contracts/target.js';
import { ResourceRef, type ToolContract } from '../core/model.js';
import { Identifier, JsonInput, Label, Sha256 } from '../core/schema.js';
import { parseStoredJson } from '../db/documents.js';
import { newId } from '../db/ids.js';
import { type TenantContext, ROLES_FOR, assertNamedIdentity, requireRole } from './context.js';
import { ServiceError, notFound, unwrap } from './errors.js';
import {
  APPROVAL_STATUSES,
  type ApprovalDecision,
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

export const ApprovalListQuery = z.strictObject({ status: z.enum(APPROVAL_STATUSES).optional() });

export const LIST_LIMIT = 100;

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
  };
  await store.insertApproval(row);
  ctx.log({ approval_id, tool_contract_sha256: pinned.tool_contract_sha256, input_sha256 });
  return approvalView({ approval: row, contract });
}

export async function listApprovals(
  ctx: TenantContext,
  status: (typeof APPROVAL_STATUSES)[number] = 'pending',
) {
  requireRole(ctx.caller, ROLES_FOR.listApprovals);
  const rows = await ctx.store.listApprovals(status, LIST_LIMIT);
  return { status, items: rows.map(approvalView) };
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
  return approvalView(found);
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
  assertDecidable(a, caller.principal_id);
  const inForce = await store.currentPolicy();
  // The approver decided on a rendering; anything that differs from it was not reviewed.
  if (expected !== undefined) assertShown(expected, a, inForce.policy_sha256);
  // The request was previewed under another policy: its approval would be denied as drifted.
  if (a.policy_sha256 !== inForce.policy_sha256) {
    throw new ServiceError('conflict', 'the policy changed since the request; request a new approval');
  }
  const max = inForce.policy.approval_max_lifetime_ms;
  const ttl = body.expires_in_ms ?? max;
  if (ttl > max) {
    throw new ServiceError('invalid_request', 'approval lifetime exceeds the policy', [
      { path: 'expires_in_ms', message: `must be at most ${max}` },
    ]);
  }
  await decide(ctx, a.approval_id, {
    status: 'approved',
    decided_by: caller.principal_id,
    decided_at_unix_ms: now,
    expires_at_unix_ms: now + ttl,
    decision_reason: body.reason ?? null,
  });
  ctx.log({ approval_id: a.approval_id, decision: 'approved' });
  return approvalView(await find(ctx, a.approval_id));
}

export async function deny(ctx: TenantContext, approval_id: string, body: DenyRequest) {
  const { caller, now } = ctx;
  requireRole(caller, ROLES_FOR.decideApproval);
  const a = (await find(ctx, approval_id)).approval;
  assertDecidable(a, caller.principal_id);
  await decide(ctx, a.approval_id, {
    status: 'denied',
    decided_by: caller.principal_id,
    decided_at_unix_ms: now,
    expires_at_unix_ms: null,
    decision_reason: body.reason ?? null,
  });
  ctx.log({ approval_id: a.approval_id, decision: 'denied' });
  return approvalView(await find(ctx, a.approval_id));
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

function assertDecidable(a: ApprovalRow, approver: string): void {
  // An approval by the requester is no independent review.
  if (a.requester_principal_id === approver) {
    throw new ServiceError('self_approval', 'the requester cannot decide its own approval request');
  }
  if (a.status !== 'pending') throw new ServiceError('conflict', `approval request is already ${a.status}`);
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
export function approvalView({ approval: a, contract }: ApprovalWithContract) {
  const target = parseStoredJson('approval target', a.target);
  return {
    approval_id: a.approval_id,
    status: a.status,
    tenant_id: a.tenant_id,
    requester_principal_id: a.requester_principal_id,
    policy_sha256: a.policy_sha256,
    tool_contract_sha256: a.tool_contract_sha256,
    input_sha256: a.input_sha256,
    input_bytes: a.input_bytes,
    effect: a.effect,
    target,
    /** The exact canonical input the approver approves and the executor will consume. */
    input: parseStoredJson('approval input', a.input),
    preview: contract === null ? null : preview(contract, target),
    created_at_unix_ms: a.created_at_unix_ms,
    decided_by: a.decided_by,
    decided_at_unix_ms: a.decided_at_unix_ms,
    expires_at_unix_ms: a.expires_at_unix_ms,
    decision_reason: a.decision_reason,
    consumed_at_unix_ms: a.consumed_at_unix_ms,
    consumed_by_receipt_sha256: a.consumed_by_receipt_sha256,
    approval: toToolApproval(a),
  };
}

function preview(contract: ToolContract, target: unknown) {
  return {
    tool_name: contract.tool_name,
    contract_release: contract.contract_release,
    executor_release: contract.executor_release,
    effect: contract.effect,
    reversible: contract.reversible,
    required_capabilities: contract.required_capabilities,
    target,
  };
}
