/**
 * `GET /v1/metrics?window_ms=` (tenant admin): the tenant's security decisions as counts over a
 * window ending now (src/services/metrics.ts).
 */
import { Hono } from 'hono';
import { fromZodError } from '../../core/errors.js';
import { ROLES_FOR } from '../../services/context.js';
import { fromCoreError } from '../../services/errors.js';
import { MetricsQuery, getMetrics } from '../../services/metrics.js';
import { requireRole } from '../auth.js';
import type { AppEnv } from '../env.js';

export const metricsRoutes = new Hono<AppEnv>();

metricsRoutes.get('/metrics', requireRole(ROLES_FOR.admin), async (c) => {
  const parsed = MetricsQuery.safeParse(c.req.query());
  if (!parsed.success) throw fromCoreError(fromZodError('invalid_request', 'query', parsed.error));
  return c.json(await getMetrics(c.var.tenant, parsed.data));
});
