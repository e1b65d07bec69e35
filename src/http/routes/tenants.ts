/**
 * `POST /v1/tenants` (platform admin): a tenant, its default policy and its first admin;
 * `PUT /v1/tenants/{tenant_id}/quotas` (platform admin): the tenant's storage quotas
 * (src/services/admin.ts). The platform admin can do nothing else.
 */
import { Hono } from 'hono';
import { platformStore } from '../../platform/bindings.js';
import { CreateTenantRequest, SetQuotasRequest, createTenant, setQuotas } from '../../services/admin.js';
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

tenantRoutes.put('/tenants/:tenant_id/quotas', requirePlatformAdmin, async (c) => {
  const body = await readJson(c, SetQuotasRequest);
  const set = await setQuotas(platformStore(c.env), c.req.param('tenant_id'), body, c.var.now, (fields) =>
    c.set('log', { ...c.var.log, ...fields }),
  );
  return c.json(set);
});
