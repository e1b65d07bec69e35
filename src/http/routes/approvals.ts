/**
 * Approval requests: an agent submits the exact canonical input for a pinned contract; an
 * approver who is not the requester approves or denies it. An approval binds tenant, policy,
 * contract, input digest, effect and expiry, and is consumed by exactly one authorization
 * (src/http/routes/authorize.ts); its record is never deleted, so it outlives its expiry.
 */
import { and, asc, eq } from 'drizzle-orm';
import { Hono } from 'hono';
import { z } from 'zod';
import { canonicalize, sha256Hex } from '../../core/canonical/canonical.js';
import { deriveTarget } from '../../core/contracts/contract.js';
import { utf8Encode, type JsonValue } from '../../core/canonical/json.js';
import { ResourceRef, type ToolApproval, type ToolContract } from '../../core/model.js';
import { Identifier, Label, Sha256 } from '../../core/schema.js';
import { database } from '../../db/client.js';
import { parseStoredJson, toCanonicalText } from '../../db/documents.js';
import { newId } from '../../db/ids.js';
import { contractCache, currentPolicy, findContract } from '../../db/queries.js';
import { APPROVAL_STATUSES, approvals, contracts } from '../../db/schema.js';
import { assertNamedIdentity, requireRole } from '../auth.js';
import { readJson } from '../body.js';
import type { AppEnv } from '../env.js';
import { ApiError, notFound } from '../errors.js';

/** Any JSON value; the strict decoder in body.ts already rejected everything that is not one. */
export const JsonInput = z.custom<JsonValue>((v) => v !== undefined, 'is required');

const CreateApprovalRequest = z.strictObject({
  tool_contract_sha256: Sha256,
  input: JsonInput,
  /** Optional: if present it must equal the target the contract derives from `input`. */
  target: ResourceRef.optional(),
  tenant_id: Identifier.optional(),
  principal_id: Identifier.optional(),
});

const Approve = z.strictObject({
  /** Defaults to, and may not exceed, the policy's `approval_max_lifetime_ms`. */
  expires_in_ms: z.number().int().min(1).optional(),
  reason: Label.optional(),
});

const Deny = z.strictObject({ reason: Label.optional() });

const ListQuery = z.strictObject({ status: z.enum(APPROVAL_STATUSES).optional() });

export const LIST_LIMIT = 100;

export const approvalRoutes = new Hono<AppEnv>();

approvalRoutes.post('/approval-requests', requireRole('agent'), async (c) => {
  const body = await readJson(c, CreateApprovalRequest);
  const p = c.var.principal;
  assertNamedIdentity(p, body);
  const db = database(c.env);
  const [pinned, inForce] = await Promise.all([
    findContract(db, p.tenant_id, body.tool_contract_sha256),
    currentPolicy(db, p.tenant_id),
  ]);
  if (pinned === null) throw notFound('contract');
  // Approving a quarantined definition would spend a reviewer's attention on a dead call.
  if (pinned.quarantined_at_unix_ms !== null)
    throw new ApiError('contract_quarantined', 'contract is quarantined');
  const contract = pinned.contract;
  const input = toCanonicalText(body.input);
  const inputBytes = utf8Encode(input);
  if (inputBytes.byteLength > contract.max_input_bytes) {
    throw new ApiError('invalid_request', 'input exceeds the contract limit', [
      { path: 'input', message: `must be at most ${contract.max_input_bytes} bytes` },
    ]);
  }
  const target = resolveTarget(contract, body.input, body.target);
  const approval_id = newId('approval');
  const input_sha256 = sha256Hex(inputBytes);
  const row = {
    approval_id,
    tenant_id: p.tenant_id,
    requester_principal_id: p.principal_id,
    policy_sha256: inForce.policy_sha256,
    tool_contract_sha256: pinned.tool_contract_sha256,
    input_sha256,
    input_bytes: inputBytes.byteLength,
    input,
    target: toCanonicalText(target),
    effect: contract.effect,
    status: 'pending' as const,
    created_at_unix_ms: c.var.now,
  };
  await db.insert(approvals).values(row);
  c.set('log', {
    ...c.var.log,
    approval_id,
    tool_contract_sha256: pinned.tool_contract_sha256,
    input_sha256,
  });
  return c.json(view({ ...emptyDecision, ...row }, contract), 201);
});

