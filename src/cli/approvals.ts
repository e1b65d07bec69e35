/**
 * `writ approvals list [--status pending|expired|approved|denied|consumed]`, `writ approvals approve <id>
 * [--expires-in-ms N] [--reason TEXT]`, `writ approvals deny <id> [--reason TEXT]`: the
 * approver's side of an approval, with the approver's key.
 *
 * Exit 0: done. Exit 1: the service refused (already decided, self-approval, ...). Exit 2: usage.
 */
import type { Approval, ApprovalStatus } from '../client/index.js';
import { type CliIo, EXIT, type ExitCode } from './io.js';
import { clientFor, describeFailure, parseRemoteArgs, remoteTarget, table } from './remote.js';

export const APPROVALS_USAGE = [
  'usage: writ approvals list [--status pending|expired|approved|denied|consumed] [--url URL] [--key KEY] [--json]',
  '       writ approvals approve <approval_id> [--expires-in-ms N] [--reason TEXT] [--json]',
  '       writ approvals deny <approval_id> [--reason TEXT] [--json]',
].join('\n');

const STATUSES: readonly ApprovalStatus[] = ['pending', 'expired', 'approved', 'denied', 'consumed'];

export async function runApprovals(argv: readonly string[], io: CliIo): Promise<ExitCode> {
  const args = parseRemoteArgs(argv, ['--status', '--expires-in-ms', '--reason']);
  if (typeof args === 'string') return usage(io, args);
  const [sub, id, ...extra] = args.rest;
  if (extra.length > 0) return usage(io, `unexpected "${extra[0]?.slice(0, 32)}"`);
  const target = remoteTarget(args, io, 'approver');
  if (typeof target === 'string') return usage(io, target);
  const { status, reason } = args.values;
  const expires = args.values['expires-in-ms'];
  try {
    if (sub === 'list') {
      if (id !== undefined) return usage(io, 'list takes no id');
      if (reason !== undefined || expires !== undefined) return usage(io, 'list takes only --status');
      const s = status ?? 'pending';
      if (!STATUSES.includes(s as ApprovalStatus))
        return usage(io, `--status is one of ${STATUSES.join(', ')}`);
      const list = await clientFor(target, io, 'approvals list').listApprovals(s as ApprovalStatus);
      if (args.json) io.stdout(`${JSON.stringify(list)}\n`);
      else if (list.items.length === 0) io.stdout(`no ${s} approval requests\n`);
      else
        io.stdout(
          table([['approval', 'status', 'tool', 'effect', 'requester', 'input'], ...list.items.map(row)]),
        );
      return EXIT.ok;
    }
    if (sub === 'approve' || sub === 'deny') {
      if (id === undefined || !/^apr-[a-z0-9]{1,64}$/.test(id))
        return usage(io, 'an approval id (apr-...) is required');
      if (status !== undefined) return usage(io, `${sub} takes no --status`);
      if (sub === 'deny' && expires !== undefined) return usage(io, 'deny takes no --expires-in-ms');
      let expires_in_ms: number | undefined;
      if (expires !== undefined) {
        if (!/^[1-9][0-9]{0,11}$/.test(expires)) return usage(io, '--expires-in-ms is a positive integer');
        expires_in_ms = Number(expires);
      }
      const c = clientFor(target, io, `approvals ${sub}`);
      const body = {
        ...(reason === undefined ? {} : { reason }),
        ...(expires_in_ms === undefined ? {} : { expires_in_ms }),
      };
      const a = sub === 'approve' ? await c.approve(id, body) : await c.deny(id, body);
      if (args.json) io.stdout(`${JSON.stringify(a)}\n`);
      else {
        const until =
          a.expires_at_unix_ms === null ? '' : ` until ${new Date(a.expires_at_unix_ms).toISOString()}`;
        io.stdout(`${a.approval_id} ${a.status}${until} (input_sha256 ${a.input_sha256})\n`);
      }
      return EXIT.ok;
    }
  } catch (e) {
    io.stderr(describeFailure(`approvals ${sub ?? ''}`, e));
    return EXIT.invalid;
  }
  return usage(io, sub === undefined ? 'missing subcommand' : `unknown subcommand "${sub.slice(0, 32)}"`);
}

function row(a: Approval): string[] {
  const preview = a.preview as { tool_name?: unknown };
  return [
    a.approval_id,
    a.status,
    typeof preview.tool_name === 'string' ? preview.tool_name : '?',
    String(a.effect),
    a.requester_principal_id,
    JSON.stringify(a.input).slice(0, 80),
  ];
}

function usage(io: CliIo, why: string): ExitCode {
  io.stderr(`writ approvals: ${why}\n${APPROVALS_USAGE}\n`);
  return EXIT.usage;
}
