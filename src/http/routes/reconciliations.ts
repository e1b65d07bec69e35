/**
 * `POST /v1/reconciliations` (executor of the contract's release, or tenant admin): resolve an
 * operation whose outcome is unknown (src/services/executions.ts). 201 when this request recorded
 * the resolution, 200 when it replays one.
 */
import { Hono } from 'hono';
import { ROLES_FOR } from '../../services/context.js';
import { ReconcileBody, reconcileExecution } from '../../services/executions.js';
import { requireRole } from '../auth.js';
import { readJson } from '../body.js';
import type { AppEnv } from '../env.js';

export const reconciliationRoutes = new Hono<AppEnv>();

reconciliationRoutes.post('/reconciliations', requireRole(ROLES_FOR.reconcile), async (c) => {
  const body = await readJson(c, ReconcileBody);
  const { recorded, ...answer } = await reconcileExecution(c.var.tenant, body);
  return c.json(answer, recorded ? 201 : 200);
});
