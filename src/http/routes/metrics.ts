/**
 * `GET /v1/metrics?window_ms=` (tenant admin): the tenant's security decisions as counts over a
 * window ending now (src/services/metrics.ts). Each read pays `METRICS_READ_TOKENS` write tokens.
 */
import { Hono } from 'hono';
import { fromZodError } from '../../core/errors.js';
import { ROLES_FOR } from '../../services/context.js';
import { fromCoreError } from '../../services/errors.js';
import { MetricsQuery, getMetrics } from '../../services/metrics.js';
import { requireRole } from '../auth.js';
import type { AppEnv } from '../env.js';
import { metricsRefusals, takeMetricsReadTokens } from '../rate-limit.js';

export const metricsRoutes = new Hono<AppEnv>();

metricsRoutes.get('/metrics', requireRole(ROLES_FOR.admin), async (c) => {
  const parsed = MetricsQuery.safeParse(c.req.query());
  if (!parsed.success) throw fromCoreError(fromZodError('invalid_request', 'query', parsed.error));
  // An expensive read: it pays write tokens (src/http/rate-limit.ts), a 429 before anything is read.
  await takeMetricsReadTokens(c);
  return c.json(await getMetrics(c.var.tenant, parsed.data, metricsRefusals(c)));
});
