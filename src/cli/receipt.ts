/**
 * `writ receipt get <sha256>` and `writ receipt replay <sha256>`: a stored receipt of the key's
 * tenant (`GET /v1/receipts/{sha256}`), whole or as its replay verdict.
 *
 * Exit 0: found (and, for `replay`, the recomputation matches). Exit 1: the service refused or the
 * replay found differences. Exit 2: usage.
 */
import { type CliIo, EXIT, type ExitCode } from './io.js';
import { clientFor, describeFailure, parseRemoteArgs, remoteTarget, table } from './remote.js';

export const RECEIPT_USAGE = 'usage: writ receipt get|replay <sha256> [--url URL] [--key KEY] [--json]';

export async function runReceipt(argv: readonly string[], io: CliIo): Promise<ExitCode> {
  const args = parseRemoteArgs(argv);
  if (typeof args === 'string') return usage(io, args);
  const [sub, sha, ...extra] = args.rest;
  if (sub !== 'get' && sub !== 'replay')
    return usage(io, sub === undefined ? 'missing subcommand' : `unknown subcommand "${sub.slice(0, 32)}"`);
  if (extra.length > 0) return usage(io, `unexpected "${extra[0]?.slice(0, 32)}"`);
  if (sha === undefined || !/^[0-9a-f]{64}$/.test(sha))
    return usage(io, 'the receipt digest is 64 lowercase hex characters');
  const target = remoteTarget(args, io, 'approver');
  if (typeof target === 'string') return usage(io, target);
  const name = `receipt ${sub}`;
  try {
    const r = await clientFor(target, io, name).getReceipt(sha);
    const replay = r.replay as { ok?: unknown; differences?: unknown } | null;
    if (sub === 'get') {
      io.stdout(
        args.json
          ? `${JSON.stringify(r)}\n`
          : table([
              ['kind', String(r.kind)],
              ['outcome', String(r.outcome)],
              ['sha256', r.receipt.sha256],
              ['created', new Date(r.created_at_unix_ms).toISOString()],
              ['replay', replay === null ? 'not applicable' : replay.ok === true ? 'ok' : 'DIFFERENCES'],
            ]) + `\n${JSON.stringify(r.receipt.body, null, 2)}\n`,
      );
      return EXIT.ok;
    }
    const differences = Array.isArray(replay?.differences)
      ? (replay.differences as unknown[]).map(String)
      : [];
    const verdict = {
      sha256: r.receipt.sha256,
      kind: r.kind,
      outcome: r.outcome,
      replay: replay === null ? 'not_applicable' : replay.ok === true ? 'ok' : 'differences',
      differences,
    };
    if (args.json) io.stdout(`${JSON.stringify(verdict)}\n`);
    else if (replay === null)
      io.stdout(`${r.kind} receipt ${sha}: ${r.kind} receipts are not replayed by the service\n`);
    else if (replay.ok === true)
      io.stdout(`REPLAY OK ${r.kind} receipt ${sha} (${String(r.outcome)}): recomputed from its evidence\n`);
    else io.stdout(`REPLAY DIFFERS ${r.kind} receipt ${sha}: ${differences.join(', ')}\n`);
    return replay === null || replay.ok === true ? EXIT.ok : EXIT.invalid;
  } catch (e) {
    io.stderr(describeFailure(name, e));
    return EXIT.invalid;
  }
}

function usage(io: CliIo, why: string): ExitCode {
  io.stderr(`writ receipt: ${why}\n${RECEIPT_USAGE}\n`);
  return EXIT.usage;
}