approvalRoutes.get('/approval-requests', requireRole('approver', 'tenant_admin'), async (c) => {
  const q = ListQuery.safeParse(c.req.query());
  if (!q.success)
    throw new ApiError('invalid_request', 'query is not valid', [
      { path: 'status', message: 'unknown status' },
    ]);
  const status = q.data.status ?? 'pending';
  const rows = await database(c.env)
    .select({ a: approvals, document: contracts.document })
    .from(approvals)
    .leftJoin(
      contracts,
      and(
        eq(contracts.tenant_id, approvals.tenant_id),
        eq(contracts.tool_contract_sha256, approvals.tool_contract_sha256),
      ),
    )
    .where(and(eq(approvals.tenant_id, c.var.principal.tenant_id), eq(approvals.status, status)))
    .orderBy(asc(approvals.created_at_unix_ms), asc(approvals.approval_id))
    .limit(LIST_LIMIT);
  return c.json({ status, items: rows.map((r) => view(r.a, contractOf(r.a, r.document))) });
});

approvalRoutes.get(
  '/approval-requests/:approval_id',
  requireRole('approver', 'tenant_admin', 'agent'),
  async (c) => {
    const found = await find(c.env, c.var.principal.tenant_id, c.req.param('approval_id'));
    const p = c.var.principal;
    // An agent sees its own requests only; to anyone else they do not exist.
    if (
      !p.roles.includes('approver') &&
      !p.roles.includes('tenant_admin') &&
      found.a.requester_principal_id !== p.principal_id
    ) {
      throw notFound('approval request');
    }
    return c.json(view(found.a, contractOf(found.a, found.document)));
  },
);

approvalRoutes.post('/approval-requests/:approval_id/approve', requireRole('approver'), async (c) => {
  const body = await readJson(c, Approve, { allowEmpty: true });
  const p = c.var.principal;
  const db = database(c.env);
  const found = await find(c.env, p.tenant_id, c.req.param('approval_id'));
  const a = found.a;
  assertDecidable(a, p.principal_id);
  const inForce = await currentPolicy(db, p.tenant_id);
  // The request was previewed under another policy: its approval would be denied as drifted.
  if (a.policy_sha256 !== inForce.policy_sha256) {
    throw new ApiError('conflict', 'the policy changed since the request; request a new approval');
  }
  const max = inForce.policy.approval_max_lifetime_ms;
  const ttl = body.expires_in_ms ?? max;
  if (ttl > max) {
    throw new ApiError('invalid_request', 'approval lifetime exceeds the policy', [
      { path: 'expires_in_ms', message: `must be at most ${max}` },
    ]);
  }
  await decide(db, a.tenant_id, a.approval_id, {
    status: 'approved',
    decided_by: p.principal_id,
    decided_at_unix_ms: c.var.now,
    expires_at_unix_ms: c.var.now + ttl,
    decision_reason: body.reason ?? null,
  });
  c.set('log', { ...c.var.log, approval_id: a.approval_id, decision: 'approved' });
  const after = await find(c.env, p.tenant_id, a.approval_id);
  return c.json(view(after.a, contractOf(after.a, after.document)));
});

approvalRoutes.post('/approval-requests/:approval_id/deny', requireRole('approver'), async (c) => {
  const body = await readJson(c, Deny, { allowEmpty: true });
  const p = c.var.principal;
  const found = await find(c.env, p.tenant_id, c.req.param('approval_id'));
  assertDecidable(found.a, p.principal_id);
  await decide(database(c.env), found.a.tenant_id, found.a.approval_id, {
    status: 'denied',
    decided_by: p.principal_id,
    decided_at_unix_ms: c.var.now,
    expires_at_unix_ms: null,
    decision_reason: body.reason ?? null,
  });
  c.set('log', { ...c.var.log, approval_id: found.a.approval_id, decision: 'denied' });
  const after = await find(c.env, p.tenant_id, found.a.approval_id);
  return c.json(view(after.a, contractOf(after.a, after.document)));
});

