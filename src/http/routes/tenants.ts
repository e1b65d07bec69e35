/**
 * `POST /v1/tenants` (platform admin): a tenant, its default policy and its first admin
 * (src/services/admin.ts). The platform admin can do nothing else.
 */
import { Hono } from 'hono';
import { platformStore } from '../../platform/bindings.js';
import { CreateTenantRequest, createTenant } from '../../services/admin.js';
import { requirePlatformAdmin } from '../auth.js';
import { readJson } from '../body.js';
import type { AppEnv } from '../env.js';

export const tenantRoutes = new Hono<AppEnv>();

tenantRoutes.post('/tenants', requirePlatformAdmin, async (c) => {
  const body = await readJson(c, CreateTenantRequest);
  const created = await createTenant(platformStore(c.env), body, c.var.now, (fields) =>
    c.set('log', { ...c.var.log, ...fields }),
  );
  return c.json(created, 201);
});
