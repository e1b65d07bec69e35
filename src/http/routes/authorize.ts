/**
 * `POST /v1/authorize` (agent): parse, call the authorization service, answer 200 with the
 * receipt, or 403 with the receipt and its sorted violations. Everything else is the service's
 * (src/services/authorize.ts) and the core's (src/core/authorization/decide.ts).
 *
 * Registered before `/v1`'s `authenticate` and `rateLimitWrites`: the service reads the key's
 * principal together with the authorization state (one read near the caller, then one commit at
 * the primary), and checks the role and takes the write token itself, before deciding.
 */
import { Hono } from 'hono';
import { AuthorizeRequest } from '../../core/authorization/decide.js';
import { platformStore } from '../../platform/bindings.js';
import { authorizeByKey } from '../../services/authorize.js';
import { ROLES_FOR, requireRole } from '../../services/context.js';
import { authenticateRequest, bearerKeyRoute, establishCaller } from '../auth.js';
import { readJson } from '../body.js';
import type { AppEnv } from '../env.js';
import { takeWriteToken } from '../rate-limit.js';

export const authorizeRoutes = new Hono<AppEnv>();

authorizeRoutes.post('/authorize', async (c) => {
  const key = bearerKeyRoute(c);
  let body: AuthorizeRequest;
  try {
    body = await readJson(c, AuthorizeRequest);
  } catch (e) {
    // Who asks is answered before what was asked: an unknown key, a missing role or an empty
    // write bucket outranks a bad body, as on every route. Only failing requests pay this read.
    await authenticateRequest(c);
    requireRole(c.var.principal, ROLES_FOR.authorize);
    await takeWriteToken(c, c.var.principal);
    throw e;
  }
  const { decision, authorized } = await authorizeByKey(
    {
      platform: platformStore(c.env),
      open: (caller) => establishCaller(c, caller, key.shard),
      takeWriteToken: (who) => takeWriteToken(c, who),
    },
    key,
    body,
  );
  const { receipt } = decision;
  return c.json(
    { decision: receipt.body.decision, violations: receipt.body.violations, receipt },
    authorized ? 200 : 403,
  );
});
