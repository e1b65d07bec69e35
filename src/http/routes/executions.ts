/**
 * `POST /v1/executions/claim` and `POST /v1/executions/report` (executor): parse, call the
 * execution service (src/services/executions.ts), answer. A rejected report is a receipted
 * outcome, answered like a denial: 403 with the receipt.
 */
import { Hono } from 'hono';
import { ROLES_FOR } from '../../services/context.js';
import { ClaimBody, ReportBody, claimExecution, reportExecution } from '../../services/executions.js';
import { requireRole } from '../auth.js';
import { readJson } from '../body.js';
import type { AppEnv } from '../env.js';

export const executionRoutes = new Hono<AppEnv>();

executionRoutes.post('/executions/claim', requireRole(ROLES_FOR.claim), async (c) => {
  const body = await readJson(c, ClaimBody);
  return c.json(await claimExecution(c.var.tenant, body));
});

executionRoutes.post('/executions/report', requireRole(ROLES_FOR.report), async (c) => {
  const body = await readJson(c, ReportBody);
  const { rejected, ...answer } = await reportExecution(c.var.tenant, body);
  return c.json(answer, rejected ? 403 : 200);
});
