/**
 * How the parts of a tenant move work together (issue 10: the abort, the retry after a failed
 * directory write and older exports, merged with imports from uploads in budgeted calls):
 * an upload import stopped at its budget then aborted; an older export back-filled across
 * resumed calls that keep no verifier state; a failed directory write finished from the upload;
 * bytes under the upload's key that change between calls.
 */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { canonicalize, sha256Hex } from '../../../src/core/canonical/canonical.js';
import { apiKeyDigest } from '../../../src/core/identity/identity.js';
import { importUploadStore, tenantMovePort } from '../../../src/platform/bindings.js';
import { IMPORT_PART_MIN_BYTES, importUpload } from '../../../src/services/import-uploads.js';
import type { TenantMovePort } from '../../../src/services/ports.js';
import { textSource, verifySource } from '../../../src/services/tenant-moves.js';
import {
  ADMIN_TOKEN,
  approvedApproval,
  authorize,
  call,
  countOn,
  countedStoredBytes,
  createRun,
  directoryShard,
  leftOn,
  tenantRowsOn,
  READ_INPUT,
  seedTenant,
  shardD1,
  shardOf,
  exportTenant,
  expectMoveRecorded,
} from './harness.js';
import { type Row, asExported, asStoredBefore0004, operation, reconciliation, toText } from './older-rows.js';

const noLog = () => undefined;
const encode = (text: string) => new TextEncoder().encode(text);

const liveKeyDigests = async (shard: number, tenant_id: string) =>
  (
    await shardD1(shard)
      .prepare(
        'SELECT key_sha256 FROM principals WHERE tenant_id = ? AND revoked_at_unix_ms IS NULL ORDER BY principal_id',
      )
      .bind(tenant_id)
      .all<{ key_sha256: string }>()
  ).results.map((r) => r.key_sha256);

/** A frozen export of a tenant with receipts, signatures, runs and an approval. */
async function exported(prefix: string) {
  const s = await seedTenant(prefix);
  for (let i = 0; i < 2; i++) {
    const r = await authorize(s, {
      tool_contract_sha256: s.read_contract_sha256,
      input: READ_INPUT,
      run_id: await createRun(s),
    });
    expect(r.status).toBe(200);
  }
  await approvedApproval(s);
  const { status, text } = await exportTenant(s.tenant_id, true);
  expect(status).toBe(200);
  return { s, text, lines: text.split('\n').length - 1, from: shardOf(s), to: 1 - shardOf(s) };
}

/** Upload `text` in one part and complete it with its own digest. */
async function upload(text: string): Promise<string> {
  const bytes = encode(text);
  expect(bytes.byteLength).toBeLessThan(IMPORT_PART_MIN_BYTES);
  const created = await call('POST', '/v1/tenants/import-uploads', { key: ADMIN_TOKEN });
  expect(created.status).toBe(201);
  const id = created.body.upload_id as string;
  const part = await call('PUT', `/v1/tenants/import-uploads/${id}/parts/1`, {
    key: ADMIN_TOKEN,
    raw: bytes,
    headers: { 'content-type': 'application/octet-stream' },
  });
  expect(part.status).toBe(200);
  const done = await call('POST', `/v1/tenants/import-uploads/${id}/complete`, {
    key: ADMIN_TOKEN,
    body: { parts: [{ part_number: 1, etag: part.body.etag }], sha256: sha256Hex(bytes) },
  });
  expect(done.status).toBe(200);
  return id;
}

const importCall = (id: string, shard: number) =>
  call('POST', `/v1/tenants/import-uploads/${id}/import?shard=${shard}`, { key: ADMIN_TOKEN });
const deleteUpload = (id: string) =>
  call('POST', `/v1/tenants/import-uploads/${id}/abort`, { key: ADMIN_TOKEN });
const abortHttp = (tenant_id: string, shard: number) =>
  call('POST', `/v1/tenants/import/${tenant_id}/abort?shard=${shard}`, { key: ADMIN_TOKEN });

/** The upload imported in calls of `step` (service-level budget) until it goes live. */
async function importInCalls(
  id: string,
  to: number,
  step: { chunk_rows: number; max_chunks: number },
  port: TenantMovePort = tenantMovePort(env),
) {
  const store = importUploadStore(env);
  const progress: number[] = [];
  for (let i = 0; i < 10_000; i++) {
    const r = await importUpload(port, store, to, id, Date.now(), noLog, step);
    if ('keys' in r) return { imported: r, progress };
    if (r.phase === 'writing') progress.push(r.rows_done);
  }
  throw new Error('the import never finished');
}

