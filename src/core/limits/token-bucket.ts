/**
 * Token buckets for per-principal rate limits: the arithmetic, and a bounded table of buckets.
 *
 * A bucket holds up to `burst` tokens and gains `per_second` tokens a second; each admitted
 * request takes one, or `count` when it stands for several writes (an AuthZEN batch). Tokens are counted in integer milli-tokens and time in integer milliseconds,
 * so there is no floating-point drift: one millisecond refills exactly `per_second` milli-tokens.
 *
 * Guarantees:
 * - from a full bucket, no span of time [t0, t1] admits more than
 *   `burst + floor(per_second * (t1 - t0) / 1000)` tokens' worth of requests (a take of `count`
 *   is admitted only when the bucket holds all `count` tokens, and takes them all or none);
 * - a denial takes nothing and names `retry_after_ms`, the exact wait after which the same bucket
 *   admits the next request (and not a millisecond earlier); `retry_after_seconds` is that wait
 *   rounded up to whole seconds, for `Retry-After`;
 * - monotone: a later `now` never leaves fewer tokens; a clock that goes backwards refills
 *   nothing and never moves a bucket's time back, so it cannot mint tokens twice;
 * - the table holds at most `max_buckets` buckets; it drops full buckets first (a full bucket is
 *   the same as an absent one, so that loses nothing) and only then the fullest one;
 * - a joint take (`takeJointlyFrom`: a principal's bucket and its tenant's aggregate bucket)
 *   admits only when both hold a token and then takes one from each, so the tenant bound above
 *   holds for all of its principals together; a joint refusal leaves both buckets unchanged.
 * Never: reads a clock (`now` is an argument), does I/O, or admits on invalid limits (they are a
 * typed error, checked by `parseRateLimit`, and `take` assumes a parsed value).
 */
import { coreError, type CoreError } from '../errors.js';
import { err, ok, type Result } from '../result.js';

/** Milli-tokens per token. */
const MILLI = 1000;

/** Upper bound for both settings: beyond it a limit is no limit (and products could lose precision). */
export const RATE_LIMIT_MAX = 1_000_000;

export interface RateLimit {
  /** Tokens refilled per second: the sustained rate. */
  readonly per_second: number;
  /** Bucket capacity: the largest burst admitted at once. */
  readonly burst: number;
}

export interface BucketState {
  /** Milli-tokens held at `at_unix_ms`, 0 to `burst * 1000`. */
  readonly milli_tokens: number;
  readonly at_unix_ms: number;
}

export type TakeOutcome =
  | { readonly allowed: true; readonly state: BucketState; readonly remaining: number }
  | {
      readonly allowed: false;
      readonly state: BucketState;
      readonly retry_after_ms: number;
      readonly retry_after_seconds: number;
    };

const isSetting = (n: unknown): n is number =>
  typeof n === 'number' && Number.isSafeInteger(n) && n >= 1 && n <= RATE_LIMIT_MAX;

/** A limit with both settings integers in 1..RATE_LIMIT_MAX; anything else cannot be enforced. */
export function parseRateLimit(value: { per_second: unknown; burst: unknown }): Result<RateLimit, CoreError> {
  if (!isSetting(value.per_second) || !isSetting(value.burst)) {
    return err(
      coreError('invalid_request', `rate limit settings must be integers from 1 to ${RATE_LIMIT_MAX}`),
    );
  }
  return ok({ per_second: value.per_second, burst: value.burst });
}

/** The bucket's milli-tokens at `now`: refilled for the time since its last change, capped. */
export function milliTokensAt(state: BucketState | undefined, limit: RateLimit, now: number): number {
  const full = limit.burst * MILLI;
  if (state === undefined) return full;
  // A bucket taken under a larger burst keeps no more than the current one allows.
  const held = Math.min(state.milli_tokens, full);
  const elapsed = now - state.at_unix_ms;
  if (elapsed <= 0) return held;
  // Bounding the elapsed time first keeps the product a safe integer however long the gap.
  const toFull = Math.ceil((full - held) / limit.per_second);
  return Math.min(full, held + Math.min(elapsed, toFull) * limit.per_second);
}

/**
 * Whether `count` tokens can ever be taken at once under `limit`: a whole number from 1 to the
 * burst. A larger take would wait for tokens the bucket cannot hold; callers refuse it first.
 */
export function isTakeable(count: number, limit: RateLimit): boolean {
  return Number.isSafeInteger(count) && count >= 1 && count <= limit.burst;
}

/**
 * Take `count` tokens (default one) at `now`, or say exactly how long until they are there.
 * `count` must be takeable (`isTakeable`); any other count is refused, never admitted.
 */
