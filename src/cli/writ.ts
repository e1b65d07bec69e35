/**
 * `writ <command> ...`: the command table. Each command is a function of its arguments and the
 * injected I/O, returning an exit code; adding a command is adding a row.
 */
import { type CliIo, EXIT, type ExitCode } from './io.js';
import { runApprovals } from './approvals.js';
import { runLabCommand } from './lab.js';
import { runReceipt } from './receipt.js';
import { runTenant } from './tenant.js';
import { runVerify } from './verify.js';
import { runConformance } from './conformance.js';
import { runMetrics } from './metrics.js';

export interface Command {
  readonly summary: string;
  readonly run: (argv: readonly string[], io: CliIo) => Promise<ExitCode>;
}

export const COMMANDS: Readonly<Record<string, Command>> = {
  verify: {
    summary: 'check a receipt bundle offline (signature, recomputation, log, witnesses)',
    run: runVerify,
  },
  receipt: { summary: 'get a stored receipt, or its replay verdict (get|replay <sha256>)', run: runReceipt },
  approvals: { summary: 'list, approve or deny approval requests (approver key)', run: runApprovals },
  metrics: {
    summary: 'the tenant’s security decisions as counts over a window (tenant admin key)',
    run: runMetrics,
  },
  lab: {
    summary: 'run a laboratory (tools|observations), or the tool loop against --service',
    run: runLabCommand,
  },
  conformance: {
    summary: 'test an executor endpoint with valid and invalid receipts (keygen|executor <url>)',
    run: runConformance,
  },
  // Shards: moving a tenant between D1 shards (platform admin token from WRIT_ADMIN_TOKEN).
  tenant: {
    summary: 'export a tenant as JSON lines, or import one onto a shard (export|import|upload|abort-import)',
    run: runTenant,
  },
};

export function usage(): string {
  const rows = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(10)} ${c.summary}`);
  return `usage: writ <command> [arguments]\n\ncommands:\n${rows.join('\n')}\n\nservice commands read WRIT_URL and WRIT_KEY (or --url, --key; per-role WRIT_APPROVER_KEY, WRIT_ADMIN_KEY, ...)\n`;
}

export async function main(argv: readonly string[], io: CliIo): Promise<ExitCode> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    (name === undefined ? io.stderr : io.stdout)(usage());
    return name === undefined ? EXIT.usage : EXIT.ok;
  }
  const command = Object.prototype.hasOwnProperty.call(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (command === undefined) {
    io.stderr(`writ: unknown command ${JSON.stringify(name.slice(0, 64))}\n${usage()}`);
    return EXIT.usage;
  }
  return command.run(rest, io);
}
