/**
 * Principals of the caller's tenant (tenant admin). A key is returned exactly once, at creation;
 * only its SHA-256 is stored. Revocation is final and applies to the next request.
 */
import { and, eq, isNull } from 'drizzle-orm';
import { Hono } from 'hono';
import { z } from 'zod';
import { apiKeyDigest, Role, ROLES } from '../../core/identity/identity.js';
import { Identifier, Label } from '../../core/schema.js';
import { database } from '../../db/client.js';
import { parseStored } from '../../db/documents.js';
import { newApiKey, newId } from '../../db/ids.js';
import { findPrincipal } from '../../db/queries.js';
import { principals } from '../../db/schema.js';
import { assertNamedIdentity, requireRole } from '../auth.js';
import { readJson } from '../body.js';
import type { AppEnv } from '../env.js';
import { ApiError, notFound } from '../errors.js';

const CreatePrincipal = z
  .strictObject({
    name: Label,
    roles: z.array(Role).min(1).max(ROLES.length),
    /** Required for, and only for, executors: the executor release the principal runs. */
    executor_release: Label.nullable().optional(),
    tenant_id: Identifier.optional(),
  })
  .superRefine((b, ctx) => {
    if (new Set(b.roles).size !== b.roles.length) {
      ctx.addIssue({ code: 'custom', path: ['roles'], message: 'must not contain duplicates' });
    }
    const executor = b.roles.includes('executor');
    const release = b.executor_release ?? null;
    if (executor && release === null) {
      ctx.addIssue({ code: 'custom', path: ['executor_release'], message: 'is required for an executor' });
    }
    if (!executor && release !== null) {
      ctx.addIssue({ code: 'custom', path: ['executor_release'], message: 'is only for executors' });
    }
  });

const Revoke = z.strictObject({});

export const principalRoutes = new Hono<AppEnv>();

principalRoutes.post('/principals', requireRole('tenant_admin'), async (c) => {
  const body = await readJson(c, CreatePrincipal);
  const admin = c.var.principal;
  assertNamedIdentity(admin, { tenant_id: body.tenant_id });
  const principal_id = newId('principal');
  const api_key = newApiKey();
  const roles = ROLES.filter((r) => body.roles.includes(r));
  const executor_release = body.executor_release ?? null;
  await database(c.env)
    .insert(principals)
    .values({
      principal_id,
      tenant_id: admin.tenant_id,
      name: body.name,
      roles: JSON.stringify(roles),
      executor_release,
      key_sha256: apiKeyDigest(api_key),
      created_by: admin.principal_id,
      created_at_unix_ms: c.var.now,
    });
  c.set('log', { ...c.var.log, created_principal_id: principal_id });
  return c.json(
    {
      principal_id,
      tenant_id: admin.tenant_id,
      name: body.name,
      roles,
      executor_release,
      created_at_unix_ms: c.var.now,
      revoked_at_unix_ms: null,
      api_key,
    },
    201,
  );
});

principalRoutes.get('/principals/:principal_id', requireRole('tenant_admin'), async (c) => {
  const row = await findPrincipal(database(c.env), c.var.principal.tenant_id, c.req.param('principal_id'));
  if (row === undefined) throw notFound('principal');
  return c.json(view(row));
});

principalRoutes.post('/principals/:principal_id/revoke', requireRole('tenant_admin'), async (c) => {
  await readJson(c, Revoke, { allowEmpty: true });
  const db = database(c.env);
  const tenant_id = c.var.principal.tenant_id;
  const principal_id = c.req.param('principal_id');
  const row = await findPrincipal(db, tenant_id, principal_id);
  if (row === undefined) throw notFound('principal');
  if (row.revoked_at_unix_ms === null) {
    await db
      .update(principals)
      .set({ revoked_at_unix_ms: c.var.now })
      .where(
        and(
          eq(principals.tenant_id, tenant_id),
          eq(principals.principal_id, principal_id),
          isNull(principals.revoked_at_unix_ms),
        ),
      );
  }
  const after = await findPrincipal(db, tenant_id, principal_id);
  if (after === undefined) throw new ApiError('internal', 'principal disappeared');
  c.set('log', { ...c.var.log, revoked_principal_id: principal_id });
  return c.json(view(after));
});

function view(row: typeof principals.$inferSelect) {
  return {
    principal_id: row.principal_id,
    tenant_id: row.tenant_id,
    name: row.name,
    roles: parseStored('principal roles', z.array(Role), row.roles),
    executor_release: row.executor_release,
    created_at_unix_ms: row.created_at_unix_ms,
    revoked_at_unix_ms: row.revoked_at_unix_ms,
  };
}
