/**
 * Read a receipt of the caller's tenant with the evidence it was computed from. Authorization
 * receipts are replayed on read: the core recomputes the receipt from the stored contract, grant,
 * invocation and trusted state, and the answer says whether the stored bytes still match
 * (`replay.ok`) and, if not, which fields differ.
 */
import { z } from 'zod';
import { ToolGrant, ToolInvocation, TrustedState } from '../core/model.js';
import { type ReplayReport, verifyAuthorizationReceipt } from '../core/receipts/replay.js';
import { Identifier, Sha256, UnixMs } from '../core/schema.js';
import type { TenantContext } from './context.js';
import { notFound } from './errors.js';
import type { StoredReceipt, TenantStore } from './ports.js';

const AuthorizationEvidence = z.strictObject({
  tool_contract_sha256: Sha256,
  grant: ToolGrant,
  invocation: ToolInvocation,
  trusted_state: TrustedState,
  /** Version 2 receipts: the options they were issued with (absent for version 1). */
  options: z
    .strictObject({
      dispatch_window_ms: z.number().int(),
      executor_principal_id: Identifier.nullable(),
      named: z.strictObject({ tenant_id: Identifier.nullable(), principal_id: Identifier.nullable() }),
    })
    .optional(),
  evaluated_at_unix_ms: UnixMs,
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
  const evidence = AuthorizationEvidence.safeParse(stored.evidence);
  if (!evidence.success) return { ok: false, differences: ['evidence'] };
  const e = evidence.data;
  const pinned = await store.getContract(e.tool_contract_sha256);
  if (pinned === null) return { ok: false, differences: ['evidence.tool_contract_sha256'] };
  return verifyAuthorizationReceipt(stored.receipt, {
    contract: pinned.contract,
    grant: e.grant,
    invocation: e.invocation,
    now: e.evaluated_at_unix_ms,
    trusted: e.trusted_state,
    ...(e.options === undefined ? {} : { options: e.options }),
  });
}
