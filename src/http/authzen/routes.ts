/**
 * The AuthZEN 1.0 door (docs/authzen.md): `GET /.well-known/authzen-configuration` (and per
 * tenant under `/t/{tenant_id}`), `POST /access/v1/evaluation`, `POST /access/v1/evaluations`
 * (all three evaluation semantics) and `POST /access/v1/search/action`, each also under
 * `/t/{tenant_id}`. Every evaluation is a full authorization through the same service as
 * `POST /v1/authorize`: the same decision, the same stored receipt, the same budget and approval
 * effects.
 *
 * Guarantees: a deny is `200 {"decision": false}` with the violations and receipt digest in
 * `context` (§10.1.2), never a 403; a request the door cannot evaluate per item is
 * `decision: false` with `context.error` (§7.2.1); a missing required attribute is a 400
 * (§10.1.1); an inbound `X-Request-ID` is echoed verbatim (§10.1.3); a 401 carries
 * `WWW-Authenticate` (§11.3); error bodies are a message string (§10.1.2).
 * Never: lets the AuthZEN subject select whose authority applies (the API key does), or answers
 * `decision: true` for anything but a stored authorized receipt.
 */
import type { Context } from 'hono';
import { Hono } from 'hono';
import type { ZodError } from 'zod';
import { fromZodError } from '../../core/errors.js';
import { ResourceRef } from '../../core/model.js';
import { Identifier } from '../../core/schema.js';
import type { ApiKeyRoute } from '../../core/identity/identity.js';
import { ROLES_FOR } from '../../services/context.js';
import { ServiceError, errorForLog } from '../../services/errors.js';
import {
  type KeyedNamedToolDoor,
  authorizeNamedTool,
  authorizeNamedToolByKey,
} from '../../services/tool-call.js';
import { searchTools } from '../../services/tools.js';
import { accessRequestWire } from '../access-request.js';
import { authenticate, bearerKeyRoute, keyedDoor, refusesCaller, requireRole } from '../auth.js';
import { rateLimitWrites, takeBatchTokens } from '../rate-limit.js';
import { readJsonValue } from '../body.js';
import type { AppEnv } from '../env.js';
import { wireError } from '../errors.js';
import {
  acceptActionSearch,
  acceptEvaluation,
  acceptEvaluations,
  type Evaluation,
  expandBatch,
  stopsAfter,
  translateEvaluation,
} from './translate.js';

/** Inbound request ids we echo: printable ASCII, bounded (anything else cannot be a header value). */
const REQUEST_ID = /^[\x20-\x7e]{1,256}$/;

export const authzenRoutes = new Hono<AppEnv>();

authzenRoutes.onError((e, c) => {
  const reason = e instanceof ServiceError ? e.reason : 'internal';
  const { status } = wireError(reason);
  // AuthZEN's error statuses are 400, 401, 403 and 500; the others Writ can answer (404, 413,
  // 415, 429) are the HTTP meaning of the failure.
  if (reason === 'unauthenticated') c.header('www-authenticate', 'Bearer realm="writ"');
  if (e instanceof ServiceError && e.retryAfterSeconds !== null)
    c.header('retry-after', String(e.retryAfterSeconds));
  c.header('writ-error-code', wireError(reason).code);
  c.set('log', { ...c.var.log, error: reason });
  if (!(e instanceof ServiceError)) {
    console.error(JSON.stringify({ level: 'error', request_id: c.var.requestId, ...errorForLog(e) }));
    return c.json('internal error; quote the writ-request-id header', 500);
  }
  return c.json(e.message, status);
});

// Scoped to the door's own paths: this router is mounted at the root, beside `/v1`.
const DOOR_PATHS = [
  '/access/*',
  '/t/*',
  '/.well-known/authzen-configuration',
  '/.well-known/authzen-configuration/*',
];
for (const path of DOOR_PATHS) {
  authzenRoutes.use(path, async (c, next) => {
    const inbound = c.req.header('x-request-id');
    if (inbound !== undefined && REQUEST_ID.test(inbound)) c.set('requestIdEcho', inbound);
    await next();
  });
}

