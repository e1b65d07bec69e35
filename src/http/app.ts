/**
 * The HTTP application: request context, logging, authentication, and every route under `/v1`.
 *
 * Order matters: `/v1/healthz`, `POST /v1/tenants` (platform admin token) and the signed executor
 * webhooks (`/v1/webhooks/...`, Standard Webhooks signature) are registered before `authenticate`,
 * so they answer without a bearer key; every other `/v1` route requires a valid
 * API key, and checks its role per route; every write after authentication is rate limited per
 * principal (`rateLimitWrites`). There is one error handler (`onError`).
 */
import { Hono } from 'hono';
import { matchedRoutes } from 'hono/route';
import { newId } from '../db/ids.js';
import { authenticate } from './auth.js';
import { d1Session } from './d1-session.js';
import type { AppEnv } from './env.js';
import { errorResponse, onError } from './errors.js';
import { rateLimitWrites } from './rate-limit.js';
import { ServiceError } from '../services/errors.js';
import { approvalRoutes } from './routes/approvals.js';
import { authorizeRoutes } from './routes/authorize.js';
import { contractRoutes } from './routes/contracts.js';
import { executionRoutes } from './routes/executions.js';
import { grantRoutes } from './routes/grants.js';
import { observationRoutes } from './routes/observations.js';
import { operationRoutes } from './routes/operations.js';
import { policyRoutes } from './routes/policy.js';
import { principalRoutes } from './routes/principals.js';
import { receiptRoutes } from './routes/receipts.js';
import { reconciliationRoutes } from './routes/reconciliations.js';
import { runRoutes } from './routes/runs.js';
import { tenantRoutes } from './routes/tenants.js';
import { authzenRoutes } from './authzen/routes.js';
import { mcpRoutes } from './mcp/routes.js';
import { interceptorRoutes } from './mcp/interceptor-routes.js';
import { docsRoutes } from './docs-page.js';
import { metricsRoutes } from './routes/metrics.js';
import { usageRoutes } from './routes/usage.js';
import { consoleRoutes } from './console/routes.js';
import { webhookRoutes, webhookSecretRoutes } from './routes/webhooks.js';
import { logRoutes } from './routes/log.js';
import { publicLogRoutes } from './routes/public-log.js';
import { wellKnownRoutes } from './routes/well-known.js';

export function createApp(): Hono<AppEnv> {
  const app = new Hono<AppEnv>();

  app.use('*', async (c, next) => {
    c.set('requestId', newId('request'));
    // The only clock read of a request: every decision in it uses this instant.
    c.set('now', Date.now());
    c.set('log', {});
    await next();
    // A door that must echo the caller's request id (AuthZEN §10.1.3) sets `requestIdEcho`;
    // Writ's own id then travels as `writ-request-id`.
    const echo = c.var.requestIdEcho;
    if (echo === undefined) c.header('x-request-id', c.var.requestId);
    else {
      c.header('x-request-id', echo);
      c.header('writ-request-id', c.var.requestId);
    }
    // One line per request: ids, route pattern, status and digests, never bodies or arguments.
    console.log(
      JSON.stringify({
        level: c.res.status >= 500 ? 'error' : 'info',
        request_id: c.var.requestId,
        method: c.req.method,
        // The pattern of the handler that answered (`/v1/receipts/:sha256`), never the concrete path.
        route: matchedRoutes(c).findLast((r) => r.method !== 'ALL')?.path ?? null,
        status: c.res.status,
        ...c.var.log,
      }),
    );
  });

  // One D1 session per request; its bookmark answers in `Writ-D1-Bookmark` (src/http/d1-session.ts).
  app.use('*', d1Session);

  const v1 = new Hono<AppEnv>();
  v1.get('/healthz', (c) => c.json({ status: 'ok' }));
  v1.route('/', tenantRoutes);
  // Signed webhooks authenticate by their Standard Webhooks signature, not a bearer key.
  v1.route('/', webhookRoutes);
  // Authenticates in its handler: key and state are one read (src/http/routes/authorize.ts).
  v1.route('/', authorizeRoutes);
  v1.use('*', authenticate);
  // Every write of an authenticated principal takes a token first (src/http/rate-limit.ts).
  v1.use('*', rateLimitWrites);
  v1.route('/', principalRoutes);
  v1.route('/', policyRoutes);
  v1.route('/', contractRoutes);
  v1.route('/', grantRoutes);
  v1.route('/', approvalRoutes);
  v1.route('/', runRoutes);
  v1.route('/', receiptRoutes);
  v1.route('/', executionRoutes);
  v1.route('/', reconciliationRoutes);
  v1.route('/', operationRoutes);
  v1.route('/', observationRoutes);
  // Public, before `/v1`'s authentication: the API reference holds no tenant data.
  app.route('/', docsRoutes);
  v1.route('/', usageRoutes);
  v1.route('/', metricsRoutes);
  v1.route('/', webhookSecretRoutes);
  // Issue 11: checkpoints, tiles, proofs and bundles of the tenant's log (authenticated).
  v1.route('/', logRoutes);
  app.route('/v1', v1);
  // Issue 11: the issuer's public keys (public).
  app.route('/', wellKnownRoutes);
  // Issue 11: the logs their tenants published, as C2SP tlog-tiles at /log/<tenant_id>/ (public).
  app.route('/', publicLogRoutes);
  // The approval console: its own session cookie instead of a bearer key (src/http/console).
  app.route('/console', consoleRoutes);
  app.route('/', authzenRoutes);
  app.route('/', mcpRoutes);
  // Docker MCP Gateway interceptors: every answer but an allow is a non-empty CallToolResult.
  app.route('/', interceptorRoutes);

  app.notFound((c) => errorResponse(c, new ServiceError('not_found', 'no such route')));
  app.onError(onError);
  return app;
}

export const app = createApp();