describe('an upload import stopped at its chunk budget, then aborted', () => {
  it('removes the staged rows; the next call starts over from row 0 and finishes; the upload is still deletable', async () => {
    const { s, text, lines, from, to } = await exported('mv-abort');
    const id = await upload(text);
    const store = importUploadStore(env);
    const step = { chunk_rows: 3, max_chunks: 2 };
    const partial = await importUpload(tenantMovePort(env), store, to, id, Date.now(), noLog, step);
    expect(partial).toMatchObject({ status: 'in_progress', rows_done: 6, rows_total: lines });
    expect(await tenantRowsOn(to, s.tenant_id)).toBeGreaterThan(0);
    expect(await store.verification(id)).not.toBeNull();

    const aborted = await abortHttp(s.tenant_id, to);
    expect(aborted.status).toBe(200);
    expect(aborted.body).toMatchObject({ tenant_id: s.tenant_id, shard: to, aborted: true });
    expect(await leftOn(to, s.tenant_id)).toBe(0);
    expect(await directoryShard(s.tenant_id)).toBe(from);
    // Aborting again: nothing is staged any more.
    expect((await abortHttp(s.tenant_id, to)).status).toBe(404);

    // The abort does not touch the upload or its kept verification: the next call is a new
    // import of the same file, from its first row (nothing of the aborted one is reused).
    const again = await importUpload(tenantMovePort(env), store, to, id, Date.now(), noLog, step);
    expect(again).toMatchObject({ status: 'in_progress', rows_done: 6, rows_total: lines });
    expect(
      await countOn(to, 'SELECT rows_done AS n FROM tenant_imports WHERE tenant_id = ?', s.tenant_id),
    ).toBe(6);
    const done = await importCall(id, to);
    expect(done.status).toBe(201);
    expect(await tenantRowsOn(to, s.tenant_id)).toBe(lines);
    expect(await directoryShard(s.tenant_id)).toBe(to);
    const keys = done.body.keys as { principal_id: string; api_key: string }[];
    const admin = keys.find((k) => k.principal_id === s.admin.principal_id)?.api_key as string;
    expect((await call('GET', '/v1/policy', { key: admin })).status).toBe(200);

    // The upload (file, record, kept verification) is deleted as any other.
    expect((await deleteUpload(id)).status).toBe(200);
    for (const key of [
      `imports/uploads/${id}`,
      `imports/uploads/${id}.json`,
      `imports/uploads/${id}.verified.json`,
    ])
      expect(await env.BLOBS.head(key)).toBeNull();
    expect((await importCall(id, to)).status).toBe(404);
  });

  it('an upload deleted after the abort leaves nothing of the tenant on the target', async () => {
    const { s, text, to } = await exported('mv-abort-del');
    const id = await upload(text);
    const step = { chunk_rows: 2, max_chunks: 1 };
    await importUpload(tenantMovePort(env), importUploadStore(env), to, id, Date.now(), noLog, step);
    expect((await abortHttp(s.tenant_id, to)).status).toBe(200);
    expect((await deleteUpload(id)).status).toBe(200);
    expect(await leftOn(to, s.tenant_id)).toBe(0);
    expect((await importCall(id, to)).status).toBe(404);
  });

  it('a call that was writing when the abort marked the import writes nothing more (409)', async () => {
    const { s, text, to } = await exported('mv-abort-race');
    const id = await upload(text);
    const real = tenantMovePort(env);
    let chunks = 0;
    // The abort runs to its end between this call's second chunk and its third.
    const racing: TenantMovePort = {
      ...real,
      async importChunk(shard, st, chunk, now) {
        chunks += 1;
        if (chunks === 3) expect((await abortHttp(s.tenant_id, to)).status).toBe(200);
        return real.importChunk(shard, st, chunk, now);
      },
    };
    const store = importUploadStore(env);
    const error = await importUpload(racing, store, to, id, Date.now(), noLog, { chunk_rows: 2 }).then(
      () => null,
      (e: Error) => e.message,
    );
    expect(error).toMatch(/another import of this file is writing/);
    expect(await leftOn(to, s.tenant_id)).toBe(0);
    expect((await deleteUpload(id)).status).toBe(200);
  });
});

// ---------------------------------------------------------------------------------------------
// An older export (as older-exports.test.ts builds it) imported from an upload in many calls

