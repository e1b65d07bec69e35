/**
 * Read a receipt of the caller's tenant with the evidence it was computed from. Authorization
 * receipts are replayed on read: the core recomputes the receipt from the stored contract, grant,
 * invocation and trusted state, and the answer says whether the stored bytes still match
 * (`replay.ok`) and, if not, which fields differ. The evidence names the contract and the grant
 * by digest and both are loaded from storage; evidence stored before migration 0002 embeds the
 * grant and replays from that copy.
 */
import { z } from 'zod';
import { digestOf } from '../core/canonical/canonical.js';
import { ToolGrant, ToolInvocation, TrustedState } from '../core/model.js';
import { type ReplayReport, verifyAuthorizationReceipt } from '../core/receipts/replay.js';
import { Sha256, UnixMs } from '../core/schema.js';
import type { TenantContext } from './context.js';
import { notFound } from './errors.js';
import type { StoredReceipt, TenantStore } from './ports.js';

/** Evidence as stored before 0002: the whole grant copied into every receipt. Still replayed. */
const EmbeddedGrantEvidence = z.strictObject({
  tool_contract_sha256: Sha256,
  grant: ToolGrant,
  invocation: ToolInvocation,
  trusted_state: TrustedState,
  evaluated_at_unix_ms: UnixMs,
});

/**
 * Evidence as stored now: the grant by digest (loaded from `grants`, immutable); embedded only
 * for the synthetic empty grant, which has no row.
 */
const GrantDigestEvidence = z.strictObject({
  tool_contract_sha256: Sha256,
  grant_sha256: Sha256,
  grant: ToolGrant.optional(),
  invocation: ToolInvocation,
  trusted_state: TrustedState,
  evaluated_at_unix_ms: UnixMs,
});

const AuthorizationEvidence = z.union([EmbeddedGrantEvidence, GrantDigestEvidence]);

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
  const [pinned, grant] = await Promise.all([
    store.getContract(e.tool_contract_sha256),
    evidenceGrant(store, e),
  ]);
  if (pinned === null) return { ok: false, differences: ['evidence.tool_contract_sha256'] };
  if (grant === null) return { ok: false, differences: ['evidence.grant_sha256'] };
  return verifyAuthorizationReceipt(stored.receipt, {
    contract: pinned.contract,
    grant,
    invocation: e.invocation,
    now: e.evaluated_at_unix_ms,
    trusted: e.trusted_state,
  });
}

/** The grant the evidence names: embedded (old evidence, the empty grant) or stored under its digest. */
async function evidenceGrant(
  store: TenantStore,
  e: z.infer<typeof AuthorizationEvidence>,
): Promise<ToolGrant | null> {
  if (!('grant_sha256' in e)) return e.grant;
  // An embedded grant must be the one the digest names, or the evidence was edited.
  if (e.grant !== undefined) return digestOf(e.grant) === e.grant_sha256 ? e.grant : null;
  return store.grantByDigest(e.grant_sha256);
}
