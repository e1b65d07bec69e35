/**
 * Read a receipt of the caller's tenant with the evidence it was computed from. Authorization
 * receipts are replayed on read: the core recomputes the receipt from the stored contract, grant,
 * invocation and trusted state, and the answer says whether the stored bytes still match
 * (`replay.ok`) and, if not, which fields differ. Evidence keeps only what the receipt body does
 * not bind: the contract and the grant are loaded by the body's digests and the invocation is
 * rebuilt from the body; evidence stored before migration 0002, which copies grant and
 * invocation whole, replays from those copies.
 */
import { z } from 'zod';
import { digestOf } from '../core/canonical/canonical.js';
import {
  AuthorizationReceipt,
  ToolApproval,
  ToolGrant,
  ToolInvocation,
  TrustedState,
} from '../core/model.js';
import { invocationFromReceiptBody } from '../db/receipts.js';
import {
  type AuthorizationInputs,
  type ReplayReport,
  verifyAuthorizationReceipt,
} from '../core/receipts/replay.js';
import { Identifier, Sha256, UnixMs } from '../core/schema.js';
import type { TenantContext } from './context.js';
import { notFound } from './errors.js';
import type { StoredReceipt, TenantStore } from './ports.js';

/** Version 2 receipts: the options they were issued with (absent for version 1). */
const ReceiptOptions = z.strictObject({
  dispatch_window_ms: z.number().int(),
  executor_principal_id: Identifier.nullable(),
  named: z.strictObject({ tenant_id: Identifier.nullable(), principal_id: Identifier.nullable() }),
});

/** Evidence as stored before migration 0002: the grant and the invocation copied whole. Still replayed. */
const EmbeddedEvidence = z.strictObject({
  tool_contract_sha256: Sha256,
  grant: ToolGrant,
  invocation: ToolInvocation,
  trusted_state: TrustedState,
  options: ReceiptOptions.optional(),
  evaluated_at_unix_ms: UnixMs,
});

/**
 * Evidence version 2 (src/db/tenant-store.ts `authorizationEvidence`): only what the receipt body
 * does not bind. Contract and grant come from storage by the body's digests (the empty grant,
 * which has no row, is embedded); the invocation is rebuilt from the body unless stored whole.
 */
export const CompactEvidence = z.strictObject({
  evidence_version: z.literal(2),
  grant: ToolGrant.optional(),
  approval: ToolApproval.optional(),
  invocation: ToolInvocation.optional(),
  trusted_state: TrustedState,
});

export async function getReceipt(ctx: TenantContext, sha: string) {
  if (!Sha256.safeParse(sha).success) throw notFound('receipt');
  const stored = await ctx.store.getReceipt(sha);
  if (stored === null) throw notFound('receipt');
  return {
    kind: stored.kind,
    outcome: stored.outcome,
    receipt: stored.receipt,
    evidence: stored.evidence,
    created_at_unix_ms: stored.created_at_unix_ms,
    replay: stored.kind === 'authorization' ? await replayAuthorization(ctx.store, stored) : null,
  };
}

async function replayAuthorization(store: TenantStore, stored: StoredReceipt): Promise<ReplayReport> {
  const inputs = await authorizationInputs(store, stored);
  if (!inputs.ok) return { ok: false, differences: inputs.differences };
  return verifyAuthorizationReceipt(stored.receipt, inputs.inputs);
}

/**
 * What replay needs to recompute a stored authorization receipt (also what its offline bundle
 * carries, src/services/log.ts), or the fields whose inputs are gone.
 */
export async function authorizationInputs(
  store: TenantStore,
  stored: StoredReceipt,
): Promise<
  | { readonly ok: true; readonly inputs: AuthorizationInputs & { readonly trusted: TrustedState } }
  | { readonly ok: false; readonly differences: readonly string[] }
> {
  const old = EmbeddedEvidence.safeParse(stored.evidence);
  if (old.success) {
    const e = old.data;
    const pinned = await store.getContract(e.tool_contract_sha256);
    if (pinned === null) return { ok: false, differences: ['evidence.tool_contract_sha256'] };
    const body = AuthorizationReceipt.shape.body.safeParse(stored.receipt.body);
    const derived = e.options === undefined && body.success ? await v2Options(store, body.data) : null;
    const options = e.options ?? derived;
    return {
      ok: true,
      inputs: {
        contract: pinned.contract,
        grant: e.grant,
        invocation: e.invocation,
        now: e.evaluated_at_unix_ms,
        trusted: e.trusted_state,
        ...(options === null ? {} : { options }),
      },
    };
  }
  const compact = CompactEvidence.safeParse(stored.evidence);
  const body = AuthorizationReceipt.shape.body.safeParse(stored.receipt.body);
  if (!compact.success || !body.success) return { ok: false, differences: ['evidence'] };
  const e = compact.data;
  const b = body.data;
  const [pinned, grant, policy] = await Promise.all([
    store.getContract(b.tool_contract_sha256),
    // An embedded grant must be the one the body names, or the evidence was edited.
    e.grant !== undefined
      ? Promise.resolve(digestOf(e.grant) === b.grant_sha256 ? e.grant : null)
      : store.grantByDigest(b.grant_sha256),
    // Version 2: the dispatch window is the policy's, read from the policy the body binds.
    b.receipt_version === 2 ? store.policyByDigest(b.policy_sha256) : Promise.resolve(null),
  ]);
  if (pinned === null) return { ok: false, differences: ['body.tool_contract_sha256'] };
  if (grant === null) return { ok: false, differences: ['body.grant_sha256'] };
  return {
    ok: true,
    inputs: {
      contract: pinned.contract,
      grant,
      invocation: e.invocation ?? invocationFromReceiptBody(b, e.approval ?? null),
      now: b.evaluated_at_unix_ms,
      trusted: e.trusted_state,
      ...(b.receipt_version === 2 ? { options: optionsOf(b, policy) } : {}),
    },
  };
}

type ReceiptBody = z.infer<typeof AuthorizationReceipt>['body'];

/**
 * The options a version 2 receipt was issued with: the dispatch window of the policy the body
 * binds (read by digest), and the executor principal and named identities the body records.
 */
function optionsOf(
  b: ReceiptBody & { receipt_version: 2 },
  policy: { authorization_max_dispatch_ms: number } | null,
) {
  return {
    // A missing policy cannot reproduce the deadline: 0 is refused, so replay fails closed.
    dispatch_window_ms: policy?.authorization_max_dispatch_ms ?? 0,
    executor_principal_id: b.executor_principal_id,
    named: { tenant_id: b.named_tenant_id, principal_id: b.named_principal_id },
  };
}

async function v2Options(store: TenantStore, b: ReceiptBody) {
  if (b.receipt_version !== 2) return null;
  return optionsOf(b, await store.policyByDigest(b.policy_sha256));
}