/** The full rows (as after every migration), and the file without the migrations' columns. */
async function olderExport(prefix: string) {
  const { s, text } = await exported(prefix);
  const rows = text
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as { table: string; row: Row })
    .map(asStoredBefore0004);
  // Reconciliations spread over the receipts (so resumed calls start before, between and after
  // them): op-1 settled by the earlier of two, op-3 reconciled without one, op-2 not reconciled.
  const op = (n: number) => `${prefix}-op-${n}`;
  const late = reconciliation(s, op(1), 2_000, 1);
  const early = reconciliation(s, op(1), 1_000, 2);
  const other = reconciliation(s, op(2), 500, 3);
  const firstReceipt = rows.findIndex((r) => r.table === 'receipts');
  rows.splice(firstReceipt, 0, { table: 'receipts', row: late });
  const lastReceipt = rows.map((r) => r.table).lastIndexOf('receipts');
  rows.splice(lastReceipt + 1, 0, { table: 'receipts', row: early }, { table: 'receipts', row: other });
  rows.push(
    { table: 'operations', row: operation(s, op(1), 'reconciled_succeeded', early.sha256 as string) },
    { table: 'operations', row: operation(s, op(2), 'executed_succeeded', null) },
    { table: 'operations', row: operation(s, op(3), 'reconciled_no_effect', null) },
  );
  const removed = new Set([
    'receipts.receipt_encoding',
    'receipts.evidence_sha256',
    'receipts.evidence_bytes',
    'tenant_quotas.receipt_retention_days',
    'approvals.first_approved_by',
    'approvals.first_approved_at_unix_ms',
    'approvals.first_approval_lifetime_ms',
    'approvals.idempotency_key',
    'operations.reconciliation_receipt_sha256',
  ]);
  const older = toText(
    rows.map(({ table, row }) => ({
      table,
      row: Object.fromEntries(Object.entries(row).filter(([c]) => !removed.has(`${table}.${c}`))),
    })),
  );
  return { s, rows, older, full: toText(rows), to: 1 - shardOf(s) };
}

describe('an older export imported from an upload in many small calls', () => {
  it('stores the rows of the full export: the back-fill survives calls resuming before, between and after the receipts', async () => {
    const { s, rows, older, to } = await olderExport('mv-older');
    const id = await upload(older);
    const firstOperation = rows.findIndex((r) => r.table === 'operations');
    const { imported, progress } = await importInCalls(id, to, { chunk_rows: 1, max_chunks: 2 });
    expect(imported.rows).toBe(rows.length);
    // Calls resumed at every other row: some after every reconciliation receipt and before the
    // operations, so only the receipts a call skips can give the back-fill its answer.
    expect(
      progress.some(
        (p) => p > rows.findLastIndex((r) => r.row.kind === 'reconciliation') && p <= firstOperation,
      ),
    ).toBe(true);
    const stored = async (table: string, order: string) =>
      (
        await shardD1(to)
          .prepare(`SELECT * FROM ${table} WHERE tenant_id = ? ORDER BY ${order}`)
          .bind(s.tenant_id)
          .all<Row>()
      ).results;
    const expected = (table: string, key: string) =>
      rows
        .filter((r) => r.table === table)
        .map((r) => r.row)
        .sort((a, b) => String(a[key]).localeCompare(String(b[key])));
    const ops = await stored('operations', 'operation_id');
    expect(ops).toEqual(expected('operations', 'operation_id'));
    expect(ops.filter((o) => typeof o.reconciliation_receipt_sha256 === 'string')).toHaveLength(1);
    expect((await stored('receipts', 'sha256')).map(asExported)).toEqual(expected('receipts', 'sha256'));
    expect(await stored('approvals', 'approval_id')).toEqual(expected('approvals', 'approval_id'));
    // The quota row as exported, but for its usage counter: the target's triggers' count of the rows
    // it stores (import-stored-bytes.test.ts). This file's counter is the source's of rows it did not
    // hold in these forms (re-wrapped receipts, added reconciliations).
    const counted = await countedStoredBytes(to, s.tenant_id);
    expect(await stored('tenant_quotas', 'tenant_id')).toEqual(
      expected('tenant_quotas', 'tenant_id').map((q) => ({ ...q, stored_bytes: counted })),
    );
    expect((await deleteUpload(id)).status).toBe(200);
  });
});