/** The derived target; a target named in the body must equal it (the agent never chooses it). */
export function resolveTarget(
  contract: ToolContract,
  input: JsonValue,
  named: ResourceRef | undefined,
): ResourceRef {
  const derived = deriveTarget(contract, input);
  if (!derived.ok) throw new ApiError(derived.error.reason, derived.error.message, derived.error.issues);
  if (named !== undefined && canonicalize(named) !== canonicalize(derived.value)) {
    throw new ApiError('target_mismatch', 'target does not match the target derived from input', [
      { path: 'target', message: `input names ${canonicalize(derived.value)}` },
    ]);
  }
  return derived.value;
}

type ApprovalRow = typeof approvals.$inferSelect;

const emptyDecision = {
  decided_by: null,
  decided_at_unix_ms: null,
  expires_at_unix_ms: null,
  decision_reason: null,
  consumed_at_unix_ms: null,
  consumed_by_receipt_sha256: null,
} as const;

function assertDecidable(a: ApprovalRow, approver: string): void {
  // An approval by the requester is no independent review.
  if (a.requester_principal_id === approver) {
    throw new ApiError('self_approval', 'the requester cannot decide its own approval request');
  }
  if (a.status !== 'pending') throw new ApiError('conflict', `approval request is already ${a.status}`);
}

async function decide(
  db: ReturnType<typeof database>,
  tenant_id: string,
  approval_id: string,
  set: Pick<
    ApprovalRow,
    'status' | 'decided_by' | 'decided_at_unix_ms' | 'expires_at_unix_ms' | 'decision_reason'
  >,
): Promise<void> {
  try {
    const r = await db
      .update(approvals)
      .set(set)
      .where(
        and(
          eq(approvals.tenant_id, tenant_id),
          eq(approvals.approval_id, approval_id),
          eq(approvals.status, 'pending'),
        ),
      )
      .run();
    if (r.meta.changes !== 1) throw new ApiError('conflict', 'approval request was decided concurrently');
  } catch (e) {
    // Two approvers racing: the trigger lets exactly one decision through.
    if (e instanceof Error && /approval_not_pending/.test(`${e.message} ${String(e.cause)}`)) {
      throw new ApiError('conflict', 'approval request was decided concurrently');
    }
    throw e;
  }
}

async function find(env: Env, tenant_id: string, approval_id: string) {
  const row = await database(env)
    .select({ a: approvals, document: contracts.document })
    .from(approvals)
    .leftJoin(
      contracts,
      and(
        eq(contracts.tenant_id, approvals.tenant_id),
        eq(contracts.tool_contract_sha256, approvals.tool_contract_sha256),
      ),
    )
    .where(and(eq(approvals.tenant_id, tenant_id), eq(approvals.approval_id, approval_id)))
    .get();
  if (row === undefined) throw notFound('approval request');
  return row;
}

/** The stored approval as the `ToolApproval` an authorization binds, once it was approved. */
export function toToolApproval(a: ApprovalRow): ToolApproval | null {
  if (
    (a.status !== 'approved' && a.status !== 'consumed') ||
    a.decided_by === null ||
    a.expires_at_unix_ms === null
  ) {
    return null;
  }
  return {
    approval_id: a.approval_id,
    approver_principal_id: a.decided_by,
    tenant_id: a.tenant_id,
    policy_sha256: a.policy_sha256,
    tool_contract_sha256: a.tool_contract_sha256,
    input_sha256: a.input_sha256,
    effect: a.effect as ToolApproval['effect'],
    expires_at_unix_ms: a.expires_at_unix_ms,
  };
}

function contractOf(a: ApprovalRow, document: string | null): ToolContract | null {
  return document === null ? null : contractCache.get(a.tool_contract_sha256, document);
}

function view(a: ApprovalRow, contract: ToolContract | null) {
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
    preview:
      contract === null
        ? null
        : {
            tool_name: contract.tool_name,
            contract_release: contract.contract_release,
            executor_release: contract.executor_release,
            effect: contract.effect,
            reversible: contract.reversible,
            required_capabilities: contract.required_capabilities,
            target,
          },
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
