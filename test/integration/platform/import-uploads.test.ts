/**
 * A tenant export larger than one request (src/services/import-uploads.ts, src/db/import-uploads.ts):
 * uploaded in parts to R2 (local R2 here, with R2's real part rules), completed against the digest
 * the operator expects, then imported from the bucket as a stream: verified whole before any
 * write, written staged in budgeted calls, resumable.
 */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { sha256Hex, canonicalize, digestOf } from '../../../src/core/canonical/canonical.js';
import { importUploadStore, tenantMovePort } from '../../../src/platform/bindings.js';
import {
  IMPORT_PART_MIN_BYTES,
  VERIFICATION_RULES,
  importUpload,
} from '../../../src/services/import-uploads.js';
import {
  type KeptVerification,
  openKept,
  sealKept,
} from '../../../src/services/import-verification-state.js';
import type { TenantMovePort } from '../../../src/services/ports.js';
import {
  MAX_IMPORT_BYTES,
  exportTenantText,
  textSource,
  verifySource,
} from '../../../src/services/tenant-moves.js';
import {
  ADMIN_TOKEN,
  BASE,
  call,
  countOn,
  directoryShard,
  tenantRowsOn,
  seedTenant,
  shardD1,
  shardOf,
  workerFetch,
  exportTenant,
  exportedTenant,
} from './harness.js';

const encode = (text: string) => new TextEncoder().encode(text);
const noLog = () => undefined;
const OCTETS = { 'content-type': 'application/octet-stream' };

const createUpload = async () => {
  const r = await call('POST', '/v1/tenants/import-uploads', { key: ADMIN_TOKEN });
  expect(r.status).toBe(201);
  return r.body.upload_id as string;
};

const putPart = (id: string, n: number | string, bytes: Uint8Array) =>
  call('PUT', `/v1/tenants/import-uploads/${id}/parts/${n}`, {
    key: ADMIN_TOKEN,
    raw: bytes,
    headers: OCTETS,
  });

/** Upload `bytes` in parts of `partBytes` and complete with `sha256` (the bytes' own by default). */
async function upload(bytes: Uint8Array, partBytes = IMPORT_PART_MIN_BYTES, sha256 = sha256Hex(bytes)) {
  const id = await createUpload();
  const parts: { part_number: number; etag: string }[] = [];
  for (let at = 0, n = 1; at < bytes.byteLength; at += partBytes, n++) {
    const r = await putPart(id, n, bytes.subarray(at, at + partBytes));
    expect(r.status).toBe(200);
    parts.push({ part_number: n, etag: r.body.etag as string });
  }
  const done = await call('POST', `/v1/tenants/import-uploads/${id}/complete`, {
    key: ADMIN_TOKEN,
    body: { parts, sha256 },
  });
  return { id, parts, done };
}

const importCall = (id: string, shard: number) =>
  call('POST', `/v1/tenants/import-uploads/${id}/import?shard=${shard}`, { key: ADMIN_TOKEN });

/** The real port, with chunk number `failAt` (1-based) failing before it reaches D1. */
function failingPort(failAt: number) {
  const real = tenantMovePort(env);
  const seen = { chunks: 0 };
  const port: TenantMovePort = {
    ...real,
    async importChunk(shard, s, chunk, now) {
      seen.chunks += 1;
      if (seen.chunks === failAt) throw new Error('injected failure in the middle chunk');
      return real.importChunk(shard, s, chunk, now);
    },
  };
  return { port, seen };
}

/** The sealing key and what a kept verification of upload `id` must be bound to. */
async function keptBinding(id: string) {
  const store = importUploadStore(env);
  const record = await store.record(id);
  if (record?.status !== 'complete') throw new Error('not completed');
  const { sha256, version } = record;
  return {
    key: await store.sealKey(),
    binding: { upload_id: id, sha256, version, rules: VERIFICATION_RULES },
  };
}

async function nothingWritten(to: number, tenant_id: string) {
  expect(await tenantRowsOn(to, tenant_id)).toBe(0);
  expect(await countOn(to, 'SELECT count(*) AS n FROM tenant_imports WHERE tenant_id = ?', tenant_id)).toBe(
    0,
  );
  expect(
    await countOn(to, 'SELECT count(*) AS n FROM tenant_import_principals WHERE tenant_id = ?', tenant_id),
  ).toBe(0);
}

