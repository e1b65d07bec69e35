/**
 * Per-principal rate limit on every write, and the tenant's aggregate write budget beside it
 * (issue 10: one tenant's admitted writes are bounded across all its principals, in the same
 * limiter call): each POST, PUT, PATCH or DELETE under `/v1`, and every
 * AuthZEN evaluation and MCP request (they store receipts too), after authentication takes one
 * token from its principal's bucket (durable-objects/rate-limiter.ts),
 * `POST /v1/authorize` included (it stores a receipt, and may consume an approval and charge a
 * run). Reads are not limited, except security metrics reads (`takeMetricsReadTokens`). `POST /v1/tenants` (platform admin token, before authentication)
 * has no principal and is not limited here. An AuthZEN batch of n evaluations costs n tokens: the
 * one above before its body is read, and n - 1 more in one limiter call once it is parsed
 * (`takeBatchTokens`), so a batch is never a way past the limit; likewise `POST /mcp/v1/after-call`
 * with evidence (an execution and an observation receipt) costs two.
 *
 * Guarantees: an empty bucket is a 429 `rate_limited` with `Retry-After` in whole seconds,
 * raised before the body is read (a batch's further tokens: once it is parsed, before anything is
 * evaluated) and before anything is written; the limiter answers for the request's one clock read
 * (`c.var.now`).
 * Fails closed: a limiter that cannot answer (unreachable, overloaded, erroring) is a 429 with
 * `Retry-After: 1`, never a pass. The limiter protects storage; letting writes through while it
 * is down would remove the protection exactly when a flood overloads it (SECURITY.md).
 */
import type { Context } from 'hono';
import { createMiddleware } from 'hono/factory';
import { rateLimitPort, refusalsOf } from '../platform/bindings.js';
import { ServiceError } from '../services/errors.js';
import type { RefusalsOf } from '../services/metrics.js';
import type { AppEnv } from './env.js';

const WRITE_METHODS: ReadonlySet<string> = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** Seconds a client is told to wait when the limiter itself could not answer. */
export const UNAVAILABLE_RETRY_AFTER_SECONDS = 1;

export const rateLimitWrites = createMiddleware<AppEnv>(async (c, next) => {
  if (!WRITE_METHODS.has(c.req.method)) return next();
  await takeWriteToken(c, c.var.principal);
  await next();
});

/**
 * The rest of an AuthZEN batch's cost once its body is parsed: `evaluations` tokens in all, one
 * already taken by `rateLimitWrites`. A batch larger than the burst could never be admitted: a
 * 400 that says how many fit, before any token is taken for it.
 */
export async function takeBatchTokens(
  c: Context<AppEnv>,
  who: { readonly tenant_id: string; readonly principal_id: string },
  evaluations: number,
): Promise<void> {
  const most = rateLimitPort(c.env).max_count;
  if (evaluations > most) {
    throw new ServiceError(
      'invalid_request',
      `this batch holds ${evaluations} evaluations; each is a write, and at most ${most} fit in one request under the write limit`,
    );
  }
  // A retry of the batch pays its own token again before these: its Retry-After covers it too.
  if (evaluations > 1) await takeWriteToken(c, who, evaluations - 1, 1);
}

/**
 * What one security metrics read costs (`GET /v1/metrics`, the console's Security page): it walks
 * up to seven bounded index ranges of the tenant's shard (src/services/metrics.ts), so it pays as
 * ten writes, from the same buckets, after its query is validated and before anything is read.
 * A burst smaller than that is paid whole instead (a count above the burst could never be
 * admitted). At the defaults a principal reads metrics at most twice a second, and a
 * dashboard refreshing every ten seconds spends one token a second.
 */
export const METRICS_READ_TOKENS = 10;

export async function takeMetricsReadTokens(c: Context<AppEnv>): Promise<void> {
  const count = Math.min(METRICS_READ_TOKENS, rateLimitPort(c.env).max_count);
  await takeWriteToken(c, c.var.principal, count);
}

/**
 * `count` tokens (default one) from the principal's bucket and its tenant's, or a 429 (also for
 * doors that authenticate otherwise). `paid_first`: tokens a retry of the same request takes
 * before these (an AuthZEN batch's own token); a refusal's Retry-After adds a second for each,
 * since every bucket refills at least one token a second, so the retry finds them all.
 */
export async function takeWriteToken(
  c: Context<AppEnv>,
  { tenant_id, principal_id }: { readonly tenant_id: string; readonly principal_id: string },
  count = 1,
  paid_first = 0,
): Promise<void> {
  let decision;
  try {
    decision = await rateLimitPort(c.env).take(tenant_id, principal_id, c.var.now, count);
  } catch (e) {
    throw limiterUnavailable(c, e);
  }
  if (!decision.allowed) {
    throw new ServiceError(
      'rate_limited',
      decision.limited_by === 'tenant'
        ? "too many writes by this tenant's principals together; retry after the indicated delay"
        : 'too many writes by this principal; retry after the indicated delay',
      [],
      decision.retry_after_seconds + paid_first,
    );
  }
}

/**
 * The security metrics' reader of the caller's tenant's refusal counts (`getMetrics`: the API's
 * and the console's), from the limiter object that has just taken the read's tokens. A limiter
 * that cannot give them answers as one that cannot take a token: 429 with `Retry-After: 1`, never
 * a 500 and never metrics that leave the refusals out.
 */
export function metricsRefusals(c: Context<AppEnv>): RefusalsOf {
  const read = refusalsOf(c.env, c.var.tenant.caller.tenant_id);
  return async (from, to) => {
    try {
      return await read(from, to);
    } catch (e) {
      throw limiterUnavailable(c, e);
    }
  };
}

function limiterUnavailable(c: Context<AppEnv>, e: unknown): ServiceError {
  // Only the error's name is logged: the limiter's message could carry internal detail.
  c.set('log', { ...c.var.log, rate_limiter: 'unavailable', rate_limiter_error: errorName(e) });
  return new ServiceError(
    'rate_limited',
    'the rate limiter is unavailable; retry later',
    [],
    UNAVAILABLE_RETRY_AFTER_SECONDS,
  );
}

function errorName(e: unknown): string {
  return e instanceof Error ? e.name : typeof e;
}
