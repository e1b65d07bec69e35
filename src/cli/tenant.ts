/**
 * `writ tenant export <tenant_id> [--freeze]` and `writ tenant import --shard N <file>`: move a
 * tenant between D1 shards (platform admin; docs/scaling.md, "Shards"); `writ tenant abort-import
 * --shard N <tenant_id>`: abort a staged import that will not be finished. The export is written to
 * stdout as canonical JSON lines, asked for in segments (any size) and failing (exit 1) unless
 * the last segment says it is the last; the import reads a file and prints what the service
 * answered, including each live principal's new key (shown once: hand them to their holders).
 * A file over one request (32 MiB) is uploaded in parts first, `writ tenant upload <file>` (it
 * prints the upload id), then imported with `writ tenant import --shard N --upload <id>`, which
 * calls again while the service answers that it is part-way, verifying or writing (progress on
 * stderr).
 *
 * The export is written to stdout as it arrives, and an upload reads its file one part at a time
 * (`CliIo.openFile`), hashing it as it goes: neither holds the whole file. An upload completes only
 * if the file's size when opened, the bytes read and its size at the end agree (a file still being
 * written would upload a prefix that may verify as a smaller tenant).
 *
 * The platform admin token comes only from the environment (`WRIT_ADMIN_TOKEN`), never from an
 * argument (a process listing would show it), and is never printed.
 * Exit 0: done. Exit 1: the service refused (its message and request id on stderr). Exit 2: usage.
 */
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import { type CliFileReader, type CliIo, EXIT, type ExitCode } from './io.js';
import { parseRemoteArgs } from './remote.js';

export const TENANT_USAGE =
  'usage: writ tenant export <tenant_id> [--freeze] [--url URL]\n       writ tenant import --shard N <file> [--url URL]\n       writ tenant upload <file> [--url URL]\n       writ tenant import --shard N --upload <upload_id> [--url URL]\n       writ tenant abort-import --shard N <tenant_id> [--url URL]\n(the platform admin token is read from WRIT_ADMIN_TOKEN)';

/** Parts of an upload: every part but the last this size (R2: at least 5 MiB, all equal). */
export const PART_BYTES = 16 * 1024 * 1024;
/**
 * Calls of one uploaded import before giving up: each verifies up to 64 MiB of reads or writes up
 * to 400 chunks, and a 10 GiB file whose references are checked in partitions reads it many times.
 */
const MAX_IMPORT_CALLS = 1_000_000;

export async function runTenant(argv: readonly string[], io: CliIo): Promise<ExitCode> {
  const args = parseRemoteArgs(argv, ['--shard', '--upload']);
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
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    // Segments, each read whole by the service; only the last says `writ-export-complete: true`.
    let body: Record<string, unknown> = { freeze, segmented: true };
    for (;;) {
      const res = await fetcher(
        new Request(`${base}/v1/tenants/${tenant_id}/export`, {
          method: 'POST',
          headers,
          body: JSON.stringify(body),
        }),
      );
      if (res.status !== 200) return failed(io, 'tenant export', res);
      // Written as it arrives: neither the export nor a segment is held whole.
      if (!(await copyOut(io, res))) {
        io.stderr('writ tenant export: the answer was cut off; the output is not a whole export\n');
        return EXIT.invalid;
      }
      const next = res.headers.get('writ-export-next');
      if (res.headers.get('writ-export-complete') === 'true') return EXIT.ok;
      if (next === null) {
        io.stderr(
          'writ tenant export: the service answered a segment without saying where the next starts\n',
        );
        return EXIT.invalid;
      }
      body = { after: next };
    }
  }
  if (sub === 'upload') {
    const [file, ...extra] = rest;
    if (file === undefined || extra.length > 0) return usage(io, 'upload takes one file');
    const cannotRead = `writ tenant upload: cannot read ${JSON.stringify(file.slice(0, 200))}`;
    let reader: CliFileReader;
    try {
      reader = await (io.openFile ?? ((p: string) => io.readFile(p).then(inMemory)))(file);
    } catch {
      io.stderr(`${cannotRead}\n`);
      return EXIT.invalid;
    }
    try {
      return await upload(io, fetcher, base, token, reader, cannotRead);
    } finally {
      await reader.close().catch(() => undefined);
    }
  }
  if (sub === 'import') {
    const shard = args.values.shard;
    const [file, ...extra] = rest;
    if (shard === undefined || !/^(0|[1-9][0-9]{0,3})$/.test(shard))
      return usage(io, 'import needs --shard N');
    const uploaded = args.values.upload;
    if (uploaded !== undefined) {
      if (rest.length > 0) return usage(io, 'import takes a file or --upload, not both');
      if (!/^[0-9a-f]{32}$/.test(uploaded)) return usage(io, '--upload takes an upload id');
      return importUploaded(io, fetcher, base, token, shard, uploaded);
    }
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

type Fetcher = (r: Request) => Promise<Response>;

/**
 * Create an upload, put the file in parts read one at a time (a part is the only piece of the
 * file in memory; the file may be larger than memory), hashing the whole file as it goes, and
 * complete it with that SHA-256; print the answer.
 */
async function upload(
  io: CliIo,
  fetcher: Fetcher,
  base: string,
  token: string,
  reader: CliFileReader,
  cannotRead: string,
) {
  let part: Uint8Array;
  let opened: number;
  try {
    opened = await reader.size();
    part = await readPart(reader);
  } catch {
    io.stderr(`${cannotRead}\n`);
    return EXIT.invalid;
  }
  if (part.byteLength === 0) return usage(io, 'the file is empty');
  const auth = { authorization: `Bearer ${token}` };
  const created = await fetcher(
    new Request(`${base}/v1/tenants/import-uploads`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: '{}',
    }),
  );
  if (created.status !== 201) return failed(io, 'tenant upload', created);
  const { upload_id } = (await created.json()) as { upload_id: string };
  const whole = sha256.create();
  const parts: { part_number: number; etag: string }[] = [];
  let read = 0;
  for (let n = 1; part.byteLength > 0; n++) {
    whole.update(part);
    read += part.byteLength;
    const res = await fetcher(
      new Request(`${base}/v1/tenants/import-uploads/${upload_id}/parts/${n}`, {
        method: 'PUT',
        headers: { ...auth, 'content-type': 'application/octet-stream' },
        body: part,
      }),
    );
    if (res.status !== 200) return failed(io, `tenant upload (part ${n} of upload ${upload_id})`, res);
    parts.push({ part_number: n, etag: ((await res.json()) as { etag: string }).etag });
    // A part shorter than `PART_BYTES` was cut by the end of the file.
    if (part.byteLength < PART_BYTES) break;
    try {
      part = await readPart(reader);
    } catch {
      io.stderr(`${cannotRead} (upload ${upload_id} is left open: abort it or upload again)\n`);
      return EXIT.invalid;
    }
  }
  // A file still being written (an export redirected to it, not finished yet) ends, for this
  // reader, at a line between two segments: completed, that prefix would import as a smaller
  // tenant. Its size when opened, what was read and its size now must agree.
  let now: number;
  try {
    now = await reader.size();
  } catch {
    io.stderr(`${cannotRead} (upload ${upload_id} is left open: abort it or upload again)\n`);
    return EXIT.invalid;
  }
  if (read !== opened || now !== opened) {
    io.stderr(
      `${cannotRead} whole: it changed while it was read (${opened} bytes when opened, ${read} read, ${now} now); upload ${upload_id} is left open and not completed: abort it, and upload the file once it is whole\n`,
    );
    return EXIT.invalid;
  }
  const res = await fetcher(
    new Request(`${base}/v1/tenants/import-uploads/${upload_id}/complete`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ parts, sha256: bytesToHex(whole.digest()) }),
    }),
  );
  if (res.status !== 200) return failed(io, `tenant upload (completing upload ${upload_id})`, res);
  io.stdout(`${JSON.stringify(await res.json(), null, 2)}\n`);
  return EXIT.ok;
}

