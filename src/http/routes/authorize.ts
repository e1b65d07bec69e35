/**
 * `POST /v1/authorize` (agent): parse, call the authorization service, answer 200 with the
 * receipt, or 403 with the receipt and its sorted violations. Everything else is the service's
 * (src/services/authorize.ts) and the core's (src/core/authorization/decide.ts).
 */
import { Hono } from 'hono';
import { AuthorizeRequest } from '../../core/authorization/decide.js';
import { authorize } from '../../services/authorize.js';
import { ROLES_FOR } from '../../services/context.js';
import { requireRole } from '../auth.js';
import { readJson } from '../body.js';
import type { AppEnv } from '../env.js';

export const authorizeRoutes = new Hono<AppEnv>();

authorizeRoutes.post('/authorize', requireRole(ROLES_FOR.authorize), async (c) => {
  const body = await readJson(c, AuthorizeRequest);
  const { decision, authorized } = await authorize(c.var.tenant, body);
  const { receipt } = decision;
  return c.json(
    { decision: receipt.body.decision, violations: receipt.body.violations, receipt },
    authorized ? 200 : 403,
  );
});
