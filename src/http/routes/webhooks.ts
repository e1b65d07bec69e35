/**
 * Signed webhooks for executors (Standard Webhooks): an executor reports an execution or an
 * observation as a signed POST instead of with its bearer key; and the tenant admin's routes that
 * create, rotate and list an executor's signing secrets.
 *
 * `POST /v1/webhooks/{tenant_id}/{principal_id}/executions/report` and
 * `POST /v1/webhooks/{tenant_id}/{principal_id}/observations` take the same body as
 * `POST /v1/executions/report` and `POST /v1/observations` and call the same service, as the
 * executor whose live secret signed the message (src/services/webhooks.ts). The path only selects
 * whose secrets are tried; the signature is what identifies the executor.
 *
 * Order, for each delivery: body bytes bounded (413), signature and timestamp verified over those
 * exact bytes (401), write rate limit (429), `webhook-id` claimed (a retry of the same message
 * replays the stored answer with `webhook-replayed: true`), then the strict decoder and the
 * route's schema, then the service. Nothing is written before the signature verifies.
 */
import { type Context, Hono } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { JsonValue } from '../../core/canonical/json.js';
import { Identifier } from '../../core/schema.js';
import { classifierPort, operationsPort, tenantShard, tenantStore } from '../../platform/bindings.js';
import { ROLES_FOR, type TenantContext } from '../../services/context.js';
import { ServiceError } from '../../services/errors.js';
import { ReportBody, reportExecution } from '../../services/executions.js';
import { ObservationBody, observe } from '../../services/observations.js';
import {
  RotateWebhookSecretRequest,
  authenticateWebhook,
  isFinalAnswer,
  listWebhookSecrets,
  refuseUnknownSender,
  refuseUnknownTenant,
  rotateWebhookSecret,
  startDelivery,
} from '../../services/webhooks.js';
import { requireRole } from '../auth.js';
import { decodeJsonBody, parseWith, readBodyBytes, readJson } from '../body.js';
import type { AppEnv } from '../env.js';
import { errorResponse } from '../errors.js';
import { takeWriteToken } from '../rate-limit.js';

/** Deliveries: registered before bearer authentication (they carry a signature instead). */
export const webhookRoutes = new Hono<AppEnv>();

/** Secret management: tenant admin, behind bearer authentication. */
export const webhookSecretRoutes = new Hono<AppEnv>();

type Answer = { readonly status: ContentfulStatusCode; readonly body: unknown };

webhookRoutes.post('/webhooks/:tenant_id/:principal_id/executions/report', (c) =>
  deliver(c, 'executions/report', async (ctx, value) => {
    const { rejected, ...answer } = await reportExecution(ctx, parseWith(ReportBody, value));
    return { status: rejected ? 403 : 200, body: answer };
  }),
);

webhookRoutes.post('/webhooks/:tenant_id/:principal_id/observations', (c) =>
  deliver(c, 'observations', async (ctx, value) => {
    const { replayed, ...answer } = await observe(ctx, parseWith(ObservationBody, value));
    return { status: answer.decision === 'rejected' ? 403 : replayed ? 200 : 201, body: answer };
  }),
);

webhookSecretRoutes.post(
  '/principals/:principal_id/webhook-secrets',
  requireRole(ROLES_FOR.admin),
  async (c) => {
    const body = await readJson(c, RotateWebhookSecretRequest, { allowEmpty: true });
    return c.json(await rotateWebhookSecret(c.var.tenant, c.req.param('principal_id'), body), 201);
  },
);

webhookSecretRoutes.get(
  '/principals/:principal_id/webhook-secrets',
  requireRole(ROLES_FOR.admin),
  async (c) => c.json(await listWebhookSecrets(c.var.tenant, c.req.param('principal_id'))),
);

async function deliver(
  c: Context<AppEnv>,
  route: string,
  run: (ctx: TenantContext, value: JsonValue) => Promise<Answer>,
): Promise<Response> {
  const tenant_id = c.req.param('tenant_id') ?? '';
  const principal_id = c.req.param('principal_id') ?? '';
  const headers = {
    id: c.req.header('webhook-id'),
    timestamp: c.req.header('webhook-timestamp'),
    signature: c.req.header('webhook-signature'),
  };
  // A malformed id names nobody: the same 401 (same body) as an unknown one, before the body is read.
  if (!Identifier.safeParse(tenant_id).success || !Identifier.safeParse(principal_id).success) {
    throw refuseUnknownSender(headers, c.var.now);
  }
  const bytes = await readBodyBytes(c);
  // A webhook carries no routed key, so the tenant's shard comes from the shard directory
  // (one read on shard 0); an unknown tenant is the same 401 (same body) as a bad signature,
  // after the same principal-and-secrets read a known tenant's delivery makes (on shard 0).
  const shard = await tenantShard(c.env, tenant_id);
  if (shard === null) {
    const nowhere = tenantStore(c.env, { tenant_id, shard: 0 });
    throw await refuseUnknownTenant(nowhere, principal_id, headers, bytes, c.var.now);
  }
  const store = tenantStore(c.env, { tenant_id, shard });
  const { caller, webhook_id } = await authenticateWebhook(store, principal_id, headers, bytes, c.var.now);
  c.set('principal', caller);
  c.set('log', { ...c.var.log, tenant_id, principal_id, webhook_id });
  c.set('tenant', {
    caller,
    store,
    operations: operationsPort(c.env, shard),
    classifier: classifierPort(c.env),
    shard,
    now: c.var.now,
    log: (fields) => c.set('log', { ...c.var.log, ...fields }),
  });
  await takeWriteToken(c, caller);

  const start = await startDelivery(store, { principal_id, webhook_id, route, body: bytes, now: c.var.now });
  if (start.kind === 'replay') {
    c.set('log', { ...c.var.log, webhook_replayed: true });
    return c.body(start.response, start.status as ContentfulStatusCode, {
      'content-type': 'application/json',
      'webhook-replayed': 'true',
    });
  }

  let res: Response;
  try {
    const answer = await run(c.var.tenant, decodeJsonBody(c, bytes));
    res = c.json(answer.body, answer.status);
  } catch (e) {
    if (!(e instanceof ServiceError)) {
      // An internal failure wrote nothing the service would not redo: let a retry run again.
      await store.releaseWebhookDelivery(principal_id, webhook_id).catch(() => undefined);
      throw e;
    }
    c.set('log', { ...c.var.log, error: e.reason });
    res = errorResponse(c, e);
  }
  try {
    if (isFinalAnswer(res.status)) {
      await store.completeWebhookDelivery(principal_id, webhook_id, res.status, await res.clone().text());
    } else await store.releaseWebhookDelivery(principal_id, webhook_id);
  } catch (e) {
    // The service's write stands; an id left unanswered is taken over by a retry after
    // STALE_DELIVERY_MS, and report and observe replay what they recorded.
    c.set('log', { ...c.var.log, webhook_delivery_record: 'failed', error_name: errorName(e) });
  }
  return res;
}

function errorName(e: unknown): string {
  return e instanceof Error ? e.name : typeof e;
}
