/**
 * `GET /v1/usage` (tenant admin): usage against the tenant's quotas (src/services/usage.ts).
 */
import { Hono } from 'hono';
import { ROLES_FOR } from '../../services/context.js';
import { getUsage } from '../../services/usage.js';
import { requireRole } from '../auth.js';
import type { AppEnv } from '../env.js';

export const usageRoutes = new Hono<AppEnv>();

usageRoutes.get('/usage', requireRole(ROLES_FOR.admin), async (c) => c.json(await getUsage(c.var.tenant)));
