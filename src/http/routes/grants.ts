/**
 * Grants (tenant admin). A grant is issued to one principal of the caller's tenant under the
 * policy in force, and is immutable; revocation is a separate, final fact read on every
 * authorization, so it takes effect on the next call wherever that call is served.
 */
import { and, eq, isNull } from 'drizzle-orm';
import { Hono } from 'hono';
import { z } from 'zod';
import { validateGrant } from '../../core/authorization/authorize.js';
import { digestOf } from '../../core/canonical/canonical.js';
import { fromZodError } from '../../core/errors.js';
import { CapabilityGrant, ToolEffect, ToolGrant } from '../../core/model.js';
import { Identifier, Sha256, UnixMs } from '../../core/schema.js';
import { database } from '../../db/client.js';
import { parseStored, toCanonicalText } from '../../db/documents.js';
import { newId } from '../../db/ids.js';
import { currentPolicy, findPrincipal } from '../../db/queries.js';
import { grants } from '../../db/schema.js';
import { assertNamedIdentity, requireRole } from '../auth.js';
import { readJson } from '../body.js';
import type { AppEnv } from '../env.js';
import { ApiError, fromCoreError, notFound } from '../errors.js';

const CreateGrant = z.strictObject({
  principal_id: Identifier,
  allowed_tools: z.array(Identifier).max(256),
  allowed_effects: z.array(ToolEffect).max(4),
  capabilities: z.array(CapabilityGrant).max(64),
  /** Defaults to now. */
  not_before_unix_ms: UnixMs.optional(),
  expires_at_unix_ms: UnixMs,
  /** Checked against the caller's tenant and the policy in force; never selects them. */
  tenant_id: Identifier.optional(),
  policy_sha256: Sha256.optional(),
});

const Revoke = z.strictObject({});

export const grantRoutes = new Hono<AppEnv>();

grantRoutes.post('/grants', requireRole('tenant_admin'), async (c) => {
  const body = await readJson(c, CreateGrant);
  const admin = c.var.principal;
  assertNamedIdentity(admin, { tenant_id: body.tenant_id });
  const db = database(c.env);
  const [grantee, inForce] = await Promise.all([
    findPrincipal(db, admin.tenant_id, body.principal_id),
    currentPolicy(db, admin.tenant_id),
  ]);
  if (grantee === undefined) throw notFound('principal');
  if (grantee.revoked_at_unix_ms !== null) throw new ApiError('conflict', 'principal is revoked');
  // A grant bound to a policy other than the one in force would be denied on every call.
  if (body.policy_sha256 !== undefined && body.policy_sha256 !== inForce.policy_sha256) {
    throw new ApiError('conflict', 'policy_sha256 is not the policy in force');
  }
  const candidate = {
    grant_id: newId('grant'),
    principal_id: grantee.principal_id,
    tenant_id: admin.tenant_id,
    policy_sha256: inForce.policy_sha256,
    allowed_tools: body.allowed_tools,
    allowed_effects: body.allowed_effects,
    capabilities: body.capabilities,
    not_before_unix_ms: body.not_before_unix_ms ?? c.var.now,
    expires_at_unix_ms: body.expires_at_unix_ms,
  };
  const shaped = ToolGrant.safeParse(candidate);
  if (!shaped.success) throw fromCoreError(fromZodError('invalid_grant', 'grant', shaped.error));
  const checked = validateGrant(shaped.data);
  if (!checked.ok) throw fromCoreError(checked.error);
  const grant = checked.value;
  const grant_sha256 = digestOf(grant);
  await db.insert(grants).values({
    grant_id: grant.grant_id,
    tenant_id: grant.tenant_id,
    principal_id: grant.principal_id,
    grant_sha256,
    document: toCanonicalText(grant),
    created_by: admin.principal_id,
    created_at_unix_ms: c.var.now,
  });
  c.set('log', { ...c.var.log, grant_id: grant.grant_id, grant_sha256 });
  return c.json({ grant_id: grant.grant_id, grant_sha256, grant, revoked_at_unix_ms: null }, 201);
});

grantRoutes.get('/grants/:grant_id', requireRole('tenant_admin'), async (c) => {
  const row = await find(c.env, c.var.principal.tenant_id, c.req.param('grant_id'));
  return c.json(view(row));
});

grantRoutes.post('/grants/:grant_id/revoke', requireRole('tenant_admin'), async (c) => {
  await readJson(c, Revoke, { allowEmpty: true });
  const tenant_id = c.var.principal.tenant_id;
  const row = await find(c.env, tenant_id, c.req.param('grant_id'));
  if (row.revoked_at_unix_ms === null) {
    await database(c.env)
      .update(grants)
      .set({ revoked_at_unix_ms: c.var.now })
      .where(
        and(
          eq(grants.tenant_id, tenant_id),
          eq(grants.grant_id, row.grant_id),
          isNull(grants.revoked_at_unix_ms),
        ),
      );
  }
  const after = await find(c.env, tenant_id, row.grant_id);
  c.set('log', { ...c.var.log, grant_id: row.grant_id, revoked: true });
  return c.json(view(after));
});

async function find(env: Env, tenant_id: string, grant_id: string) {
  const row = await database(env)
    .select()
    .from(grants)
    .where(and(eq(grants.tenant_id, tenant_id), eq(grants.grant_id, grant_id)))
    .get();
  if (row === undefined) throw notFound('grant');
  return row;
}

function view(row: typeof grants.$inferSelect) {
  return {
    grant_id: row.grant_id,
    grant_sha256: row.grant_sha256,
    grant: parseStored('grant', ToolGrant, row.document),
    created_at_unix_ms: row.created_at_unix_ms,
    revoked_at_unix_ms: row.revoked_at_unix_ms,
  };
}
