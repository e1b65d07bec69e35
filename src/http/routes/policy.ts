/**
 * The tenant policy. `PUT` stores a new document (by digest; history is kept so every receipt's
 * policy can be read back) and makes it the one in force, atomically.
 */
import { eq } from 'drizzle-orm';
import { Hono } from 'hono';
import { parsePolicy, policyDigest } from '../../core/policy.js';
import { database } from '../../db/client.js';
import { toCanonicalText } from '../../db/documents.js';
import { currentPolicy } from '../../db/queries.js';
import { policies, tenants } from '../../db/schema.js';
import { requireRole } from '../auth.js';
import { readJsonValue } from '../body.js';
import type { AppEnv } from '../env.js';
import { fromCoreError } from '../errors.js';

export const policyRoutes = new Hono<AppEnv>();

policyRoutes.get('/policy', async (c) => {
  const inForce = await currentPolicy(database(c.env), c.var.principal.tenant_id);
  return c.json(inForce);
});

policyRoutes.put('/policy', requireRole('tenant_admin'), async (c) => {
  const parsed = parsePolicy(await readJsonValue(c));
  if (!parsed.ok) throw fromCoreError(parsed.error);
  const policy = parsed.value;
  const policy_sha256 = policyDigest(policy);
  const tenant_id = c.var.principal.tenant_id;
  const db = database(c.env);
  const previous = await currentPolicy(db, tenant_id);
  await db.batch([
    db
      .insert(policies)
      .values({ tenant_id, policy_sha256, document: toCanonicalText(policy), created_at_unix_ms: c.var.now })
      .onConflictDoNothing(),
    db.update(tenants).set({ policy_sha256 }).where(eq(tenants.tenant_id, tenant_id)),
  ]);
  c.set('log', { ...c.var.log, policy_sha256 });
  return c.json({ policy_sha256, policy, previous_policy_sha256: previous.policy_sha256 });
});
