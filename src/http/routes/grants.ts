/**
 * Grants (tenant admin, src/services/admin.ts): issued to one principal of the caller's tenant
 * under the policy in force, immutable; revocation is final and read on every authorization.
 */
import { Hono } from 'hono';
import {
  CreateGrantRequest,
  EmptyRequest,
  createGrant,
  getGrant,
  revokeGrant,
} from '../../services/admin.js';
import { ROLES_FOR } from '../../services/context.js';
import { requireRole } from '../auth.js';
import { readJson } from '../body.js';
import type { AppEnv } from '../env.js';

export const grantRoutes = new Hono<AppEnv>();

grantRoutes.post('/grants', requireRole(ROLES_FOR.admin), async (c) => {
  const body = await readJson(c, CreateGrantRequest);
  return c.json(await createGrant(c.var.tenant, body), 201);
});

grantRoutes.get('/grants/:grant_id', requireRole(ROLES_FOR.admin), async (c) =>
  c.json(await getGrant(c.var.tenant, c.req.param('grant_id'))),
);

grantRoutes.post('/grants/:grant_id/revoke', requireRole(ROLES_FOR.admin), async (c) => {
  await readJson(c, EmptyRequest, { allowEmpty: true });
  return c.json(await revokeGrant(c.var.tenant, c.req.param('grant_id')));
});
