/**
 * Shared by the commands that talk to a running Writ: flags and environment for the base URL and
 * the key, the client built from them, tables for people, and how an API error is printed.
 *
 * Keys come from `--key` or the environment (`WRIT_KEY`, or a per-role variable such as
 * `WRIT_APPROVER_KEY`, or the names `npm run dev` exports: `APPROVER_KEY`, ...). A key is never
 * printed: not in a table, not in `--json`, not in an error.
 */
import { WritApiError, WritGaveUpError, createWritClient, type WritClient } from '../client/index.js';
import type { CliIo } from './io.js';

export interface RemoteArgs {
  readonly url: string | null;
  readonly key: string | null;
  readonly json: boolean;
  /** Positional arguments and flags this parser does not know, in order. */
  readonly rest: readonly string[];
  /** Values of other `--name value` flags the caller declared. */
  readonly values: Readonly<Record<string, string>>;
}

/** Parse `--url`, `--key`, `--json` and the declared valued flags; anything else is left in `rest`. */
export function parseRemoteArgs(
  argv: readonly string[],
  valued: readonly string[] = [],
): RemoteArgs | string {
  let url: string | null = null;
  let key: string | null = null;
  let json = false;
  const rest: string[] = [];
  const values: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--json') json = true;
    else if (a === '--url' || a === '--key' || valued.includes(a)) {
      const v = argv[++i];
      if (v === undefined || v.startsWith('--')) return `${a} needs a value`;
      if (a === '--url') url = v;
      else if (a === '--key') key = v;
      else values[a.slice(2)] = v;
    } else rest.push(a);
  }
  return { url, key, json, rest, values };
}

export type Role = 'agent' | 'approver' | 'executor' | 'admin';

const ROLE_ENV: Record<Role, readonly string[]> = {
  agent: ['WRIT_AGENT_KEY', 'AGENT_KEY'],
  approver: ['WRIT_APPROVER_KEY', 'APPROVER_KEY'],
  executor: ['WRIT_EXECUTOR_KEY', 'EXECUTOR_KEY'],
  admin: ['WRIT_ADMIN_KEY', 'ADMIN_KEY'],
};

/** The base URL and key for `role`, or a message naming what is missing (never a key). */
export function remoteTarget(args: RemoteArgs, io: CliIo, role: Role): { url: string; key: string } | string {
  const env = io.env ?? {};
  const pick = (names: readonly string[]) =>
    names.map((n) => env[n]).find((v) => v !== undefined && v !== '');
  const url = args.url ?? pick(['WRIT_URL', 'WRIT']);
  // The generic WRIT_KEY wins over the per-role names: it is what a user sets on purpose.
  const key = args.key ?? pick(['WRIT_KEY', ...ROLE_ENV[role]]);
  if (url === undefined) return 'no service URL: pass --url or set WRIT_URL (or WRIT)';
  if (key === undefined) return `no key: pass --key or set WRIT_KEY (or ${ROLE_ENV[role].join(' / ')})`;
  return { url, key };
}

export function clientFor(target: { url: string; key: string }, io: CliIo, name: string): WritClient {
  return createWritClient({
    baseUrl: target.url,
    key: target.key,
    ...(io.fetch === undefined ? {} : { fetch: io.fetch }),
    ...(io.sleep === undefined ? {} : { sleep: io.sleep }),
    onRetry: (e) => io.stderr(`writ ${name}: ${e.code} on ${e.operation}, retrying in ${e.waitMs} ms\n`),
  });
}

/** Print a failed call: the wire code and message with the request id, nothing of the request. */
export function describeFailure(name: string, e: unknown): string {
  if (e instanceof WritApiError) {
    const issues = e.issues.map((i) => `\n  ${i.path}: ${i.message}`).join('');
    return `writ ${name}: ${e.message}${e.requestId === null ? '' : ` (request ${e.requestId})`}${issues}\n`;
  }
  if (e instanceof WritGaveUpError) return `writ ${name}: ${e.message}\n`;
  // A network failure: say so without the URL's credentials (there are none in it) or a stack.
  return `writ ${name}: ${e instanceof Error ? e.message : String(e)}\n`;
}

/** A plain text table: columns padded to their widest cell. */
export function table(rows: readonly (readonly string[])[]): string {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  return `${rows
    .map((row) =>
      row
        .map((cell, i) => cell.padEnd(widths[i] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n')}\n`;
}
