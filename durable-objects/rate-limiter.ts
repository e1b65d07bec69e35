/**
 * `RateLimiterObject`: one Durable Object per tenant, named by `rateLimiterName(tenant_id)`,
 * holding one token bucket per principal of that tenant (src/core/limits/token-bucket.ts). The
 * Worker asks it before every write; the object runs one request at a time, so two concurrent
 * writes of one principal can never both take the last token.
 *
 * Buckets live in memory, not in storage: a write costs no storage write, and an object that
 * is evicted has been idle far longer than any bucket takes to refill (`burst / per_second`
 * seconds), so it loses nothing. A restart under load (a deploy, a crash) starts every bucket of
 * the tenant full again: at most one extra burst per principal (SECURITY.md, trade-offs).
 *
 * Issue 10: the object also keeps the tenant's aggregate bucket (`tenant_per_second`,
 * `tenant_burst`), taken jointly with the principal's: a write is admitted only when both hold a
 * token, so one tenant's admitted writes are bounded across all its principals (its share of the
 * shard's writer), and a refusal takes from neither.
 *
 * RPC surface: `take` only. The limits come with every call (the Worker's configuration), and
 * `now` too (the request's one clock read), so tests drive the object with explicit values.
 */
import { DurableObject } from 'cloudflare:workers';
import { digestOf } from '../src/core/canonical/canonical.js';
import {
  isTakeable,
  parseRateLimit,
  type BucketState,
  takeFrom,
  takeJointlyFrom,
} from '../src/core/limits/token-bucket.js';
import { Identifier, UnixMs } from '../src/core/schema.js';

/** Buckets one tenant's object keeps; beyond it full buckets, then the fullest, are dropped. */
export const MAX_BUCKETS = 10_000;

export interface RateLimitRequest {
  readonly tenant_id: string;
  readonly principal_id: string;
  readonly now: number;
  readonly per_second: number;
  readonly burst: number;
  /** The tenant's aggregate limit over all its principals; both or neither (the Worker sends both). */
  readonly tenant_per_second?: number;
  readonly tenant_burst?: number;
  /**
   * Tokens this request takes from each bucket, default one: an AuthZEN batch takes one per
   * evaluation beyond the first. At most the smaller burst; any other count is an invalid request.
   */
  readonly count?: number;
}

export interface RateLimitDecision {
  readonly allowed: boolean;
  /** Whole tokens left after this request (0 when denied). */
  readonly remaining: number;
  /** Seconds until the next request is admitted; 0 when allowed. */
  readonly retry_after_seconds: number;
  /** On a refusal, which bucket refused: the principal's own, or the tenant's aggregate one. */
  readonly limited_by?: 'principal' | 'tenant';
}

export class RateLimiterObject extends DurableObject<Env> {
  readonly #buckets = new Map<string, BucketState>();
  #tenant: BucketState | undefined;

  /** Take `count` tokens (default one) from the principal's bucket at `now`, or say when to retry. */
  async take(request: RateLimitRequest): Promise<RateLimitDecision> {
    const limit = parseRateLimit(request);
    const joint = request.tenant_per_second !== undefined || request.tenant_burst !== undefined;
    const count = request.count ?? 1;
    // Half a tenant limit is a configuration error, never "no tenant limit".
    const tenantLimit = joint
      ? parseRateLimit({ per_second: request.tenant_per_second, burst: request.tenant_burst })
      : null;
    if (
      !limit.ok ||
      (tenantLimit !== null && !tenantLimit.ok) ||
      !Identifier.safeParse(request.tenant_id).success ||
      !Identifier.safeParse(request.principal_id).success ||
      !UnixMs.safeParse(request.now).success ||
      (limit.ok && !isTakeable(count, limit.value)) ||
      (tenantLimit?.ok === true && !isTakeable(count, tenantLimit.value))
    ) {
      throw new Error('invalid rate limit request');
    }
    // One tenant's buckets in one object: a principal of another tenant could otherwise drain them.
    if (!this.ctx.id.equals(this.env.RATE_LIMITER.idFromName(rateLimiterName(request.tenant_id)))) {
      throw new Error('rate limit request sent to another tenant’s object');
    }
    if (tenantLimit?.ok === true) {
      const r = takeJointlyFrom(
        this.#buckets,
        request.principal_id,
        limit.value,
        this.#tenant,
        tenantLimit.value,
        request.now,
        MAX_BUCKETS,
        count,
      );
      this.#tenant = r.tenant;
      const o = r.outcome;
      return o.allowed
        ? { allowed: true, remaining: o.remaining, retry_after_seconds: 0 }
        : {
            allowed: false,
            remaining: 0,
            retry_after_seconds: o.retry_after_seconds,
            limited_by: o.limited_by,
          };
    }
    const outcome = takeFrom(
      this.#buckets,
      request.principal_id,
      limit.value,
      request.now,
      MAX_BUCKETS,
      count,
    );
    return outcome.allowed
      ? { allowed: true, remaining: outcome.remaining, retry_after_seconds: 0 }
      : { allowed: false, remaining: 0, retry_after_seconds: outcome.retry_after_seconds };
  }
}

/** The object's name: versioned and hashed from an unambiguous encoding of the tenant. */
export function rateLimiterName(tenant_id: string): string {
  return digestOf(['writ.rate-limiter.v1', tenant_id]);
}

export function rateLimiterStub(env: Env, tenant_id: string): DurableObjectStub<RateLimiterObject> {
  return env.RATE_LIMITER.get(env.RATE_LIMITER.idFromName(rateLimiterName(tenant_id)));
}
