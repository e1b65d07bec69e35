/**
 * The Docker MCP Gateway interceptor door (docs/mcp.md "Docker MCP Gateway interceptors"):
 * `POST /docker-mcp/v1/before` takes the gateway's `before` payload as it is and answers in the
 * one language the gateway reads: an **empty body** lets the call through, any other body is the
 * call's result (an `isError` `CallToolResult`) and the tool is not called. `POST
 * /docker-mcp/v1/after` takes the call's result and screens it as untrusted evidence: empty keeps
 * it, any other body (annotated, withheld, refused) replaces it.
 *
 * Guarantees: the empty `before` answer is given only for a stored authorized receipt, through the
 * same service as `POST /v1/authorize` and `POST /mcp/v1/authorize`; the empty `after` answer only
 * for a result that raised no signal; every other path (a denial, a refusal, a missing or bad key,
 * a rate limit, a malformed body, an internal failure) answers a non-empty `isError` result, so a
 * gateway that ignores status codes still fails closed; the status code is still the HTTP meaning
 * (200 for a decision, 4xx/5xx otherwise), for a relay that fails on it (`curl --fail`).
 * Not checked: the tool's definition. The gateway posts none and runs no interceptor for
 * `tools/list`, so a call is bound to the pinned contract by its name alone; a drifted definition
 * is not seen here (docs/mcp.md "Tool definitions: no drift check on this path").
 * Never: reads a credential from the URL (the key is `Authorization: Bearer`, as everywhere),
 * reads, logs or stores the payload's `Extra` (it may carry the MCP client's own headers), or
 * stores or logs a tool's output (`after` logs its digest and the rule ids that fired).
 */
import type { Context, ErrorHandler } from 'hono';
import { Hono } from 'hono';
import { authorizeNamedToolByKey } from '../../services/tool-call.js';
import { ServiceError, errorForLog } from '../../services/errors.js';
import { bearerKeyRoute, keyedDoor, refusesCaller } from '../auth.js';
import { readJsonValue } from '../body.js';
import type { AppEnv } from '../env.js';
import { wireError } from '../errors.js';
import { accessRequestWire } from '../access-request.js';
import {
  afterSignalPolicyOf,
  type InterceptorTranslation,
  interceptorDeny,
  screenAfter,
  translateBefore,
} from './interceptor.js';
import { WRIT_META } from './translate.js';

export const interceptorRoutes = new Hono<AppEnv>();

/** Every failure on these routes, authentication included, is a non-empty `isError` result. */
export const interceptorError: ErrorHandler<AppEnv> = (e, c) => {
  const reason = e instanceof ServiceError ? e.reason : 'internal';
  const { status, code } = wireError(reason);
  if (e instanceof ServiceError && e.retryAfterSeconds !== null)
    c.header('retry-after', String(e.retryAfterSeconds));
  c.set('log', { ...c.var.log, error: reason });
  if (!(e instanceof ServiceError)) {
    console.error(JSON.stringify({ level: 'error', request_id: c.var.requestId, ...errorForLog(e) }));
  }
  const message = e instanceof ServiceError ? e.message : 'internal error; quote the writ-request-id header';
  return c.json(
    interceptorDeny(`Writ could not ${what(c.req.path)} (${code}): ${message}`, {
      error: { status, code, message, request_id: c.var.requestId },
    }),
    status,
  );
};
interceptorRoutes.onError(interceptorError);

const what = (path: string) =>
  path === '/docker-mcp/v1/after' ? 'screen this result; it is withheld' : 'authorize this call';

// Registered without `authenticate` and `rateLimitWrites`: the service reads the key's principal
// in one batch with the tool's pins and the authorization state (`POST /v1/authorize`'s round
// trips), and checks the role and takes the write token itself, before deciding. Every other
// path through here authenticates first (`door.authenticate`).
interceptorRoutes.post('/docker-mcp/v1/before', async (c) => {
  const key = bearerKeyRoute(c);
  const door = keyedDoor(c, key);
  let t: InterceptorTranslation;
  try {
    const runIds = c.req.queries('run_id') ?? [];
    if (runIds.length > 1) throw new ServiceError('invalid_request', 'name run_id at most once');
    t = translateBefore(await readJsonValue(c, { allowMissingContentType: true }), runIds[0]);
  } catch (e) {
    await door.authenticate();
    throw e;
  }
  if (!t.ok) {
    await door.authenticate();
    return refused(c, t.error.error.code, t.error.error.message, {});
  }
  try {
    const { decision, authorized, access_request } = await authorizeNamedToolByKey(door, key, t.call);
    const { receipt } = decision;
    c.set('log', { ...c.var.log, receipt_sha256: receipt.sha256 });
    // The gateway's "continue": the only empty answer this route ever gives.
    if (authorized) return c.body(null, 200);
    const violations = receipt.body.violations;
    const writ: Record<string, unknown> = { violations, receipt_sha256: receipt.sha256 };
    if (access_request !== null) {
      writ.access_request = accessRequestWire(c.req.url, access_request, {
        params: { _meta: { [WRIT_META.approval_id]: '<approval_id of the approved request>' } },
      });
    }
    return c.json(
      interceptorDeny(`Denied by Writ: ${violations.join(', ')} (receipt ${receipt.sha256})`, writ),
      200,
    );
  } catch (err) {
    // A typed refusal denies the call; anything else is the route's 500 (still non-empty), and a
    // refusal of the caller (key, role, write limit) keeps its status (still non-empty).
    if (!(err instanceof ServiceError) || err.reason === 'internal' || refusesCaller(err)) throw err;
    const { status, code } = wireError(err.reason);
    return refused(c, null, err.message, { writ_error: { status, code, message: err.message } });
  }
});

/** A refusal without a receipt (a malformed payload, an unknown tool, an ambiguous name). */
function refused(c: Context<AppEnv>, rpc: number | null, message: string, extra: Record<string, unknown>) {
  return c.json(
    interceptorDeny(`Denied by Writ: ${message}`, { ...(rpc === null ? {} : { code: rpc }), ...extra }),
    200,
  );
}

// `after`: the result screened as untrusted evidence (docs/mcp.md). Nothing links it to an
// authorization, so nothing is stored; the caller is authenticated, held to the `before` role and
// charged a write token (the scan costs CPU) before the body is read.
interceptorRoutes.post('/docker-mcp/v1/after', async (c) => {
  await keyedDoor(c, bearerKeyRoute(c)).authenticate();
  const policy = afterSignalPolicyOf(c.req.queries('on_signal') ?? []);
  if (!policy.ok) throw new ServiceError('invalid_request', policy.message);
  const a = screenAfter(await readJsonValue(c, { allowMissingContentType: true }), policy.policy);
  if (a.kind === 'refused') {
    c.set('log', { ...c.var.log, screening: 'refused' });
    return c.json(a.result, 200);
  }
  const s = a.screening;
  // What a log can correlate with the gateway's and the server's: the output's digest, never text.
  c.set('log', {
    ...c.var.log,
    screening: a.kind,
    output_sha256: s.output_sha256,
    output_bytes: s.output_bytes,
    signal_rules: s.signal_hits.map((h) => `${h.rule}/${h.encoding}`).join(' '),
  });
  // The gateway's "keep the result": the only empty answer this route gives.
  if (a.kind === 'pass') return c.body(null, 200);
  return c.json(a.result, 200);
});