// ---------------------------------------------------------------------------------------------
// Metadata (§9)

function metadata(c: Context<AppEnv>, tenant_id: string | null) {
  const origin = new URL(c.req.url).origin;
  const pdp = tenant_id === null ? origin : `${origin}/t/${tenant_id}`;
  c.header('cache-control', 'public, max-age=3600');
  return c.json({
    policy_decision_point: pdp,
    access_evaluation_endpoint: `${pdp}/access/v1/evaluation`,
    access_evaluations_endpoint: `${pdp}/access/v1/evaluations`,
    search_action_endpoint: `${pdp}/access/v1/search/action`,
  });
}

authzenRoutes.get('/.well-known/authzen-configuration', (c) => metadata(c, null));
// Per tenant (§9.2's multi-tenant form). Any well-formed id answers alike, so the document says
// nothing about which tenants exist; the endpoints it names only serve that tenant's keys.
authzenRoutes.get('/.well-known/authzen-configuration/t/:tenant_id', (c) => {
  const id = c.req.param('tenant_id');
  if (!Identifier.safeParse(id).success) throw new ServiceError('not_found', 'no such pdp');
  return metadata(c, id);
});

// ---------------------------------------------------------------------------------------------
// Evaluation (§6), evaluations (§7), action search (§8.6)

const api = authzenRoutes;

/** A tenant-scoped PDP serves its own tenant's keys only. */
function samePdp(c: Context<AppEnv>, caller: { readonly tenant_id: string }): void {
  const pdp = c.req.param('tenant_id');
  if (pdp !== undefined && pdp !== caller.tenant_id) {
    throw new ServiceError('forbidden_role', 'this api key belongs to another policy decision point');
  }
}

// The single evaluation, registered before `authenticate` and `rateLimitWrites`: the service
// reads the key's principal in one batch with the tool's pins and the authorization state
// (`POST /v1/authorize`'s round trips), and checks the PDP, the role and the write token itself.
for (const prefix of ['', '/t/:tenant_id']) {
  api.post(`${prefix}/access/v1/evaluation`, async (c) => {
    const key = bearerKeyRoute(c);
    const door = keyedDoor(c, key, (caller) => samePdp(c, caller));
    let parsed: ReturnType<typeof acceptEvaluation>;
    try {
      parsed = acceptEvaluation(await readJsonValue(c));
    } catch (e) {
      await door.authenticate();
      throw e;
    }
    if (!parsed.success) {
      await door.authenticate();
      throw badRequest(parsed.error);
    }
    return c.json(await evaluate(c, parsed.data, { door, key }));
  });
}

api.use('/access/*', authenticate);
api.use('/t/:tenant_id/access/*', authenticate);
// Every evaluation may store a receipt and spend a budget: the per-principal write limit applies.
api.use('/access/*', rateLimitWrites);
api.use('/t/:tenant_id/access/*', rateLimitWrites);
// A tenant-scoped PDP serves its own tenant's keys only.
api.use('/t/:tenant_id/access/*', async (c, next) => {
  samePdp(c, c.var.principal);
  await next();
});

