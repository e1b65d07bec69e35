/**
 * `writ <command> ...`: the command table. Each command is a function of its arguments and the
 * injected I/O, returning an exit code; adding a command is adding a row.
 */
import { type CliIo, EXIT, type ExitCode } from './io.js';
import { APPROVALS_USAGE, runApprovals } from './approvals.js';
import { LAB_USAGE, runLabCommand } from './lab.js';
import { RECEIPT_USAGE, runReceipt } from './receipt.js';
import { TENANT_USAGE, runTenant } from './tenant.js';
import { VERIFY_USAGE, runVerify } from './verify.js';
import { CONFORMANCE_USAGE, runConformance } from './conformance.js';
import { METRICS_USAGE, runMetrics } from './metrics.js';

export interface Command {
  readonly summary: string;
  /** The command's own usage lines: `writ <command> --help` and `writ help <command>` print them. */
  readonly usage: string;
  readonly run: (argv: readonly string[], io: CliIo) => Promise<ExitCode>;
}

export const COMMANDS: Readonly<Record<string, Command>> = {
  verify: {
    summary: 'check a receipt bundle offline (signature, recomputation, log, witnesses)',
    usage: VERIFY_USAGE,
    run: runVerify,
  },
  receipt: {
    summary: 'get a stored receipt, or its replay verdict (get|replay <sha256>)',
    usage: RECEIPT_USAGE,
    run: runReceipt,
  },
  approvals: {
    summary: 'list, approve or deny approval requests (approver key)',
    usage: APPROVALS_USAGE,
    run: runApprovals,
  },
  metrics: {
    summary: 'the tenant’s security decisions as counts over a window (tenant admin key)',
    usage: METRICS_USAGE,
    run: runMetrics,
  },
  lab: {
    summary: 'run a laboratory (tools|observations), or the tool loop against --service',
    usage: LAB_USAGE,
    run: runLabCommand,
  },
  conformance: {
    summary: 'test an executor endpoint with valid and invalid receipts (keygen|executor <url>)',
    usage: CONFORMANCE_USAGE,
    run: runConformance,
  },
  // Shards: moving a tenant between D1 shards (platform admin token from WRIT_ADMIN_TOKEN).
  tenant: {
    summary: 'export a tenant as JSON lines, or import one onto a shard (export|import|upload|abort-import)',
    usage: TENANT_USAGE,
    run: runTenant,
  },
};

export function usage(): string {
  // One column for the summaries, however long the longest name (`conformance` ran into its own).
  const width = Math.max(...Object.keys(COMMANDS).map((n) => n.length));
  const rows = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`);
  return `usage: writ <command> [arguments]\n       writ help <command>   (or writ <command> --help)\n\ncommands:\n${rows.join('\n')}\n\nservice commands read WRIT_URL (or WRIT) and WRIT_KEY (or --url, --key; per-role WRIT_APPROVER_KEY or APPROVER_KEY, WRIT_ADMIN_KEY or ADMIN_KEY, ...)\n`;
}

export async function main(argv: readonly string[], io: CliIo): Promise<ExitCode> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || (name === 'help' && rest.length === 0)) {
    (name === undefined ? io.stderr : io.stdout)(usage());
    return name === undefined ? EXIT.usage : EXIT.ok;
  }
  // `writ help <command>` and `writ <command> --help` (or `-h`) as its first argument: the
  // command's usage on stdout, exit 0, nothing read or sent. Anywhere else `--help` is an argument
  // like any other (a reason text, a file name), left to the command.
  const helpFor = name === 'help' ? rest[0] : rest[0] === '--help' || rest[0] === '-h' ? name : undefined;
  const target = helpFor ?? name;
  const command = Object.prototype.hasOwnProperty.call(COMMANDS, target) ? COMMANDS[target] : undefined;
  if (command === undefined) {
    io.stderr(`writ: unknown command ${JSON.stringify(target.slice(0, 64))}\n${usage()}`);
    return EXIT.usage;
  }
  if (helpFor !== undefined) {
    io.stdout(`${command.summary}\n\n${command.usage.trimEnd()}\n`);
    return EXIT.ok;
  }
  return command.run(rest, io);
}