describe('an export uploaded in parts', () => {
  it('imports onto the other shard and goes live, as the single request does', async () => {
    const { s, receipts, text, lines } = await exportedTenant('upl-small');
    const from = shardOf(s);
    const to = 1 - from;
    const { id, done } = await upload(encode(text));
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ upload_id: id, sha256: sha256Hex(encode(text)), parts: 1 });
    const imported = await importCall(id, to);
    expect(imported.status).toBe(201);
    expect(imported.body).toMatchObject({
      tenant_id: s.tenant_id,
      shard: to,
      previous_shard: from,
      rows: lines,
    });
    expect(await tenantRowsOn(to, s.tenant_id)).toBe(lines);
    const keys = imported.body.keys as { principal_id: string; api_key: string }[];
    const admin = keys.find((k) => k.principal_id === s.admin.principal_id)?.api_key as string;
    for (const sha of receipts)
      expect((await call('GET', `/v1/receipts/${sha}`, { key: admin })).status).toBe(200);
    expect(await directoryShard(s.tenant_id)).toBe(to);
    // Deleting the file afterwards: gone from the bucket, the id unknown.
    expect((await call('POST', `/v1/tenants/import-uploads/${id}/abort`, { key: ADMIN_TOKEN })).status).toBe(
      200,
    );
    expect(await env.BLOBS.head(`imports/uploads/${id}`)).toBeNull();
    expect((await importCall(id, to)).status).toBe(404);
  });

  it('refuses parts listed out of order or with one missing, before R2 completes anything', async () => {
    const id = await createUpload();
    const first = await putPart(id, 1, new Uint8Array(IMPORT_PART_MIN_BYTES).fill(0x61));
    const second = await putPart(id, 2, encode('tail\n'));
    expect([first.status, second.status]).toEqual([200, 200]);
    const p1 = { part_number: 1, etag: first.body.etag as string };
    const p2 = { part_number: 2, etag: second.body.etag as string };
    const complete = (parts: unknown[]) =>
      call('POST', `/v1/tenants/import-uploads/${id}/complete`, {
        key: ADMIN_TOKEN,
        body: { parts, sha256: '0'.repeat(64) },
      });
    const reversed = await complete([p2, p1]);
    expect(reversed.status).toBe(400);
    expect(reversed.body.error.message).toMatch(/out of order or twice/);
    const twice = await complete([p1, p1]);
    expect(twice.body.error.message).toMatch(/out of order or twice/);
    const gap = await complete([p1, { ...p2, part_number: 3 }]);
    expect(gap.status).toBe(400);
    expect(gap.body.error.message).toMatch(/part 2 is missing/);
    // R2's own checks: an ETag that is not the part's, a part listed but never put.
    const wrongEtag = await complete([{ ...p1, etag: 'not-the-etag' }, p2]);
    expect(wrongEtag.status).toBe(400);
    expect(wrongEtag.body.error.message).toMatch(/R2 refused the parts \(the upload stays open\)/);
    // Still open: the correct list completes it (the digest is then checked: here, wrong).
    const bytes = new Uint8Array(IMPORT_PART_MIN_BYTES + 5);
    bytes.fill(0x61, 0, IMPORT_PART_MIN_BYTES);
    bytes.set(encode('tail\n'), IMPORT_PART_MIN_BYTES);
    const right = await call('POST', `/v1/tenants/import-uploads/${id}/complete`, {
      key: ADMIN_TOKEN,
      body: { parts: [p1, p2], sha256: sha256Hex(bytes) },
    });
    expect(right.status).toBe(200);
    expect(right.body).toMatchObject({ bytes: bytes.byteLength, parts: 2 });
    // Completed: no more parts, no second completion.
    expect((await putPart(id, 3, encode('x'))).status).toBe(409);
    expect((await complete([p1, p2])).status).toBe(409);
    expect((await call('POST', `/v1/tenants/import-uploads/${id}/abort`, { key: ADMIN_TOKEN })).status).toBe(
      200,
    );
  });

  it("enforces R2's minimum part size for every part but the last, and bounds part numbers and bodies", async () => {
    const id = await createUpload();
    const small1 = await putPart(id, 1, encode('{}\n'));
    const small2 = await putPart(id, 2, encode('{}\n'));
    const tooSmall = await call('POST', `/v1/tenants/import-uploads/${id}/complete`, {
      key: ADMIN_TOKEN,
      body: {
        parts: [
          { part_number: 1, etag: small1.body.etag },
          { part_number: 2, etag: small2.body.etag },
        ],
        sha256: '0'.repeat(64),
      },
    });
    expect(tooSmall.status).toBe(400);
    expect(tooSmall.body.error.message).toMatch(/R2 refused the parts/);
    expect((await putPart(id, 0, encode('x'))).status).toBe(400);
    expect((await putPart(id, 641, encode('x'))).status).toBe(400);
    expect((await putPart(id, '1e3', encode('x'))).status).toBe(400);
    expect((await putPart(id, 1, new Uint8Array(0))).status).toBe(400);
    const wrongType = await call('PUT', `/v1/tenants/import-uploads/${id}/parts/1`, {
      key: ADMIN_TOKEN,
      raw: encode('x'),
    });
    expect(wrongType.status).toBe(415);
    const oversized = await call('PUT', `/v1/tenants/import-uploads/${id}/parts/1`, {
      key: ADMIN_TOKEN,
      raw: new Uint8Array(16 * 1024 * 1024 + 1),
      headers: OCTETS,
    });
    expect(oversized.status).toBe(413);
    expect((await putPart('0'.repeat(32), 1, encode('x'))).status).toBe(404);
    expect((await putPart('not-an-id', 1, encode('x'))).status).toBe(404);
    // Only the platform admin.
    expect((await call('POST', '/v1/tenants/import-uploads', {})).status).toBe(401);
    // Abort: R2 drops the parts; the upload is gone.
    expect((await call('POST', `/v1/tenants/import-uploads/${id}/abort`, { key: ADMIN_TOKEN })).status).toBe(
      200,
    );
    expect((await putPart(id, 1, encode('x'))).status).toBe(404);
  });

  it('whose bytes do not hash to the expected digest is deleted, and nothing is imported', async () => {
    const { s, text } = await exportedTenant('upl-digest');
    const to = 1 - shardOf(s);
    const { id, done } = await upload(encode(text), IMPORT_PART_MIN_BYTES, sha256Hex(encode(`${text}x`)));
    expect(done.status).toBe(400);
    expect(done.body.error.message).toMatch(
      /hashes to [0-9a-f]{64}, not [0-9a-f]{64}; the upload is deleted/,
    );
    expect(await env.BLOBS.head(`imports/uploads/${id}`)).toBeNull();
    expect((await importCall(id, to)).status).toBe(404);
    await nothingWritten(to, s.tenant_id);
  });

  it('that is not completed cannot be imported', async () => {
    const id = await createUpload();
    expect((await putPart(id, 1, encode('{}\n'))).status).toBe(200);
    const r = await importCall(id, 1);
    expect(r.status).toBe(409);
    expect((await call('POST', `/v1/tenants/import-uploads/${id}/abort`, { key: ADMIN_TOKEN })).status).toBe(
      200,
    );
  });
});

