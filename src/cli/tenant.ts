/**
 * `writ tenant export <tenant_id> [--freeze]` and `writ tenant import --shard N <file>`: move a
 * tenant between D1 shards (platform admin; docs/scaling.md, "Shards"); `writ tenant abort-import
 * --shard N <tenant_id>`: abort a staged import that will not be finished. The export is written to
 * stdout as canonical JSON lines; the import reads a file and prints what the service answered,
 * including each live principal's new key (shown once: hand them to their holders).
 *
 * The platform admin token comes only from the environment (`WRIT_ADMIN_TOKEN`), never from an
 * argument (a process listing would show it), and is never printed.
 * Exit 0: done. Exit 1: the service refused (its message and request id on stderr). Exit 2: usage.
 */
import { type CliIo, EXIT, type ExitCode } from './io.js';
import { parseRemoteArgs } from './remote.js';

export const TENANT_USAGE =
  'usage: writ tenant export <tenant_id> [--freeze] [--url URL]\n       writ tenant import --shard N <file> [--url URL]\n       writ tenant abort-import --shard N <tenant_id> [--url URL]\n(the platform admin token is read from WRIT_ADMIN_TOKEN)';

export async function runTenant(argv: readonly string[], io: CliIo): Promise<ExitCode> {
  const args = parseRemoteArgs(argv, ['--shard']);
  if (typeof args === 'string') return usage(io, args);
  if (args.key !== null)
    return usage(io, 'the platform admin token is read from WRIT_ADMIN_TOKEN, not --key');
  const env = io.env ?? {};
  const url = args.url ?? env.WRIT_URL;
  const token = env.WRIT_ADMIN_TOKEN;
  if (url === undefined || url === '') return usage(io, 'no service URL: pass --url or set WRIT_URL');
  if (token === undefined || token === '') return usage(io, 'no platform admin token: set WRIT_ADMIN_TOKEN');
  const fetcher = io.fetch ?? ((r: Request) => fetch(r));
  const base = url.replace(/\/+$/, '');
  const [sub, ...rest] = args.rest;
  if (sub === 'export') {
    const freeze = rest.includes('--freeze');
    const positional = rest.filter((a) => a !== '--freeze');
    const [tenant_id, ...extra] = positional;
    if (tenant_id === undefined || extra.length > 0 || !/^[a-z0-9][a-z0-9-]{0,127}$/.test(tenant_id)) {
      return usage(io, 'export takes one tenant id');
    }
    const res = await fetcher(
      new Request(`${base}/v1/tenants/${tenant_id}/export`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ freeze }),
      }),
    );
    if (res.status !== 200) return failed(io, 'tenant export', res);
    io.stdout(await res.text());
    return EXIT.ok;
  }
  if (sub === 'import') {
    const shard = args.values.shard;
    const [file, ...extra] = rest;
    if (shard === undefined || !/^(0|[1-9][0-9]{0,3})$/.test(shard))
      return usage(io, 'import needs --shard N');
    if (file === undefined || extra.length > 0) return usage(io, 'import takes one file');
    let bytes: Uint8Array;
    try {
      bytes = await io.readFile(file);
    } catch {
      io.stderr(`writ tenant import: cannot read ${JSON.stringify(file.slice(0, 200))}\n`);
      return EXIT.invalid;
    }
    const res = await fetcher(
      new Request(`${base}/v1/tenants/import?shard=${shard}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/x-ndjson' },
        body: bytes,
      }),
    );
    if (res.status !== 201) return failed(io, 'tenant import', res);
    io.stdout(`${JSON.stringify(await res.json(), null, 2)}\n`);
    return EXIT.ok;
  }
  if (sub === 'abort-import') {
    const shard = args.values.shard;
    const [tenant_id, ...extra] = rest;
    if (shard === undefined || !/^(0|[1-9][0-9]{0,3})$/.test(shard))
      return usage(io, 'abort-import needs --shard N');
    if (tenant_id === undefined || extra.length > 0 || !/^[a-z0-9][a-z0-9-]{0,127}$/.test(tenant_id))
      return usage(io, 'abort-import takes one tenant id');
    const res = await fetcher(
      new Request(`${base}/v1/tenants/import/${tenant_id}/abort?shard=${shard}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}` },
      }),
    );
    if (res.status !== 200) return failed(io, 'tenant abort-import', res);
    io.stdout(`${JSON.stringify(await res.json(), null, 2)}\n`);
    return EXIT.ok;
  }
  return usage(io, sub === undefined ? 'missing subcommand' : `unknown subcommand "${sub.slice(0, 32)}"`);
}

async function failed(io: CliIo, name: string, res: Response): Promise<ExitCode> {
  let message = `HTTP ${res.status}`;
  try {
    const body = (await res.json()) as { error?: { message?: string; request_id?: string } };
    if (body.error?.message !== undefined) message = body.error.message;
    if (body.error?.request_id !== undefined) message += ` (request ${body.error.request_id})`;
  } catch {
    // not a JSON error body: the status says enough
  }
  io.stderr(`writ ${name}: ${message}\n`);
  return EXIT.invalid;
}

function usage(io: CliIo, problem: string): ExitCode {
  io.stderr(`writ tenant: ${problem}\n${TENANT_USAGE}\n`);
  return EXIT.usage;
}
