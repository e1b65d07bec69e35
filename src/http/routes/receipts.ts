/**
 * `GET /v1/receipts/{sha256}`: any receipt of the caller's tenant, with the evidence it was
 * computed from. Authorization receipts are replayed on read: the core recomputes the receipt
 * from the stored contract, grant, invocation and trusted state, and the answer says whether the
 * stored bytes still match (`replay.ok`) and, if not, which fields differ.
 */
import { Hono } from 'hono';
import { z } from 'zod';
import { ToolGrant, ToolInvocation, TrustedState } from '../../core/model.js';
import { verifyAuthorizationReceipt, type ReplayReport } from '../../core/receipts/replay.js';
import { Sha256, UnixMs } from '../../core/schema.js';
import { database, type Db } from '../../db/client.js';
import { findContract } from '../../db/queries.js';
import { getReceipt, type StoredReceipt } from '../../db/receipts.js';
import type { AppEnv } from '../env.js';
import { notFound } from '../errors.js';

const AuthorizationEvidence = z.strictObject({
  tool_contract_sha256: Sha256,
  grant: ToolGrant,
  invocation: ToolInvocation,
  trusted_state: TrustedState,
  evaluated_at_unix_ms: UnixMs,
});

export const receiptRoutes = new Hono<AppEnv>();

receiptRoutes.get('/receipts/:sha256', async (c) => {
  const sha = c.req.param('sha256');
  if (!Sha256.safeParse(sha).success) throw notFound('receipt');
  const tenant_id = c.var.principal.tenant_id;
  const db = database(c.env);
  const stored = await getReceipt(db, tenant_id, sha);
  if (stored === null) throw notFound('receipt');
  return c.json({
    kind: stored.kind,
    outcome: stored.outcome,
    receipt: stored.receipt,
    evidence: stored.evidence,
    created_at_unix_ms: stored.created_at_unix_ms,
    replay: stored.kind === 'authorization' ? await replayAuthorization(db, tenant_id, stored) : null,
  });
});

async function replayAuthorization(db: Db, tenant_id: string, stored: StoredReceipt): Promise<ReplayReport> {
  const evidence = AuthorizationEvidence.safeParse(stored.evidence);
  if (!evidence.success) return { ok: false, differences: ['evidence'] };
  const e = evidence.data;
  const pinned = await findContract(db, tenant_id, e.tool_contract_sha256);
  if (pinned === null) return { ok: false, differences: ['evidence.tool_contract_sha256'] };
  return verifyAuthorizationReceipt(stored.receipt, {
    contract: pinned.contract,
    grant: e.grant,
    invocation: e.invocation,
    now: e.evaluated_at_unix_ms,
    trusted: e.trusted_state,
  });
}