describe('an uploaded export is verified whole before anything is written', () => {
  it('a bad line deep in the file is refused, named as the single request names it, nothing written', async () => {
    const { s, text, lines } = await exportedTenant('upl-deep');
    const to = 1 - shardOf(s);
    const rows = text.trimEnd().split('\n');
    // The last line, re-serialized with a space: not what an export writes.
    const bad = `${[...rows.slice(0, -1), (rows.at(-1) as string).replace('{', '{ ')].join('\n')}\n`;
    const { id, done } = await upload(encode(bad));
    expect(done.status).toBe(200);
    const refused = await importCall(id, to);
    expect(refused.status).toBe(400);
    expect(refused.body.error.message).toBe(
      `import refused, nothing written: line ${lines}: not in canonical form (RFC 8785)`,
    );
    const single = await call('POST', `/v1/tenants/import?shard=${to}`, {
      key: ADMIN_TOKEN,
      raw: bad,
      headers: { 'content-type': 'application/x-ndjson' },
    });
    expect(single.status).toBe(400);
    expect(single.body.error.message).toBe(refused.body.error.message);
    await nothingWritten(to, s.tenant_id);
  });

  it('a file whose bytes changed in the bucket after completion fails its read (500), nothing written', async () => {
    const { s, text } = await exportedTenant('upl-changed');
    const to = 1 - shardOf(s);
    const { id, done } = await upload(encode(text));
    expect(done.status).toBe(200);
    // Another valid-looking file under the upload's key: every read re-hashes against the digest.
    await env.BLOBS.put(`imports/uploads/${id}`, `${text.trimEnd().split('\n').slice(0, -1).join('\n')}\n`);
    const r = await importCall(id, to);
    expect(r.status).toBe(500);
    await nothingWritten(to, s.tenant_id);
  });

  it('other bytes put under the key with a record naming their digest and version are refused (409), nothing written', async () => {
    const { s, text } = await exportedTenant('upl-record');
    const other = await exportedTenant('upl-record-other');
    const to = 1 - shardOf(s);
    const { id, done } = await upload(encode(text));
    expect(done.status).toBe(200);
    // Whoever can write the bucket: another valid export under the key, and the record (same
    // bucket) rewritten to name its digest, size and the new object version.
    const put = await env.BLOBS.put(`imports/uploads/${id}`, other.text);
    const recordKey = `imports/uploads/${id}.json`;
    const record = (await (await env.BLOBS.get(recordKey))?.json()) as Record<string, unknown>;
    const bytes = encode(other.text);
    await env.BLOBS.put(
      recordKey,
      JSON.stringify({ ...record, sha256: sha256Hex(bytes), bytes: bytes.byteLength, version: put?.version }),
    );
    const r = await importCall(id, 1 - shardOf(other.s));
    expect(r.status).toBe(409);
    expect(r.body.error).toMatchObject({ code: 'conflict' });
    expect(String((r.body.error as { message: string }).message)).toContain(
      `the record of upload ${id} does not match its seal`,
    );
    await nothingWritten(to, s.tenant_id);
    await nothingWritten(1 - shardOf(other.s), other.s.tenant_id);
  });

  it('a signature of a receipt the file does not hold, found with the digests checked in partitions', async () => {
    const { s, text } = await exportedTenant('upl-ref');
    const to = 1 - shardOf(s);
    const rows = text.trimEnd().split('\n');
    // The last signature names a receipt not in the file (its envelope too, so the row is consistent).
    const at = rows.map((l) => l.includes('"table":"receipt_signatures"')).lastIndexOf(true);
    const sig = JSON.parse(rows[at] as string) as { row: Record<string, unknown>; table: string };
    const ghost = 'f'.repeat(64);
    const envelope = JSON.parse(sig.row.envelope as string) as Record<string, unknown>;
    sig.row.envelope = canonicalize({ ...envelope, receipt_sha256: ghost });
    sig.row.receipt_sha256 = ghost;
    rows[at] = canonicalize(sig);
    const bad = `${rows.join('\n')}\n`;
    const { id } = await upload(encode(bad));
    const store = importUploadStore(env);
    const error = await importUpload(tenantMovePort(env), store, to, id, Date.now(), noLog, {
      verify: { reference_capacity: 2 },
    }).then(
      () => null,
      (e: Error) => e.message,
    );
    expect(error).toBe(
      `import refused, nothing written: line ${at + 1}: signature of receipt "${ghost}", which the file does not hold`,
    );
    await nothingWritten(to, s.tenant_id);
  });
});