/**
 * The next part: `PART_BYTES` bytes, fewer only at the end of the file (a reader may answer
 * short reads; R2 wants every part but the last the same size), none past it.
 */
async function readPart(reader: CliFileReader): Promise<Uint8Array> {
  const part = new Uint8Array(PART_BYTES);
  let filled = 0;
  while (filled < PART_BYTES) {
    const n = await reader.read(part.subarray(filled));
    if (!Number.isSafeInteger(n) || n < 0 || n > PART_BYTES - filled)
      throw new RangeError('the file reader answered an impossible length');
    if (n === 0) break;
    filled += n;
  }
  return part.subarray(0, filled);
}

/** A file already in memory, read as `openFile` reads one from disk. */
function inMemory(bytes: Uint8Array): CliFileReader {
  let at = 0;
  return {
    read: async (into) => {
      const n = Math.min(into.byteLength, bytes.byteLength - at);
      into.set(bytes.subarray(at, at + n));
      at += n;
      return n;
    },
    size: async () => bytes.byteLength,
    close: async () => undefined,
  };
}

/** Write an answer's body to stdout as it arrives; false if it was cut off. */
async function copyOut(io: CliIo, res: Response): Promise<boolean> {
  if (res.body === null) return true;
  // As `Response.text()` decodes (a malformed byte becomes U+FFFD), a piece at a time.
  const decoder = new TextDecoder();
  const reader = res.body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      const text = decoder.decode(value, { stream: true });
      if (text !== '') io.stdout(text);
    }
  } catch {
    return false;
  }
  const tail = decoder.decode();
  if (tail !== '') io.stdout(tail);
  return true;
}

/** Import an upload, calling again while the service answers it is part-way (202). */
async function importUploaded(
  io: CliIo,
  fetcher: Fetcher,
  base: string,
  token: string,
  shard: string,
  upload_id: string,
) {
  for (let call = 1; call <= MAX_IMPORT_CALLS; call++) {
    const res = await fetcher(
      new Request(`${base}/v1/tenants/import-uploads/${upload_id}/import?shard=${shard}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}` },
      }),
    );
    if (res.status === 201) {
      io.stdout(`${JSON.stringify(await res.json(), null, 2)}\n`);
      return EXIT.ok;
    }
    if (res.status !== 202) return failed(io, 'tenant import', res);
    const p = (await res.json()) as Record<string, unknown>;
    io.stderr(
      p.phase === 'verifying'
        ? `writ tenant import: verifying, read ${p.read}: ${p.bytes_read} of ${p.bytes_total} bytes, ${p.rows_verified} rows checked, going on\n`
        : `writ tenant import: ${p.rows_done} of ${p.rows_total} rows written, going on\n`,
    );
  }
  io.stderr(`writ tenant import: not finished after ${MAX_IMPORT_CALLS} calls; run it again to go on\n`);
  return EXIT.invalid;
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