export function take(state: BucketState | undefined, limit: RateLimit, now: number, count = 1): TakeOutcome {
  const tokens = milliTokensAt(state, limit, now);
  // Never move a bucket's time back: refilling from an earlier instant would count a span twice.
  const at = state === undefined ? now : Math.max(state.at_unix_ms, now);
  const needed = isTakeable(count, limit) ? count * MILLI : Infinity;
  if (tokens >= needed) {
    const left = tokens - needed;
    return {
      allowed: true,
      state: { milli_tokens: left, at_unix_ms: at },
      remaining: Math.floor(left / MILLI),
    };
  }
  // Time already counted towards a bucket whose clock is ahead of `now` must still pass. A count
  // that can never be taken is told to wait for a full bucket (callers refuse it before asking).
  const ahead = at - now;
  const missing = Math.min(needed, limit.burst * MILLI) - tokens;
  const retry_after_ms = ahead + Math.max(1, Math.ceil(missing / limit.per_second));
  return {
    allowed: false,
    state: { milli_tokens: tokens, at_unix_ms: at },
    retry_after_ms,
    retry_after_seconds: Math.ceil(retry_after_ms / MILLI),
  };
}

/** Whether the bucket is full at `now`: then it carries no information and may be dropped. */
export function isFull(state: BucketState, limit: RateLimit, now: number): boolean {
  return milliTokensAt(state, limit, now) >= limit.burst * MILLI;
}

/**
 * Take `count` tokens (default one) from `key`'s bucket in `table`, keeping at most `max_buckets`
 * buckets. Every bucket of one table is under the same limit (one tenant's object, one
 * configuration).
 */
export function takeFrom(
  table: Map<string, BucketState>,
  key: string,
  limit: RateLimit,
  now: number,
  max_buckets: number,
  count = 1,
): TakeOutcome {
  const outcome = take(table.get(key), limit, now, count);
  if (!table.has(key) && table.size >= max_buckets) makeRoom(table, limit, now, max_buckets);
  table.set(key, outcome.state);
  return outcome;
}

function makeRoom(table: Map<string, BucketState>, limit: RateLimit, now: number, max_buckets: number): void {
  for (const [k, s] of table) if (isFull(s, limit, now)) table.delete(k);
  // Still full of active buckets: drop the fullest, which forgets the least (it admits at most
  // its missing tokens early). Every principal of a tenant filling the table at once is the case.
  while (table.size >= max_buckets) {
    let fullest: string | undefined;
    let most = -1;
    for (const [k, s] of table) {
      const t = milliTokensAt(s, limit, now);
      if (t > most) {
        most = t;
        fullest = k;
      }
    }
    if (fullest === undefined) return;
    table.delete(fullest);
  }
}

// ---------------------------------------------------------------------------------------------
// A principal's bucket and its tenant's aggregate bucket, taken together (issue 10)

export type JointOutcome =
  | {
      readonly allowed: true;
      /** Whole tokens left in the emptier of the two buckets. */
      readonly remaining: number;
    }
  | {
      readonly allowed: false;
      /** Which bucket refused: the tenant's aggregate one wins the name when both do. */
      readonly limited_by: 'principal' | 'tenant';
      readonly retry_after_ms: number;
      readonly retry_after_seconds: number;
    };

/**
 * Take `count` tokens (default one) from `key`'s bucket in `table` (under `limit`) and as many
 * from the tenant's aggregate bucket (under `tenant_limit`), or none from either. A refusal changes no bucket and names the
 * longest of the waits, so retrying after it finds both buckets holding a token (unless others
 * took them meanwhile). The new tenant bucket is returned for the caller to keep.
 */
export function takeJointlyFrom(
  table: Map<string, BucketState>,
  key: string,
  limit: RateLimit,
  tenant: BucketState | undefined,
  tenant_limit: RateLimit,
  now: number,
  max_buckets: number,
  count = 1,
): { readonly outcome: JointOutcome; readonly tenant: BucketState | undefined } {
  const p = take(table.get(key), limit, now, count);
  const t = take(tenant, tenant_limit, now, count);
  if (p.allowed && t.allowed) {
    if (!table.has(key) && table.size >= max_buckets) makeRoom(table, limit, now, max_buckets);
    table.set(key, p.state);
    return { outcome: { allowed: true, remaining: Math.min(p.remaining, t.remaining) }, tenant: t.state };
  }
  const wait = Math.max(p.allowed ? 0 : p.retry_after_ms, t.allowed ? 0 : t.retry_after_ms);
  return {
    outcome: {
      allowed: false,
      limited_by: t.allowed ? 'principal' : 'tenant',
      retry_after_ms: wait,
      retry_after_seconds: Math.ceil(wait / MILLI),
    },
    tenant,
  };
}