describe('an uploaded export is written in budgeted, resumable calls', () => {
  it('stops at its chunk budget saying how far it got; a failure mid-write is resumed by calling again', async () => {
    const { s, receipts, text, lines } = await exportedTenant('upl-resume');
    const from = shardOf(s);
    const to = 1 - from;
    const { id } = await upload(encode(text));
    const store = importUploadStore(env);
    const chunk_rows = 3;
    // An injected failure in the second chunk: the first committed, nothing is visible.
    const failing = failingPort(2);
    await expect(
      importUpload(failing.port, store, to, id, Date.now(), noLog, { chunk_rows }),
    ).rejects.toThrow(/injected failure/);
    expect(
      await countOn(to, 'SELECT rows_done AS n FROM tenant_imports WHERE tenant_id = ?', s.tenant_id),
    ).toBe(3);
    expect(await countOn(to, 'SELECT count(*) AS n FROM principals WHERE tenant_id = ?', s.tenant_id)).toBe(
      0,
    );
    expect(await directoryShard(s.tenant_id)).toBe(from);
    // A call with a budget of two chunks: resumes at row 3, writes two chunks, says so.
    const partial = await importUpload(tenantMovePort(env), store, to, id, Date.now(), noLog, {
      chunk_rows,
      max_chunks: 2,
    });
    expect(partial).toEqual({
      status: 'in_progress',
      phase: 'writing',
      tenant_id: s.tenant_id,
      shard: to,
      rows_done: 9,
      rows_total: lines,
      chunks: 2,
    });
    expect(await countOn(to, 'SELECT count(*) AS n FROM principals WHERE tenant_id = ?', s.tenant_id)).toBe(
      0,
    );
    // Over HTTP, the default budget: finishes.
    const done = await importCall(id, to);
    expect(done.status).toBe(201);
    expect(await tenantRowsOn(to, s.tenant_id)).toBe(lines);
    expect(
      await countOn(to, 'SELECT count(*) AS n FROM tenant_imports WHERE tenant_id = ?', s.tenant_id),
    ).toBe(0);
    const keys = done.body.keys as { principal_id: string; api_key: string }[];
    const admin = keys.find((k) => k.principal_id === s.admin.principal_id)?.api_key as string;
    for (const sha of receipts)
      expect((await call('GET', `/v1/receipts/${sha}`, { key: admin })).status).toBe(200);
    const order = await shardD1(to)
      .prepare('SELECT receipt_sha256 FROM receipt_signatures WHERE tenant_id = ? ORDER BY seq')
      .bind(s.tenant_id)
      .all<{ receipt_sha256: string }>();
    expect(order.results.map((r) => r.receipt_sha256)).toEqual(receipts);
    expect(await directoryShard(s.tenant_id)).toBe(to);
  });

  it('a resumed call does not verify the file again: the first call keeps what it found', async () => {
    const { s, text, lines } = await exportedTenant('upl-kept');
    const to = 1 - shardOf(s);
    const { id } = await upload(encode(text));
    const real = importUploadStore(env);
    const reads = { n: 0 };
    const store: typeof real = {
      ...real,
      read: (upload_id, sha256, version, offset) => {
        reads.n += 1;
        return real.read(upload_id, sha256, version, offset);
      },
    };
    const step = { chunk_rows: 2, max_chunks: 1 };
    const call1 = await importUpload(tenantMovePort(env), store, to, id, Date.now(), noLog, step);
    expect(call1).toMatchObject({ status: 'in_progress', phase: 'writing', rows_done: 2 });
    expect(reads.n).toBe(2); // one verifying read, one writing read
    const { key, binding } = await keptBinding(id);
    const kept = await openKept(key, (await real.verification(id)) as string, binding);
    expect(kept).toMatchObject({
      kept: { phase: 'verified', found: { tenant_id: s.tenant_id, rows_total: lines } },
    });
    reads.n = 0;
    const call2 = await importUpload(tenantMovePort(env), store, to, id, Date.now(), noLog, step);
    expect(call2).toMatchObject({ status: 'in_progress', rows_done: 4 });
    expect(reads.n).toBe(1); // the writing read only
    // A verification kept under other rules is not trusted: verified again.
    const found = (kept as { kept: KeptVerification }).kept;
    await real.keepVerification(id, await sealKept(key, { ...binding, rules: 0 }, found));
    reads.n = 0;
    await importUpload(tenantMovePort(env), store, to, id, Date.now(), noLog, step);
    expect(reads.n).toBe(2);
    expect((await importCall(id, to)).status).toBe(201);
    expect(await tenantRowsOn(to, s.tenant_id)).toBe(lines);
    expect((await call('POST', `/v1/tenants/import-uploads/${id}/abort`, { key: ADMIN_TOKEN })).status).toBe(
      200,
    );
    expect(await env.BLOBS.head(`imports/uploads/${id}.verification`)).toBeNull();
  });

  it('a resumed call that finds the file changed since it was verified writes no row of it live', async () => {
    const { s, text } = await exportedTenant('upl-swap');
    const from = shardOf(s);
    const to = 1 - from;
    const { id } = await upload(encode(text));
    const step = { chunk_rows: 2, max_chunks: 1 };
    const store = importUploadStore(env);
    await importUpload(tenantMovePort(env), store, to, id, Date.now(), noLog, step);
    // The bytes under the key replaced after the verification (an outage or an R2 operator):
    // the last row now names another tenant.
    const rows = text.trimEnd().split('\n');
    rows[rows.length - 1] = (rows.at(-1) as string).replace(s.tenant_id, 'ten-someone-else');
    await env.BLOBS.put(`imports/uploads/${id}`, `${rows.join('\n')}\n`);
    const r = await importCall(id, to);
    expect(r.status).toBe(500);
    expect(await countOn(to, 'SELECT count(*) AS n FROM principals WHERE tenant_id = ?', s.tenant_id)).toBe(
      0,
    );
    expect(await directoryShard(s.tenant_id)).toBe(from);
    expect(await tenantRowsOn(to, 'ten-someone-else')).toBe(0);
  });

  it('a 202 over HTTP when the budget is spent (the answer says rows_done of rows_total)', async () => {
    // The route's budget is 400 chunks; the service's `max_chunks` is what tests lower, so
    // this checks the wire shape of the same answer through the service directly.
    const { s, text, lines } = await exportedTenant('upl-202');
    const to = 1 - shardOf(s);
    const { id } = await upload(encode(text));
    const partial = await importUpload(
      tenantMovePort(env),
      importUploadStore(env),
      to,
      id,
      Date.now(),
      noLog,
      {
        chunk_rows: 1,
        max_chunks: 1,
      },
    );
    expect(partial).toMatchObject({ status: 'in_progress', rows_done: 1, rows_total: lines });
    expect((await importCall(id, to)).status).toBe(201);
  });
});