for (const prefix of ['', '/t/:tenant_id']) {
  api.post(`${prefix}/access/v1/evaluations`, requireRole(ROLES_FOR.authorize), async (c) => {
    const parsed = acceptEvaluations(await readJsonValue(c));
    if (!parsed.success) throw badRequest(parsed.error);
    const batch = expandBatch(parsed.data);
    if (batch === null) {
      throw new ServiceError('invalid_request', 'every evaluation needs a subject, action and resource');
    }
    if (batch.single) return c.json(await evaluate(c, batch.items[0] as Evaluation));
    // Each evaluation may store a receipt: the batch pays one write token per evaluation it
    // holds (all of them, also those a short-circuit semantic leaves unevaluated).
    await takeBatchTokens(c, c.var.principal, batch.items.length);
    const semantic = parsed.data.options?.evaluations_semantic ?? 'execute_all';
    const evaluations: Decision[] = [];
    // In order, one after another: each evaluation may spend the run budget the next one needs.
    for (const item of batch.items) {
      const d = await evaluate(c, item);
      evaluations.push(d);
      if (stopsAfter(semantic, d.decision)) break;
    }
    return c.json({ evaluations });
  });

  api.post(`${prefix}/access/v1/search/action`, requireRole(ROLES_FOR.authorize), async (c) => {
    const parsed = acceptActionSearch(await readJsonValue(c));
    if (!parsed.success) throw badRequest(parsed.error);
    const { subject, resource } = parsed.data;
    const ctx = c.var.tenant;
    // Another subject's permissions are not this key's to reveal: an empty result, not a 403.
    if (subject.id !== ctx.caller.principal_id) return c.json({ results: [] });
    const target =
      resource.properties === undefined
        ? null
        : ResourceRef.safeParse({ type: resource.type, attributes: resource.properties });
    if (target !== null && !target.success) return c.json({ results: [] });
    const tools = await searchTools(ctx, target === null ? null : target.data);
    return c.json({
      results: tools
        .filter((t) => t.resource_type === resource.type)
        .map((t) => ({
          name: t.tool_name,
          properties: {
            tool_contract_sha256: t.tool_contract_sha256,
            effect: t.effect,
            approval_required: t.approval_required,
          },
        })),
    });
  });
}

// ---------------------------------------------------------------------------------------------

interface Decision {
  readonly decision: boolean;
  readonly context: Record<string, unknown>;
}

function badRequest(e: ZodError): ServiceError {
  const err = fromZodError('invalid_request', '', e);
  const first = err.issues[0];
  return new ServiceError(
    'invalid_request',
    first === undefined ? 'request is not valid' : `${first.path}: ${first.message}`,
    err.issues,
  );
}

/**
 * One evaluation: an authorization through the service, or an item error that denies. `keyed`:
 * the caller is not authenticated yet, and the service reads its key in the same batch as the
 * state (the single evaluation); an item error is then answered only after authenticating.
 */
async function evaluate(
  c: Context<AppEnv>,
  e: Evaluation,
  keyed?: { readonly door: KeyedNamedToolDoor; readonly key: ApiKeyRoute },
): Promise<Decision> {
  try {
    const t = translateEvaluation(e);
    if (!t.ok) {
      await keyed?.door.authenticate();
      throw new ServiceError('invalid_request', t.message, t.issues);
    }
    const { decision, authorized, access_request } =
      keyed === undefined
        ? await authorizeNamedTool(c.var.tenant, t)
        : await authorizeNamedToolByKey(keyed.door, keyed.key, t);
    const { receipt } = decision;
    if (authorized) return { decision: true, context: { receipt_sha256: receipt.sha256, receipt } };
    const context: Record<string, unknown> = {
      reason: 'denied',
      violations: receipt.body.violations,
      receipt_sha256: receipt.sha256,
      receipt,
    };
    if (access_request !== null) {
      // Re-evaluate with `context.approval_id` once it is approved.
      context.access_request = accessRequestWire(c.req.url, access_request, {
        context: { approval_id: '<approval_id of the approved request>' },
      });
    }
    return { decision: false, context };
  } catch (err) {
    // Only a typed refusal becomes an item denial; anything else fails the whole request closed,
    // and a refusal of the caller (key, PDP, role, write limit) is the HTTP error it always is.
    if (!(err instanceof ServiceError) || err.reason === 'internal' || refusesCaller(err)) throw err;
    const { status, code } = wireError(err.reason);
    return { decision: false, context: { error: { status, code, message: err.message } } };
  }
}
