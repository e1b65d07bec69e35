/**
 * Run envelopes (agent): budgets within the policy's limits (src/services/runs.ts).
 */
import { Hono } from 'hono';
import { ROLES_FOR } from '../../services/context.js';
import { CreateRunRequest, createRun, getRun } from '../../services/runs.js';
import { requireRole } from '../auth.js';
import { readJson } from '../body.js';
import type { AppEnv } from '../env.js';

export const runRoutes = new Hono<AppEnv>();

runRoutes.post('/runs', requireRole(ROLES_FOR.createRun), async (c) => {
  const body = await readJson(c, CreateRunRequest);
  return c.json(await createRun(c.var.tenant, body), 201);
});

runRoutes.get('/runs/:run_id', requireRole(ROLES_FOR.readRun), async (c) =>
  c.json(await getRun(c.var.tenant, c.req.param('run_id'))),
);