describe('an uploaded export verified in budgeted, resumable calls', () => {
  /** Calls with a verification budget of `bytes` until one is past verifying: their answers. */
  async function verifyInCalls(id: string, to: number, options: Parameters<typeof importUpload>[6]) {
    const answers: Awaited<ReturnType<typeof importUpload>>[] = [];
    for (let i = 0; i < 1000; i++) {
      const r = await importUpload(
        tenantMovePort(env),
        importUploadStore(env),
        to,
        id,
        Date.now(),
        noLog,
        options,
      );
      answers.push(r);
      if (!('phase' in r) || r.phase !== 'verifying') return answers;
    }
    throw new Error('the verification never finished');
  }

  it('several calls find what one call finds, write nothing while verifying, then import', async () => {
    const { s, text, lines } = await exportedTenant('upl-vcalls');
    const to = 1 - shardOf(s);
    const { id } = await upload(encode(text));
    const options = {
      verify_call_bytes: 400,
      verify: { reference_capacity: 2 },
      chunk_rows: 2,
      max_chunks: 1,
    };
    const answers = await verifyInCalls(id, to, options);
    const verifying = answers.slice(0, -1);
    // Spread over calls, through the first read and the reference partitions' reads.
    expect(verifying.length).toBeGreaterThan(Math.ceil(encode(text).byteLength / 400));
    expect(verifying[0]).toMatchObject({ status: 'in_progress', phase: 'verifying', upload_id: id, read: 1 });
    expect(verifying.some((a) => 'read' in a && a.read > 1)).toBe(true);
    for (const a of verifying) expect(a).toMatchObject({ bytes_total: encode(text).byteLength });
    expect(answers.at(-1)).toMatchObject({ status: 'in_progress', phase: 'writing', rows_done: 2 });
    // What the calls kept is what verifying the file in one call finds.
    const { key, binding } = await keptBinding(id);
    const opened = await openKept(key, (await importUploadStore(env).verification(id)) as string, binding);
    const one = await verifySource(tenantMovePort(env), textSource(text), { reference_capacity: 2 });
    const { verification: _stats, ...found } = one;
    expect(opened).toEqual({ kept: { phase: 'verified', found } });
    const done = await importCall(id, to);
    expect(done.status).toBe(201);
    expect(await tenantRowsOn(to, s.tenant_id)).toBe(lines);
  });

  it('a bad line found by a later call is refused as one call refuses it, nothing written', async () => {
    const { s, text, lines } = await exportedTenant('upl-vbad');
    const to = 1 - shardOf(s);
    const rows = text.trimEnd().split('\n');
    const bad = `${[...rows.slice(0, -1), (rows.at(-1) as string).replace('{', '{ ')].join('\n')}\n`;
    const { id } = await upload(encode(bad));
    const first = await importUpload(tenantMovePort(env), importUploadStore(env), to, id, Date.now(), noLog, {
      verify_call_bytes: 300,
    });
    expect(first).toMatchObject({ phase: 'verifying' });
    const error = await verifyInCalls(id, to, { verify_call_bytes: 300 }).then(
      () => null,
      (e: Error) => e.message,
    );
    expect(error).toBe(`import refused, nothing written: line ${lines}: not in canonical form (RFC 8785)`);
    await nothingWritten(to, s.tenant_id);
  });

  /** An upload whose verification stopped part-way after one call: its kept state. */
  async function stoppedPartWay(prefix: string) {
    const { s, text } = await exportedTenant(prefix);
    const to = 1 - shardOf(s);
    const { id } = await upload(encode(text));
    const first = await importUpload(tenantMovePort(env), importUploadStore(env), to, id, Date.now(), noLog, {
      verify_call_bytes: 300,
    });
    expect(first).toMatchObject({ phase: 'verifying', read: 1 });
    const sealed = (await importUploadStore(env).verification(id)) as string;
    return { s, text, to, id, first, sealed };
  }

  const next = (id: string, to: number) =>
    importUpload(tenantMovePort(env), importUploadStore(env), to, id, Date.now(), noLog, {
      verify_call_bytes: 300,
    });
  const refusal = (p: Promise<unknown>) =>
    p.then(
      () => null,
      (e: Error) => ({ name: e.name, message: e.message }),
    );

  it('a tampered kept state is refused (409), discarded, nothing written; the next call starts over', async () => {
    const { s, to, id, first, sealed } = await stoppedPartWay('upl-vtamper');
    // The offset moved past lines never checked: a resumed call would skip them.
    const tampered = sealed.replace(/"offset":([0-9]+)/, (_m, n: string) => `"offset":${Number(n) + 600}`);
    expect(tampered).not.toBe(sealed);
    await env.BLOBS.put(`imports/uploads/${id}.verification`, tampered);
    const r = await importCall(id, to);
    expect(r.status).toBe(409);
    expect(r.body.error.message).toBe(
      `the kept verification of upload ${id} does not match its seal: it is discarded and nothing was written; import again to verify the file from its start`,
    );
    expect(await env.BLOBS.head(`imports/uploads/${id}.verification`)).toBeNull();
    await nothingWritten(to, s.tenant_id);
    // From zero, not from the tampered offset.
    expect(await next(id, to)).toEqual(first);
  });

  it("another upload's kept state copied over this one's is refused, discarded, nothing written", async () => {
    const a = await stoppedPartWay('upl-vcopy');
    // The same file uploaded again: same digest, another upload id and object version.
    const { id } = await upload(encode(a.text));
    await env.BLOBS.put(`imports/uploads/${id}.verification`, a.sealed);
    const error = await refusal(next(id, a.to));
    expect(error?.message).toMatch(/^the kept verification of upload [0-9a-f]{32} is of another upload:/);
    expect(await env.BLOBS.head(`imports/uploads/${id}.verification`)).toBeNull();
    await nothingWritten(a.to, a.s.tenant_id);
    // The upload it came from goes on from where it stopped.
    expect(await next(a.id, a.to)).toMatchObject({ phase: 'verifying', read: 1 });
  });

  it('a state sealed by this Worker for another digest or object version of this upload is refused', async () => {
    const { s, to, id } = await stoppedPartWay('upl-vbind');
    const { key, binding } = await keptBinding(id);
    const { kept } = (await openKept(
      key,
      (await importUploadStore(env).verification(id)) as string,
      binding,
    )) as { kept: KeptVerification };
    for (const [b, reason] of [
      [{ sha256: 'b'.repeat(64) }, 'is of another file digest'],
      [{ version: 'another-version' }, 'is of another object version'],
    ] as const) {
      await importUploadStore(env).keepVerification(id, await sealKept(key, { ...binding, ...b }, kept));
      expect((await refusal(next(id, to)))?.message).toContain(`upload ${id} ${reason}:`);
      await nothingWritten(to, s.tenant_id);
    }
  });

  it('the object replaced between two verifying calls (even by the same bytes) fails the next call, nothing written', async () => {
    const { s, text, to, id } = await stoppedPartWay('upl-vswap');
    // Read from an offset, the bytes cannot be re-hashed: the pinned version is what refuses them.
    await env.BLOBS.put(`imports/uploads/${id}`, text);
    const error = await refusal(next(id, to));
    expect(error).toEqual({
      name: 'UploadIntegrityError',
      message: `upload ${id} was replaced since it was completed`,
    });
    expect((await importCall(id, to)).status).toBe(500);
    await nothingWritten(to, s.tenant_id);
  });
});

