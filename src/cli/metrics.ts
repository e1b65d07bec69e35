/**
 * `writ metrics [--window 15m|24h|7d|<ms>] [--url URL] [--key KEY] [--json]`: the tenant's
 * security decisions over a window ending now (`GET /v1/metrics`), with the tenant admin's key.
 * Printed as sections of counts; `--json` prints the service's answer unchanged.
 *
 * Exit 0: printed. Exit 1: the service refused (not an admin key, ...). Exit 2: usage.
 */
import type { SecurityMetrics } from '../client/index.js';
import { type CliIo, EXIT, type ExitCode } from './io.js';
import { clientFor, describeFailure, parseRemoteArgs, remoteTarget, table } from './remote.js';

export const METRICS_USAGE =
  'usage: writ metrics [--window 15m|24h|7d|<milliseconds>] [--url URL] [--key KEY] [--json]';

const UNIT_MS: Readonly<Record<string, number>> = { m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `15m`, `24h`, `7d` or plain milliseconds; null for anything else (the service bounds the range). */
export function parseWindow(text: string): number | null {
  const m = /^([1-9][0-9]{0,9})(m|h|d)?$/.exec(text);
  if (m === null) return null;
  const n = Number(m[1]) * (m[2] === undefined ? 1 : (UNIT_MS[m[2]] as number));
  return Number.isSafeInteger(n) ? n : null;
}

export async function runMetrics(argv: readonly string[], io: CliIo): Promise<ExitCode> {
  const args = parseRemoteArgs(argv, ['--window']);
  if (typeof args === 'string') return usage(io, args);
  if (args.rest.length > 0) return usage(io, `unexpected "${args.rest[0]?.slice(0, 32)}"`);
  const w = args.values.window;
  const windowMs = w === undefined ? undefined : parseWindow(w);
  if (windowMs === null)
    return usage(io, '--window is a number of minutes (15m), hours (24h), days (7d) or ms');
  const target = remoteTarget(args, io, 'admin');
  if (typeof target === 'string') return usage(io, target);
  try {
    const m = await clientFor(target, io, 'metrics').metrics(windowMs);
    io.stdout(args.json ? `${JSON.stringify(m)}\n` : render(m));
    return EXIT.ok;
  } catch (e) {
    io.stderr(describeFailure('metrics', e));
    return EXIT.invalid;
  }
}

/** The answer as text sections: counts by name, `(partial)` where a count stopped at its bound. */
export function render(m: SecurityMetrics): string {
  const partial = (complete: boolean) => (complete ? '' : ' (partial: stopped at its bound)');
  const from = new Date(m.window.from_unix_ms).toISOString();
  const to = new Date(m.window.to_unix_ms).toISOString();
  const out: string[] = [`tenant ${m.tenant_id}, ${from} to ${to}\n`];
  const receiptRows: string[][] = [];
  for (const [kind, outcomes] of Object.entries(m.receipts.by_kind)) {
    for (const [outcome, n] of Object.entries(outcomes)) receiptRows.push([kind, outcome, String(n)]);
  }
  out.push(`\nreceipts${partial(m.receipts.complete)}\n`);
  out.push(receiptRows.length === 0 ? 'none\n' : table([['kind', 'outcome', 'count'], ...receiptRows]));
  out.push(`\ndenials by violation (${m.denials.receipts_read} read)${partial(m.denials.complete)}\n`);
  out.push(
    m.denials.by_violation.length === 0
      ? 'none\n'
      : table([['violation', 'count'], ...m.denials.by_violation.map((v) => [v.code, String(v.n)])]),
  );
  out.push(`\napprovals${partial(m.approvals.complete)}\n`);
  // One table: requests created in the window and those decided in it, by status now.
  const statuses = [...new Set([...Object.keys(m.approvals.requested), ...Object.keys(m.approvals.decided)])];
  const cells = (counts: Readonly<Record<string, number>>) => statuses.map((st) => String(counts[st] ?? '-'));
  out.push(
    table([
      ['', ...statuses],
      ['requested', ...cells(m.approvals.requested)],
      ['decided', ...cells(m.approvals.decided)],
    ]),
  );
  const o = m.operations;
  out.push(`\noperations now${partial(o.complete)}\n`);
  out.push(table([[...Object.keys(o.open)], [...Object.values(o.open).map(String)]]));
  out.push(
    `oldest open: ${o.oldest_open_age_ms === null ? 'none' : `${Math.round(o.oldest_open_age_ms / 1000)} s since its last update`}; overdue reconciliations: ${o.overdue_reconciliations}\n`,
  );
  out.push(`\nquarantined contracts${partial(m.contracts.complete)}: ${m.contracts.quarantined}\n`);
  const r = m.rate_limited;
  out.push(
    `\nwrites refused by the rate limit since ${new Date(r.from_minute_unix_ms).toISOString()}: ${r.total} (principal limit ${r.limited_by.principal}, tenant limit ${r.limited_by.tenant})\n`,
  );
  if (r.by_principal.length > 0) {
    out.push(table([['principal', 'refused'], ...r.by_principal.map((p) => [p.principal_id, String(p.n)])]));
  }
  if (r.principals_left_out > 0) out.push(`and ${r.principals_left_out} more principals\n`);
  return out.join('');
}

function usage(io: CliIo, why: string): ExitCode {
  io.stderr(`writ metrics: ${why}\n${METRICS_USAGE}\n`);
  return EXIT.usage;
}
