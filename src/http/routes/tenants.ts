/**
 * `POST /v1/tenants` (platform admin): a tenant, its default policy and its first admin, written
 * in one batch. The platform admin can do nothing else.
 */
import { eq } from 'drizzle-orm';
import { Hono } from 'hono';
import { z } from 'zod';
import { apiKeyDigest } from '../../core/identity/identity.js';
import { DEFAULT_POLICY, policyDigest } from '../../core/policy.js';
import { Label } from '../../core/schema.js';
import { database } from '../../db/client.js';
import { toCanonicalText } from '../../db/documents.js';
import { newApiKey, newId } from '../../db/ids.js';
import { policies, principals, tenants } from '../../db/schema.js';
import { requirePlatformAdmin } from '../auth.js';
import { readJson } from '../body.js';
import type { AppEnv } from '../env.js';
import { ApiError } from '../errors.js';

export const TenantName = z
  .string()
  .min(2)
  .max(63)
  .regex(/^[a-z][a-z0-9-]*$/, 'must be a lowercase slug ([a-z][a-z0-9-]*)');

const CreateTenant = z.strictObject({
  name: TenantName,
  admin_name: Label.optional(),
});

export const tenantRoutes = new Hono<AppEnv>();

tenantRoutes.post('/tenants', requirePlatformAdmin, async (c) => {
  const body = await readJson(c, CreateTenant);
  const db = database(c.env);
  const now = c.var.now;
  const existing = await db
    .select({ id: tenants.tenant_id })
    .from(tenants)
    .where(eq(tenants.name, body.name))
    .get();
  if (existing !== undefined) throw new ApiError('conflict', `tenant "${body.name}" already exists`);

  const tenant_id = newId('tenant');
  const principal_id = newId('principal');
  const api_key = newApiKey();
  const policy_sha256 = policyDigest(DEFAULT_POLICY);
  const admin_name = body.admin_name ?? `${body.name} admin`;
  try {
    await db.batch([
      db.insert(policies).values({
        tenant_id,
        policy_sha256,
        document: toCanonicalText(DEFAULT_POLICY),
        created_at_unix_ms: now,
      }),
      db.insert(tenants).values({ tenant_id, name: body.name, policy_sha256, created_at_unix_ms: now }),
      db.insert(principals).values({
        principal_id,
        tenant_id,
        name: admin_name,
        roles: JSON.stringify(['tenant_admin']),
        executor_release: null,
        key_sha256: apiKeyDigest(api_key),
        created_by: null,
        created_at_unix_ms: now,
      }),
    ]);
  } catch (e) {
    // Two creations of one name racing: the unique index decides, the loser wrote nothing.
    if (
      e instanceof Error &&
      /UNIQUE constraint failed: tenants\.name/.test(`${e.message} ${String(e.cause)}`)
    ) {
      throw new ApiError('conflict', `tenant "${body.name}" already exists`);
    }
    throw e;
  }
  c.set('log', { ...c.var.log, tenant_id, policy_sha256 });
  return c.json(
    {
      tenant: { tenant_id, name: body.name, policy_sha256, created_at_unix_ms: now },
      admin: { principal_id, tenant_id, name: admin_name, roles: ['tenant_admin'], api_key },
    },
    201,
  );
});