describe('an import begun from an upload and finished from a request body (staging is keyed by the digest)', () => {
  it('an older export stopped after its receipts, the upload deleted, then sent whole: the rows of the full export', async () => {
    const { s, rows, older, to } = await olderExport('mv-two-doors');
    const id = await upload(older);
    const firstOperation = rows.findIndex((r) => r.table === 'operations');
    const partial = await importUpload(
      tenantMovePort(env),
      importUploadStore(env),
      to,
      id,
      Date.now(),
      noLog,
      {
        chunk_rows: firstOperation,
        max_chunks: 1,
      },
    );
    expect(partial).toMatchObject({ status: 'in_progress', rows_done: firstOperation });
    // The upload is deleted; its staged import is not (the abort route is the way to remove it).
    expect((await deleteUpload(id)).status).toBe(200);
    expect(
      await countOn(to, 'SELECT rows_done AS n FROM tenant_imports WHERE tenant_id = ?', s.tenant_id),
    ).toBe(firstOperation);
    const whole = await call('POST', `/v1/tenants/import?shard=${to}`, {
      key: ADMIN_TOKEN,
      raw: older,
      headers: { 'content-type': 'application/x-ndjson' },
    });
    expect(whole.status).toBe(201);
    expect(whole.body.rows).toBe(rows.length);
    const ops = (
      await shardD1(to)
        .prepare('SELECT * FROM operations WHERE tenant_id = ? ORDER BY operation_id')
        .bind(s.tenant_id)
        .all<Row>()
    ).results;
    expect(ops).toEqual(
      rows
        .filter((r) => r.table === 'operations')
        .map((r) => r.row)
        .sort((a, b) => String(a.operation_id).localeCompare(String(b.operation_id))),
    );
    expect(await tenantRowsOn(to, s.tenant_id)).toBe(rows.length);
    expect(await directoryShard(s.tenant_id)).toBe(to);
  });
});

describe("the older export's back-fill holds bounded state", () => {
  it('refuses a file needing it for more operations than its bound; a current export is never refused for it', async () => {
    // Three reconciliation receipts of two operations.
    const { s, older, full, to } = await olderExport('mv-older-bound');
    const port = tenantMovePort(env);
    const verify = (text: string, backfill_capacity: number) =>
      verifySource(port, textSource(text), { backfill_capacity }).then(
        () => 'accepted',
        (e: Error) => e.message,
      );
    expect(await verify(older, 2)).toBe('accepted');
    expect(await verify(older, 1)).toMatch(
      /^import refused, nothing written: line \d+: cannot back-fill reconciliation_receipt_sha256: reconciliation receipts of more than 1 operations$/,
    );
    // With 0009's column present nothing is back-filled: past the bound nothing more is held.
    expect(await verify(full, 1)).toBe('accepted');
    // From an upload: refused before anything is written.
    const id = await upload(older);
    const refused = await importUpload(port, importUploadStore(env), to, id, Date.now(), noLog, {
      verify: { backfill_capacity: 1 },
    }).then(
      () => null,
      (e: Error) => e.message,
    );
    expect(refused).toMatch(/reconciliation receipts of more than 1 operations/);
    expect(await leftOn(to, s.tenant_id)).toBe(0);
    expect((await deleteUpload(id)).status).toBe(200);
  });
});

// ---------------------------------------------------------------------------------------------
// The directory write failing after an upload import went live

