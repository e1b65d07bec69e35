/**
 * Counts of rate-limit refusals (`429 rate_limited`) per minute, by principal and by the bucket
 * that refused: the security metrics' `rate_limited` section. A refusal writes no receipt (nothing
 * was decided), so without these counts a principal hammering the write limit would be invisible
 * to the tenant's metrics. The limiter object (durable-objects/rate-limiter.ts) records each
 * refusal here and flushes the tally to its storage (by alarm, and before each read); a read
 * aggregates in SQL what `summarizeRefusals` computes here, which is its specification
 * (test/integration/limits/refusal-counts.test.ts checks the two agree).
 *
 * Guarantees:
 * - a refusal is counted once, in the minute of the request's clock read (`now`), under its
 *   principal and the bucket that refused (`principal` or `tenant`); a clock that goes back counts
 *   in the latest minute seen, never in a minute already closed;
 * - bounded: within one minute at most `MAX_PRINCIPALS_PER_MINUTE` principals are counted by
 *   name; refusals of any further principal are counted under `OTHER_PRINCIPALS`, so a flood
 *   from many principals still shows in every total and costs bounded memory and storage;
 * - a summary covers the whole minutes that start in the window's minute range, and lists the
 *   principals most refused first (ties by id), at most `top` of them, saying how many were left
 *   out.
 * Never: reads a clock (`now` is an argument) or does I/O.
 */

export const REFUSAL_MINUTE_MS = 60_000;
/** Principals counted by name within one minute; further ones are counted together. */
export const MAX_PRINCIPALS_PER_MINUTE = 100;
/** The name refusals of principals beyond the per-minute bound are counted under (not an identifier). */
export const OTHER_PRINCIPALS = '*';

export type RefusingBucket = 'principal' | 'tenant';

export interface RefusalCount {
  /** Start of the minute, in Unix milliseconds (a multiple of `REFUSAL_MINUTE_MS`). */
  readonly minute: number;
  readonly principal_id: string;
  readonly limited_by: RefusingBucket;
  readonly n: number;
}

export const minuteOf = (unix_ms: number): number =>
  Math.floor(unix_ms / REFUSAL_MINUTE_MS) * REFUSAL_MINUTE_MS;

/** Refusals recorded since the last flush, and the principals named in the current minute. */
export class RefusalTally {
  #minute = Number.NEGATIVE_INFINITY;
  readonly #named = new Set<string>();
  readonly #pending = new Map<string, RefusalCount>();

  /** Count one refused request of `principal_id` at `now`, refused by `limited_by`'s bucket. */
  record(principal_id: string, limited_by: RefusingBucket, now: number): void {
    const minute = Math.max(minuteOf(now), this.#minute);
    if (minute !== this.#minute) {
      this.#minute = minute;
      this.#named.clear();
    }
    let who = principal_id;
    if (!this.#named.has(who)) {
      if (this.#named.size < MAX_PRINCIPALS_PER_MINUTE) this.#named.add(who);
      else who = OTHER_PRINCIPALS;
    }
    const key = `${minute}\u0000${who}\u0000${limited_by}`;
    const had = this.#pending.get(key);
    this.#pending.set(key, { minute, principal_id: who, limited_by, n: (had?.n ?? 0) + 1 });
  }

  /** The unflushed counts (one per minute, principal and bucket). */
  pending(): readonly RefusalCount[] {
    return [...this.#pending.values()];
  }

  get hasPending(): boolean {
    return this.#pending.size > 0;
  }

  /** Forget the counts `flushed` returned: they are stored. Counts recorded since are kept. */
  flushed(stored: readonly RefusalCount[]): void {
    for (const c of stored) {
      const key = `${c.minute}\u0000${c.principal_id}\u0000${c.limited_by}`;
      const now = this.#pending.get(key);
      if (now === undefined) continue;
      if (now.n <= c.n) this.#pending.delete(key);
      else this.#pending.set(key, { ...now, n: now.n - c.n });
    }
  }
}

export interface RefusalSummary {
  /** Refused requests in the window. */
  readonly total: number;
  /** By the bucket that refused: the principal's own, or the tenant's aggregate one. */
  readonly limited_by: { readonly principal: number; readonly tenant: number };
  /** The most refused principals first (ties by id); `*` stands for principals beyond the bound. */
  readonly by_principal: readonly { readonly principal_id: string; readonly n: number }[];
  /** Principals (and `*`) with a refusal in the window that `by_principal` leaves out. */
  readonly principals_left_out: number;
  /** The counted minutes: from the start of the window's first minute to its end. */
  readonly from_minute_unix_ms: number;
}

/** Sum `counts` over the minutes from `from`'s to `to`'s (both included). */
export function summarizeRefusals(
  counts: readonly RefusalCount[],
  from: number,
  to: number,
  top: number,
): RefusalSummary {
  const first = minuteOf(from);
  const last = minuteOf(to);
  let total = 0;
  const limited_by = { principal: 0, tenant: 0 };
  const per = new Map<string, number>();
  for (const c of counts) {
    if (c.minute < first || c.minute > last || c.n <= 0) continue;
    total += c.n;
    limited_by[c.limited_by] += c.n;
    per.set(c.principal_id, (per.get(c.principal_id) ?? 0) + c.n);
  }
  const ranked = [...per]
    .map(([principal_id, n]) => ({ principal_id, n }))
    .sort(
      (a, b) => b.n - a.n || (a.principal_id < b.principal_id ? -1 : a.principal_id > b.principal_id ? 1 : 0),
    );
  return {
    total,
    limited_by,
    by_principal: ranked.slice(0, top),
    principals_left_out: Math.max(0, ranked.length - top),
    from_minute_unix_ms: first,
  };
}