describe('an export larger than one request', () => {
  it(`over ${MAX_IMPORT_BYTES} bytes: refused as one request, imported from its parts`, async () => {
    const { s, text, lines } = await exportedTenant('upl-large');
    const to = 1 - shardOf(s);
    // Policies of ~1 MiB each (a stored document may hold 16 MiB), each keyed by its digest.
    const extra: string[] = [];
    const pad = 'x'.repeat(1024 * 1024 - 64);
    for (let size = text.length, i = 0; size <= MAX_IMPORT_BYTES + 512 * 1024; i++) {
      const document = canonicalize({ n: i, pad });
      const line = canonicalize({
        row: {
          created_at_unix_ms: 1,
          document,
          policy_sha256: digestOf({ n: i, pad }),
          tenant_id: s.tenant_id,
        },
        table: 'policies',
      });
      extra.push(line);
      size += line.length + 1;
    }
    const big = encode(`${text}${extra.join('\n')}\n`);
    expect(big.byteLength).toBeGreaterThan(MAX_IMPORT_BYTES);
    const single = await call('POST', `/v1/tenants/import?shard=${to}`, {
      key: ADMIN_TOKEN,
      raw: big,
      headers: { 'content-type': 'application/x-ndjson' },
    });
    expect(single.status).toBe(413);
    const { id, parts, done } = await upload(big);
    expect(done.status).toBe(200);
    expect(parts.length).toBe(Math.ceil(big.byteLength / IMPORT_PART_MIN_BYTES));
    const imported = await importCall(id, to);
    expect(imported.status).toBe(201);
    expect(imported.body.rows).toBe(lines + extra.length);
    expect(await tenantRowsOn(to, s.tenant_id)).toBe(lines + extra.length);
    expect((await call('POST', `/v1/tenants/import-uploads/${id}/abort`, { key: ADMIN_TOKEN })).status).toBe(
      200,
    );
  }, 180_000);
});

