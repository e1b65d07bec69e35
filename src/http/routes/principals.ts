/**
 * Principals of the caller's tenant (tenant admin, src/services/admin.ts). A key is returned
 * exactly once, at creation; revocation is final and applies to the next request.
 */
import { Hono } from 'hono';
import {
  CreatePrincipalRequest,
  EmptyRequest,
  createPrincipal,
  getPrincipal,
  revokePrincipal,
} from '../../services/admin.js';
import { ROLES_FOR } from '../../services/context.js';
import { requireRole } from '../auth.js';
import { readJson } from '../body.js';
import type { AppEnv } from '../env.js';

export const principalRoutes = new Hono<AppEnv>();

principalRoutes.post('/principals', requireRole(ROLES_FOR.admin), async (c) => {
  const body = await readJson(c, CreatePrincipalRequest);
  return c.json(await createPrincipal(c.var.tenant, body), 201);
});

principalRoutes.get('/principals/:principal_id', requireRole(ROLES_FOR.admin), async (c) =>
  c.json(await getPrincipal(c.var.tenant, c.req.param('principal_id'))),
);

principalRoutes.post('/principals/:principal_id/revoke', requireRole(ROLES_FOR.admin), async (c) => {
  await readJson(c, EmptyRequest, { allowEmpty: true });
  return c.json(await revokePrincipal(c.var.tenant, c.req.param('principal_id')));
});
