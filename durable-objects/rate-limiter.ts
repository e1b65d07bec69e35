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
 * Refusals are counted (src/core/limits/refusal-tally.ts) for the tenant's security metrics: a
 * refusal writes no receipt, so these counts are the only trace of a principal hammering the
 * limit. The counts are kept in memory and flushed to the object's SQLite storage by an alarm
 * (`REFUSAL_FLUSH_MS` after the first unflushed refusal) or by the next `refusals` read, one
 * transaction per flush, so a flood of refusals costs at most 202 rows a minute per flush (100
 * named principals and `*`, by two buckets), not a write per refusal. Rows older than
 * `REFUSAL_RETENTION_MS` are deleted at each flush. Counts are never written twice: a flush
 * forgets exactly what it wrote, in the same synchronous step, so an alarm run again (alarms are
 * at-least-once) finds nothing left. Accepted: a restart before the alarm fires (a deploy, a
 * crash) loses at most that many seconds of counts (an idle object is evicted only after longer
 * than that; more only while a failing flush is retried), and the per-minute bound on named
 * principals starts over.
 *
 * RPC surface: `take` and `refusals`. The limits come with every call (the Worker's
 * configuration), and `now` too (the request's one clock read), so tests drive the object with
 * explicit values.
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
import {
  type RefusalSummary,
  RefusalTally,
  type RefusingBucket,
  minuteOf,
} from '../src/core/limits/refusal-tally.js';
import { Identifier, UnixMs } from '../src/core/schema.js';

/** Unflushed refusal counts are written this long after the first of them. */
export const REFUSAL_FLUSH_MS = 5_000;
/** Stored refusal counts are kept this long: beyond the metrics' longest window (seven days). */
export const REFUSAL_RETENTION_MS = 8 * 86_400_000;
/** Principals a refusal summary names; the rest are counted in `principals_left_out`. */
export const REFUSAL_SUMMARY_TOP = 20;

export interface RefusalsRequest {
  readonly tenant_id: string;
  readonly from: number;
  readonly to: number;
}

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
  readonly #refusals = new RefusalTally();
  #flushScheduled = false;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    ctx.storage.sql.exec(
      `CREATE TABLE IF NOT EXISTS refusals (
         minute INTEGER NOT NULL,
         principal_id TEXT NOT NULL,
         limited_by TEXT NOT NULL CHECK (limited_by IN ('principal', 'tenant')),
         n INTEGER NOT NULL CHECK (n > 0),
         PRIMARY KEY (minute, principal_id, limited_by)
       ) WITHOUT ROWID`,
    );
  }

  /** Take `count` tokens (default one) from the principal's bucket at `now`, or say when to retry. */
  async take(request: RateLimitRequest): Promise<RateLimitDecision> {
    const decision = this.#take(request);
    if (!decision.allowed) {
      this.#refusals.record(request.principal_id, decision.limited_by ?? 'principal', request.now);
      if (!this.#flushScheduled) {
        this.#flushScheduled = true;
        try {
          await this.ctx.storage.setAlarm(Date.now() + REFUSAL_FLUSH_MS);
        } catch (e) {
          // No alarm was set: the next refusal tries again, else the counts would never be written
          // and the unflushed tally would grow by the minute. The Worker answers this refusal as
          // a limiter that could not answer (429, fail closed).
          this.#flushScheduled = false;
          throw e;
        }
      }
    }
    return decision;
  }

  /**
   * The tenant's refusals in the minutes from `from`'s to `to`'s, stored and unflushed. Unflushed
   * counts are written first, so one SQL aggregate answers: the rows handed to JavaScript are at
   * most `REFUSAL_SUMMARY_TOP`, however many the window holds (up to 202 a minute, two million in
   * seven days: read row by row, they would not fit the object's memory). SQLite still scans the
   * window's rows once, in C; the same as `summarizeRefusals`, which
   * test/integration/limits/refusal-counts.test.ts checks.
   */
  async refusals(request: RefusalsRequest): Promise<RefusalSummary> {
    if (
      !Identifier.safeParse(request.tenant_id).success ||
      !UnixMs.safeParse(request.from).success ||
      !UnixMs.safeParse(request.to).success ||
      request.from > request.to
    ) {
      throw new Error('invalid refusals request');
    }
    this.#requireOwnTenant(request.tenant_id);
    if (this.#refusals.hasPending) this.#flush();
    const first = minuteOf(request.from);
    const rows = this.ctx.storage.sql
      .exec<{ principal_id: string; refused: number; principals: number; principal: number; tenant: number }>(
        `SELECT principal_id, SUM(n) AS refused,
                COUNT(*) OVER () AS principals,
                SUM(SUM(CASE limited_by WHEN 'principal' THEN n ELSE 0 END)) OVER () AS principal,
                SUM(SUM(CASE limited_by WHEN 'tenant' THEN n ELSE 0 END)) OVER () AS tenant
           FROM refusals WHERE minute >= ? AND minute <= ?
          GROUP BY principal_id ORDER BY refused DESC, principal_id LIMIT ?`,
        first,
        minuteOf(request.to),
        REFUSAL_SUMMARY_TOP,
      )
      .toArray();
    const head = rows[0];
    const limited_by = { principal: head?.principal ?? 0, tenant: head?.tenant ?? 0 };
    return {
      total: limited_by.principal + limited_by.tenant,
      limited_by,
      by_principal: rows.map((r) => ({ principal_id: r.principal_id, n: r.refused })),
      principals_left_out: Math.max(0, (head?.principals ?? 0) - rows.length),
      from_minute_unix_ms: first,
    };
  }

  /** Write the unflushed refusal counts and drop expired ones. */
  override async alarm(): Promise<void> {
    this.#flushScheduled = false;
    this.#flush();
  }

  /** The unflushed counts added to the stored ones, and rows past the retention deleted: one transaction. */
  #flush(): void {
    const pending = this.#refusals.pending();
    const expired = minuteOf(Date.now() - REFUSAL_RETENTION_MS);
    this.ctx.storage.transactionSync(() => {
      for (const c of pending) {
        this.ctx.storage.sql.exec(
          `INSERT INTO refusals (minute, principal_id, limited_by, n) VALUES (?, ?, ?, ?)
           ON CONFLICT (minute, principal_id, limited_by) DO UPDATE SET n = n + excluded.n`,
          c.minute,
          c.principal_id,
          c.limited_by,
          c.n,
        );
      }
      this.ctx.storage.sql.exec('DELETE FROM refusals WHERE minute < ?', expired);
    });
    this.#refusals.flushed(pending);
  }

  #requireOwnTenant(tenant_id: string): void {
    // One tenant's buckets in one object: a principal of another tenant could otherwise drain them.
    if (!this.ctx.id.equals(this.env.RATE_LIMITER.idFromName(rateLimiterName(tenant_id)))) {
      throw new Error('rate limit request sent to another tenant’s object');
    }
  }

  #take(request: RateLimitRequest): RateLimitDecision & { limited_by?: RefusingBucket } {
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
    this.#requireOwnTenant(request.tenant_id);
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