describe('an export larger than one answer, in segments', () => {
  /** Every segment of the export, each bounded by `bounds`; the first freezes when asked. */
  async function segments(
    tenant_id: string,
    freeze: boolean,
    bounds: { max_bytes?: number; max_rows?: number },
  ) {
    const port = tenantMovePort(env);
    const out: string[] = [];
    let after: string | undefined;
    for (let i = 0; i < 1000; i++) {
      const seg = await exportTenantText(
        port,
        tenant_id,
        after === undefined ? { freeze, segmented: true } : { after },
        Date.now(),
        noLog,
        bounds,
      );
      out.push(seg.text);
      if (seg.next === null) return out;
      after = seg.next;
    }
    throw new Error('the export never ended');
  }

  it('concatenated, the segments are the whole export; a frozen one imports with every principal re-keyed', async () => {
    const s = await seedTenant('seg');
    const to = 1 - shardOf(s);
    const whole = await exportTenant(s.tenant_id, false);
    const parts = await segments(s.tenant_id, false, { max_rows: 4 });
    expect(parts.length).toBeGreaterThan(1);
    expect(parts.join('')).toBe(whole.text);
    const bySize = await segments(s.tenant_id, false, { max_bytes: 2048 });
    expect(bySize.length).toBeGreaterThan(1);
    expect(bySize.join('')).toBe(whole.text);
    // Frozen: the first segment holds every principal (shown live, so the import re-keys them).
    const frozen = await segments(s.tenant_id, true, { max_rows: 2 });
    const principals = (t: string) => t.split('\n').filter((l) => l.includes('"table":"principals"'));
    expect(principals(frozen[0] as string).length).toBe(principals(whole.text).length);
    expect(frozen.join('')).toBe(whole.text);
    const { id } = await upload(encode(frozen.join('')));
    const imported = await importCall(id, to);
    expect(imported.status).toBe(201);
    expect((imported.body.keys as unknown[]).length).toBe(principals(whole.text).length);
    // The old keys were frozen by the first segment.
    expect((await call('GET', '/v1/policy', { key: s.admin.api_key })).status).toBe(401);
  });

  it('over HTTP: each segment says whether it is the last and where the next starts; freeze only first', async () => {
    const s = await seedTenant('seg-http');
    const first = await workerFetch(`${BASE}/v1/tenants/${s.tenant_id}/export`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ segmented: true }),
    });
    expect(first.status).toBe(200);
    expect(first.headers.get('writ-export-complete')).toBe('true');
    expect(first.headers.get('writ-export-next')).toBeNull();
    expect((await first.text()).endsWith('\n')).toBe(true);
    const next = await call('POST', `/v1/tenants/${s.tenant_id}/export`, {
      key: ADMIN_TOKEN,
      body: { after: '3.0', freeze: true },
    });
    expect(next.status).toBe(400);
    const bad = await call('POST', `/v1/tenants/${s.tenant_id}/export`, {
      key: ADMIN_TOKEN,
      body: { after: '3' },
    });
    expect(bad.status).toBe(400);
    // Not segmented, nothing changes: one whole file, no segment headers.
    const plain = await exportTenant(s.tenant_id, false);
    expect(plain.status).toBe(200);
  });
});
