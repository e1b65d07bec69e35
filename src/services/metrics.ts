/**
 * `GET /v1/metrics` (tenant admin): the tenant's security decisions as numbers, for a window
 * (the spec's "measure security decisions as product behavior"): decisions by kind and outcome,
 * denials by violation, approval requests and decisions (expired ones apart), open operations with
 * their oldest update, overdue reconciliations, quarantined contracts.
 *
 * Guarantees: one tenant's rows only (the store is the tenant's); one D1 round trip for the counts
 * (after the policy read for the request TTL); every count walks a bounded number of rows
 * (`METRICS_SCAN_CAP`, the newest of the window for receipts) and says when it stopped there
 * (`complete: false`); violations are read from the newest `METRICS_DENIAL_SAMPLE` denied
 * authorization receipts, decoded and re-hashed like any stored receipt, and counted per code.
 * Rate-limit refusals (`rate_limited`) write no receipt: they are counted by the tenant's limiter
 * object per minute (src/core/limits/refusal-tally.ts), read through `refusals`, concurrently
 * with the counts; their window is the whole minutes it touches.
 * Never: a count from anything but stored rows and the limiter's counts, a window longer than
 * `METRICS_MAX_WINDOW_MS`, or a raw argument, input or approval text in the answer.
 */
import { z } from 'zod';
import type { RefusalSummary } from '../core/limits/refusal-tally.js';
import { approvalRequestTtlMs } from '../core/policy.js';
import { type TenantContext, ROLES_FOR, requireRole } from './context.js';
import { APPROVAL_STATUSES, OPEN_OPERATION_STATES } from './ports.js';

/** Rows any one count walks at most. */
export const METRICS_SCAN_CAP = 100_000;
/** Denied authorizations read back for their violations. */
export const METRICS_DENIAL_SAMPLE = 1_000;
export const METRICS_DEFAULT_WINDOW_MS = 86_400_000;
export const METRICS_MAX_WINDOW_MS = 7 * 86_400_000;

const WindowMs = z
  .string()
  .regex(/^[1-9][0-9]{0,9}$/, 'must be a positive integer of milliseconds')
  .transform(Number)
  .pipe(z.number().int().min(60_000).max(METRICS_MAX_WINDOW_MS));

/** `?window_ms=`: the window ends now; one minute to seven days, one day by default. */
export const MetricsQuery = z.strictObject({ window_ms: WindowMs.optional() });
export type MetricsQuery = z.infer<typeof MetricsQuery>;

/** The tenant's rate-limit refusals in the minutes from `from`'s to `to`'s (the limiter's counts). */
export type RefusalsOf = (from: number, to: number) => Promise<RefusalSummary>;

export async function getMetrics(ctx: TenantContext, q: MetricsQuery, refusals: RefusalsOf) {
  requireRole(ctx.caller, ROLES_FOR.admin);
  const now = ctx.now;
  const window_ms = q.window_ms ?? METRICS_DEFAULT_WINDOW_MS;
  const from = now - window_ms;
  const to = now + 1;
  const [ttl_ms, refused] = await Promise.all([
    ctx.store.currentPolicy().then((p) => approvalRequestTtlMs(p.policy)),
    refusals(from, now),
  ]);
  const c = await ctx.store.securityCounts({
    from,
    to,
    now,
    // A pending request is expired once `now - created >= ttl` (approvals.ts `viewStatus`).
    expired_before: now - ttl_ms + 1,
    scan_cap: METRICS_SCAN_CAP,
    denial_sample: METRICS_DENIAL_SAMPLE,
  });

  const by_kind: Record<string, Record<string, number>> = {};
  for (const r of [...c.receipts].sort((a, b) => cmp(a.kind, b.kind) || cmp(a.outcome, b.outcome))) {
    (by_kind[r.kind] ??= {})[r.outcome] = r.n;
  }
  const violations = new Map<string, number>();
  for (const receipt of c.denials) {
    const v = (receipt.body as { violations?: unknown }).violations;
    if (!Array.isArray(v)) continue;
    for (const code of v) if (typeof code === 'string') violations.set(code, (violations.get(code) ?? 0) + 1);
  }
  const statusCounts = (rows: readonly { status: string; n: number }[]) => {
    const out: Record<string, number> = {};
    for (const s of APPROVAL_STATUSES) out[s] = 0;
    for (const r of rows) out[r.status] = r.n;
    return out;
  };
  const requested = statusCounts(c.approvals_requested);
  const decided = statusCounts(c.approvals_decided);
  const open: Record<string, number> = {};
  let oldest: number | null = null;
  for (const s of OPEN_OPERATION_STATES) open[s] = 0;
  for (const r of c.operations_open) {
    open[r.state] = r.n;
    if (r.oldest_updated_at_unix_ms !== null && (oldest === null || r.oldest_updated_at_unix_ms < oldest)) {
      oldest = r.oldest_updated_at_unix_ms;
    }
  }
  return {
    tenant_id: ctx.caller.tenant_id,
    at_unix_ms: now,
    window: { from_unix_ms: from, to_unix_ms: now, window_ms },
    receipts: { by_kind, complete: c.receipts_complete },
    denials: {
      /** Most frequent first, then by code. */
      by_violation: [...violations]
        .map(([code, n]) => ({ code, n }))
        .sort((a, b) => b.n - a.n || cmp(a.code, b.code)),
      receipts_read: c.denials.length,
      /** False when more denials exist than were read (the newest are counted). */
      complete: c.denials_complete && c.receipts_complete,
    },
    approvals: {
      /** Requests created in the window, by status now; `expired` pending ones are also in `pending`. */
      requested: { ...requested, expired: c.approvals_expired },
      /** Requests decided in the window, by status now: `consumed` were approved, then used. */
      decided: {
        approved: decided.approved ?? 0,
        consumed: decided.consumed ?? 0,
        denied: decided.denied ?? 0,
      },
      complete: c.approvals_complete,
    },
    operations: {
      /** Now, whatever the window: in flight, awaiting reconciliation, escalated. */
      open,
      oldest_open_updated_at_unix_ms: oldest,
      oldest_open_age_ms: oldest === null ? null : Math.max(0, now - oldest),
      /** Awaiting reconciliation at or past the deadline (due for escalation), not yet escalated. */
      overdue_reconciliations: c.operations_overdue,
      complete: c.operations_complete,
    },
    contracts: { quarantined: c.contracts_quarantined, complete: c.contracts_complete },
    /** Writes refused `429 rate_limited` (no receipt), counted by the limiter per whole minute. */
    rate_limited: {
      total: refused.total,
      limited_by: refused.limited_by,
      by_principal: refused.by_principal,
      principals_left_out: refused.principals_left_out,
      from_minute_unix_ms: refused.from_minute_unix_ms,
    },
  };
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
