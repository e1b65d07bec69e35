/**
 * Quota refusals raised by the triggers of migrations/0002 (`RAISE(ABORT, 'quota_exceeded:<name>')`),
 * turned into the `quota_exceeded` service error with its `Retry-After`.
 *
 * The check and the usage update are triggers on the very insert that stores the row, so a
 * quota never costs a round trip of its own and a refused write leaves nothing behind (the
 * statement, or the whole batch, aborts).
 */
import { QUOTA_NAMES, type QuotaName } from '../services/ports.js';
import { ServiceError } from '../services/errors.js';

export const DAY_MS = 86_400_000;

/** Seconds a client waits before retrying against a stock quota (bytes, open runs, approvals). */
export const STOCK_RETRY_AFTER_SECONDS = 60;

/** The UTC day number the receipts-per-day window counts (as the trigger computes it). */
export function utcDay(now: number): number {
  return Math.floor(now / DAY_MS);
}

/** True when `e` (or one of its causes) carries a trigger's `RAISE` message containing `message`. */
export function hasTriggerMessage(e: unknown, message: string): boolean {
  let cur: unknown = e;
  for (let depth = 0; depth < 4 && cur instanceof Error; depth++) {
    if (cur.message.includes(message)) return true;
    cur = cur.cause;
  }
  return false;
}

export function quotaViolation(e: unknown): QuotaName | null {
  return QUOTA_NAMES.find((q) => hasTriggerMessage(e, `quota_exceeded:${q}`)) ?? null;
}

const WHAT: Record<QuotaName, string> = {
  stored_bytes: 'stored bytes',
  receipts_per_day: 'receipts per day',
  open_approvals: 'open approval requests',
  open_runs: 'open runs',
};

export function quotaError(quota: QuotaName, now: number): ServiceError {
  const retryAfter =
    quota === 'receipts_per_day'
      ? Math.max(1, Math.ceil(((utcDay(now) + 1) * DAY_MS - now) / 1000))
      : STOCK_RETRY_AFTER_SECONDS;
  return new ServiceError(
    'quota_exceeded',
    `tenant quota exceeded: ${WHAT[quota]}; nothing was written`,
    [],
    retryAfter,
  );
}

/** Rethrow a quota refusal as `quota_exceeded`; any other error is left to the caller. */
export function throwIfQuota(e: unknown, now: number): void {
  const quota = quotaViolation(e);
  if (quota !== null) throw quotaError(quota, now);
}

/** Await a write, mapping a quota refusal to `quota_exceeded`. */
export async function quotaChecked<T>(write: Promise<T>, now: number): Promise<T> {
  try {
    return await write;
  } catch (e) {
    throwIfQuota(e, now);
    throw e;
  }
}