describe('an upload import whose directory write failed after it went live', () => {
  it('is finished by importing the same upload again: fresh keys, the directory, the old copy frozen', async () => {
    const { s, text, lines, from, to } = await exported('mv-rekey');
    const id = await upload(text);
    const real = tenantMovePort(env);
    const failing: TenantMovePort = {
      ...real,
      record: () => Promise.reject(new Error('injected failure of the directory write')),
    };
    const store = importUploadStore(env);
    // In budgeted calls; the last one goes live, then its directory write fails.
    await expect(
      (async () => {
        for (;;) {
          const r = await importUpload(failing, store, to, id, Date.now(), noLog, {
            chunk_rows: 4,
            max_chunks: 2,
          });
          if ('keys' in r) return r;
        }
      })(),
    ).rejects.toThrow(/injected/);
    expect(await directoryShard(s.tenant_id)).toBe(from);
    expect(await tenantRowsOn(to, s.tenant_id)).toBe(lines);
    const undelivered = await liveKeyDigests(to, s.tenant_id);
    expect(undelivered.length).toBeGreaterThan(0);
    // Live but unrecorded: not a staged import, so the abort refuses it and deletes nothing.
    expect((await abortHttp(s.tenant_id, to)).status).toBe(409);
    expect(await tenantRowsOn(to, s.tenant_id)).toBe(lines);

    const retry = await importCall(id, to);
    expect(retry.status).toBe(201);
    expect(retry.body).toMatchObject({ tenant_id: s.tenant_id, shard: to, previous_shard: from });
    expect(await directoryShard(s.tenant_id)).toBe(to);
    const now = await liveKeyDigests(to, s.tenant_id);
    expect(now).toHaveLength(undelivered.length);
    for (const d of undelivered) expect(now).not.toContain(d);
    const keys = retry.body.keys as { principal_id: string; api_key: string }[];
    expect(keys.map((k) => apiKeyDigest(k.api_key)).sort()).toEqual([...now].sort());
    const admin = keys.find((k) => k.principal_id === s.admin.principal_id)?.api_key as string;
    expect((await call('GET', '/v1/policy', { key: admin })).status).toBe(200);
    await expectMoveRecorded(s, from, to);
    // Recorded: the same upload again is refused and changes nothing.
    expect((await importCall(id, to)).status).toBe(409);
    expect(await liveKeyDigests(to, s.tenant_id)).toEqual(now);
    expect((await deleteUpload(id)).status).toBe(200);
  });
});

// ---------------------------------------------------------------------------------------------
// Bytes under the upload's key replaced between calls

describe('an upload whose object is replaced after it was completed', () => {
  it('is refused by every later call, even when the replacement is undone: no changed row goes live', async () => {
    const { s, text, from, to } = await exported('mv-swap-back');
    const id = await upload(text);
    const store = importUploadStore(env);
    const lines = text.trimEnd().split('\n');
    // The executor's row: the file's roles for it, and a copy granting the admin's roles.
    const at = lines.findIndex(
      (l) => l.endsWith('"table":"principals"}') && l.includes(`"principal_id":"${s.executor.principal_id}"`),
    );
    expect(at).toBeGreaterThan(1);
    const admin = JSON.parse(
      lines.find((l) => l.includes(`"principal_id":"${s.admin.principal_id}"`)) as string,
    ) as { row: Row };
    const executor = JSON.parse(lines[at] as string) as { row: Row; table: string };
    expect(executor.row.roles).not.toBe(admin.row.roles);
    const swapped = [...lines];
    swapped[at] = canonicalize({ row: { ...executor.row, roles: admin.row.roles }, table: 'principals' });
    const step = { chunk_rows: 1, max_chunks: 1 };
    // Verified and kept by the first call; written one row a call up to the executor's row.
    for (let done = 0; done < at;) {
      const r = await importUpload(tenantMovePort(env), store, to, id, Date.now(), noLog, step);
      if ('keys' in r) throw new Error('live too early');
      if (r.phase === 'writing') done = r.rows_done;
    }
    // The object replaced for one call (the changed row is the next to write), then put back.
    await env.BLOBS.put(`imports/uploads/${id}`, `${swapped.join('\n')}\n`);
    const during = await importUpload(tenantMovePort(env), store, to, id, Date.now(), noLog, step).then(
      () => 'answered',
      () => 'refused',
    );
    await env.BLOBS.put(`imports/uploads/${id}`, text);
    const after = await importCall(id, to);
    // Whatever the calls answered, the executor never goes live with the admin's roles, and a
    // file replaced after completion is not imported.
    const live = await shardD1(to)
      .prepare('SELECT roles FROM principals WHERE tenant_id = ? AND principal_id = ?')
      .bind(s.tenant_id, s.executor.principal_id)
      .first<{ roles: string }>();
    expect(live?.roles ?? null).not.toBe(admin.row.roles);
    expect(during).toBe('refused');
    expect(after.status).toBe(500);
    expect(await directoryShard(s.tenant_id)).toBe(from);
    expect(await countOn(to, 'SELECT count(*) AS n FROM principals WHERE tenant_id = ?', s.tenant_id)).toBe(
      0,
    );
    // The way out: abort the staged import, delete the upload, upload the file again.
    expect((await abortHttp(s.tenant_id, to)).status).toBe(200);
    expect((await deleteUpload(id)).status).toBe(200);
    const again = await upload(text);
    expect((await importCall(again, to)).status).toBe(201);
    expect(await directoryShard(s.tenant_id)).toBe(to);
  });
});
