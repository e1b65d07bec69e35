/**
 * Pinned tool contracts. A contract is identified by the SHA-256 of its canonical bytes: pinning
 * identical content again returns the same digest, and a changed field is a different contract.
 * A contract is never updated in place, and a quarantine is never lifted (both are triggers).
 */
import { and, eq, isNull } from 'drizzle-orm';
import { Hono } from 'hono';
import { z } from 'zod';
import { contractDigest, validateContract } from '../../core/contracts/contract.js';
import { compareDiscovery } from '../../core/contracts/discovery.js';
import { fromZodError } from '../../core/errors.js';
import { ToolContract } from '../../core/model.js';
import { Label, Sha256 } from '../../core/schema.js';
import { database, type Db } from '../../db/client.js';
import { toCanonicalText } from '../../db/documents.js';
import { findContract, type PinnedContract, toPinnedContract } from '../../db/queries.js';
import { contracts } from '../../db/schema.js';
import { requireRole } from '../auth.js';
import { readJson, readJsonValue } from '../body.js';
import type { AppEnv } from '../env.js';
import { ApiError, fromCoreError, notFound } from '../errors.js';

const Quarantine = z.strictObject({ reason: Label.optional() });

export const contractRoutes = new Hono<AppEnv>();

contractRoutes.post('/contracts', requireRole('tenant_admin'), async (c) => {
  const shaped = ToolContract.safeParse(await readJsonValue(c));
  if (!shaped.success) throw fromCoreError(fromZodError('invalid_contract', 'contract', shaped.error));
  const checked = validateContract(shaped.data);
  if (!checked.ok) throw fromCoreError(checked.error);
  const contract = checked.value;
  const sha = contractDigest(contract);
  const db = database(c.env);
  const tenant_id = c.var.principal.tenant_id;
  const inserted = await db
    .insert(contracts)
    .values({
      tenant_id,
      tool_contract_sha256: sha,
      document: toCanonicalText(contract),
      tool_name: contract.tool_name,
      effect: contract.effect,
      pinned_by: c.var.principal.principal_id,
      pinned_at_unix_ms: c.var.now,
    })
    .onConflictDoNothing()
    .run();
  const pinned = await findContract(db, tenant_id, sha);
  if (pinned === null) throw new ApiError('internal', 'pinned contract not found');
  c.set('log', { ...c.var.log, tool_contract_sha256: sha });
  return c.json(view(pinned), inserted.meta.changes > 0 ? 201 : 200);
});

contractRoutes.get('/contracts/:sha256', async (c) => {
  const pinned = await lookup(c.env, c.var.principal.tenant_id, c.req.param('sha256'));
  return c.json(view(pinned));
});

contractRoutes.post('/contracts/:sha256/quarantine', requireRole('tenant_admin'), async (c) => {
  const body = await readJson(c, Quarantine, { allowEmpty: true });
  const tenant_id = c.var.principal.tenant_id;
  const pinned = await lookup(c.env, tenant_id, c.req.param('sha256'));
  const db = database(c.env);
  if (pinned.quarantined_at_unix_ms === null) {
    await quarantineStatement(db, tenant_id, pinned.tool_contract_sha256, c.var.now, body.reason ?? null);
  }
  const after = await findContract(db, tenant_id, pinned.tool_contract_sha256);
  if (after === null) throw new ApiError('internal', 'quarantined contract not found');
  c.set('log', { ...c.var.log, tool_contract_sha256: after.tool_contract_sha256, quarantined: true });
  return c.json(view(after));
});

const DiscoveryBody = z.strictObject({
  /** A `DiscoverySnapshot` (src/core/contracts/discovery.ts); validated by the core. */
  snapshot: z.unknown(),
  /** Quarantine the pinned contracts of drifted tools (default). `false` only reports. */
  quarantine: z.boolean().optional(),
});

/**
 * Compare what a tool server advertises now with this tenant's pinned contracts. Drift is never
 * merged: a drifted tool's unquarantined contracts are quarantined (one D1 batch) unless the body
 * says `quarantine: false`, so no later authorization can use a definition the executor no longer
 * runs. Re-review and pin the new definition to use the tool again.
 */
contractRoutes.post('/contracts/discovery', requireRole('tenant_admin'), async (c) => {
  const body = await readJson(c, DiscoveryBody);
  const tenant_id = c.var.principal.tenant_id;
  const db = database(c.env);
  const rows = await db.select().from(contracts).where(eq(contracts.tenant_id, tenant_id)).all();
  const pinned = rows.map(toPinnedContract).map((p) => ({
    tool_contract_sha256: p.tool_contract_sha256,
    contract: p.contract,
    quarantined: p.quarantined_at_unix_ms !== null,
    pinned_at_unix_ms: p.pinned_at_unix_ms,
  }));
  const compared = compareDiscovery(body.snapshot, pinned);
  if (!compared.ok) throw fromCoreError(compared.error);
  const report = compared.value;
  const apply = body.quarantine ?? true;
  const reason = `discovery drift (snapshot ${report.snapshot_sha256})`;
  const [first, ...rest] = apply
    ? report.quarantine.map((sha) => quarantineStatement(db, tenant_id, sha, c.var.now, reason))
    : [];
  if (first !== undefined) await db.batch([first, ...rest]);
  c.set('log', {
    ...c.var.log,
    snapshot_sha256: report.snapshot_sha256,
    drifted: report.tools.filter((t) => t.status === 'drifted').length,
    quarantined: first === undefined ? 0 : report.quarantine.length,
  });
  return c.json({ ...report, quarantined: apply ? report.quarantine : [] });
});

/** Quarantine one pinned contract if it is not already (a quarantine is final: never re-dated). */
function quarantineStatement(db: Db, tenant_id: string, sha: string, now: number, reason: string | null) {
  return db
    .update(contracts)
    .set({ quarantined_at_unix_ms: now, quarantine_reason: reason })
    .where(
      and(
        eq(contracts.tenant_id, tenant_id),
        eq(contracts.tool_contract_sha256, sha),
        isNull(contracts.quarantined_at_unix_ms),
      ),
    );
}

async function lookup(env: Env, tenant_id: string, sha: string): Promise<PinnedContract> {
  // A malformed digest cannot name a pinned contract: the same 404 as an unknown one.
  if (!Sha256.safeParse(sha).success) throw notFound('contract');
  const pinned = await findContract(database(env), tenant_id, sha);
  if (pinned === null) throw notFound('contract');
  return pinned;
}

function view(p: PinnedContract) {
  return {
    tool_contract_sha256: p.tool_contract_sha256,
    contract: p.contract,
    pinned_by: p.pinned_by,
    pinned_at_unix_ms: p.pinned_at_unix_ms,
    quarantined: p.quarantined_at_unix_ms !== null,
    quarantined_at_unix_ms: p.quarantined_at_unix_ms,
    quarantine_reason: p.quarantine_reason,
  };
}
