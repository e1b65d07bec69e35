/**
 * A moved tenant's `stored_bytes` counter (issue 10, "moving a tenant between shards is an export
 * / import of its rows"): after an import it is what the usage triggers count for the same rows
 * written normally on the target (`countedStoredBytes`), which for a tenant written by this
 * release is also the source's counter. So a move neither frees quota (a tenant could otherwise
 * shed usage by moving) nor spends it (a tenant could be refused writes it has room for).
 */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { canonicalize } from '../../../src/core/canonical/canonical.js';
import { database } from '../../../src/db/client.js';
import { d1PlatformStore } from '../../../src/db/platform-store.js';
import { d1TenantStore } from '../../../src/db/tenant-store.js';
import { blobStore, receiptHooks } from '../../../src/platform/bindings.js';
import { tenantMovePort } from '../../../src/platform/bindings.js';
import { archiveExpiredReceipts } from '../../../src/services/retention.js';
import type { TenantMovePort } from '../../../src/services/ports.js';
import { exportTenant as exportLines, importTenant } from '../../../src/services/tenant-moves.js';
import { executed, postObservation, rawOutput } from '../storage/observation-helpers.js';
import {
  READ_INPUT,
  approvedApproval,
  authorize,
  countOn,
  countedStoredBytes,
  createRun,
  exportTenant,
  importTo,
  seedTenant,
  shardD1,
  shardOf,
  storedBytesOn,
} from './harness.js';
import { type Row, asStoredBefore0004, toText } from './older-rows.js';
import type { Seeded } from '../../../scripts/seed.js';

const DAY_MS = 86_400_000;

/** Retention on `shard` for `tenant_id` only, at `now` (src/services/retention.ts). */
async function retentionOf(shard: number, tenant_id: string, now: number) {
  const db = database({ DB: shardD1(shard) });
  const listed = await d1PlatformStore(db).retentionWindows(null, 10_000);
  return archiveExpiredReceipts(
    {
      platform: {
        retentionWindows: async (after) =>
          after === null ? listed.filter((w) => w.tenant_id === tenant_id) : [],
      },
      tenant: (id) => d1TenantStore(db, id, receiptHooks(env, { tenant_id: id, shard }), blobStore(env)),
      blobs: blobStore(env),
    },
    now,
  );
}

/** Output above the in-row evidence limit: the observation's evidence goes to R2 (`evidence_bytes`). */
const BIG_OUTPUT = canonicalize({ generation: 8, status: 'rolled_back', notes: 'x'.repeat(4096) });

/** Authorizations, an approval, an execution, observations (one with evidence in R2). */
async function activity(s: Seeded, tag: string) {
  const r = await authorize(s, {
    tool_contract_sha256: s.read_contract_sha256,
    input: READ_INPUT,
    run_id: await createRun(s),
  });
  expect(r.status).toBe(200);
  await approvedApproval(s);
  const small = await executed(s);
  expect((await postObservation(s, { ...rawOutput(s, small), observation_id: `obs-${tag}-1` })).status).toBe(
    201,
  );
  const big = await executed(s, 'succeeded', BIG_OUTPUT);
  expect(
    (await postObservation(s, { ...rawOutput(s, big, BIG_OUTPUT), observation_id: `obs-${tag}-2` })).status,
  ).toBe(201);
}

const count = (shard: number, table: string, tenant_id: string, where = '') =>
  countOn(shard, `SELECT count(*) AS n FROM ${table} WHERE tenant_id = ? ${where}`, tenant_id);

describe('stored bytes after a move', { timeout: 60_000 }, () => {
  it('the target counts exactly what the source counted and what its rows cost, archived receipts included', async () => {
    const s = await seedTenant('bytes-move');
    const from = shardOf(s);
    const to = 1 - from;
    await activity(s, 'a');
    // Everything so far leaves D1 for R2 archives; what follows stays in D1.
    const archived = await retentionOf(from, s.tenant_id, Date.now() + 400 * DAY_MS);
    expect(archived.failed).toBe(0);
    expect(archived.receipts).toBeGreaterThan(0);
    await activity(s, 'b');
    expect(await count(from, 'receipt_archive_entries', s.tenant_id)).toBe(archived.receipts);
    expect(await count(from, 'receipts', s.tenant_id)).toBeGreaterThan(0);
    expect(await count(from, 'receipts', s.tenant_id, 'AND evidence_bytes IS NOT NULL')).toBeGreaterThan(0);

    const source = await storedBytesOn(from, s.tenant_id);
    // The triggers' own count on the source (the premise of the test).
    expect(source).toBe(await countedStoredBytes(from, s.tenant_id));

    const e = await exportTenant(s.tenant_id, true);
    expect(e.status).toBe(200);
    expect((await importTo(to, e.text)).status).toBe(201);
    expect(await storedBytesOn(to, s.tenant_id)).toBe(source);
    expect(await countedStoredBytes(to, s.tenant_id)).toBe(source);
  });

  it('an import resumed after a chunk whose answer was lost counts each row once', async () => {
    const s = await seedTenant('bytes-resumed');
    const from = shardOf(s);
    const to = 1 - from;
    await activity(s, 'a');
    const e = await exportTenant(s.tenant_id, true);
    expect(e.status).toBe(200);
    const source = await storedBytesOn(from, s.tenant_id);
    // The third chunk commits (its rows counted by the triggers), then its answer is lost.
    const real = tenantMovePort(env);
    let chunks = 0;
    const losing: TenantMovePort = {
      ...real,
      async importChunk(shard, staged, chunk, now) {
        const written = await real.importChunk(shard, staged, chunk, now);
        chunks += 1;
        if (chunks === 3) throw new Error('injected: the answer of a committed chunk is lost');
        return written;
      },
    };
    const opts = { chunk_rows: 4 };
    await expect(importTenant(losing, to, e.text, Date.now(), () => {}, opts)).rejects.toThrow(/injected/);
    await importTenant(real, to, e.text, Date.now(), () => {}, opts);
    expect(await storedBytesOn(to, s.tenant_id)).toBe(source);
    expect(await countedStoredBytes(to, s.tenant_id)).toBe(source);
  });

  // A non-freezing export is a snapshot read table by table: the quota row first, the rows after.
  // The counter it carries is not the count of the rows it carries when anything happened between.
  it('writes made while a non-freezing export was read are counted with the rows the file holds', async () => {
    const s = await seedTenant('bytes-during');
    const from = shardOf(s);
    const to = 1 - from;
    await activity(s, 'a');
    const text = await exportMeanwhile(s, () => activity(s, 'b'));
    const exported = quotaOf(text).stored_bytes as number;
    // The file holds the rows written after its counter was read: the counter is short.
    expect(exported).toBeLessThan(await storedBytesOn(from, s.tenant_id));
    expect((await importTo(to, text)).status).toBe(201);
    const counted = await countedStoredBytes(to, s.tenant_id);
    expect(counted).toBeGreaterThan(exported);
    expect(await storedBytesOn(to, s.tenant_id)).toBe(counted);
  });

  it('receipts archived while a non-freezing export was read count their archive entries, 200 bytes each', async () => {
    const s = await seedTenant('bytes-archived');
    const from = shardOf(s);
    const to = 1 - from;
    await activity(s, 'a');
    const text = await exportMeanwhile(s, async () => {
      const archived = await retentionOf(from, s.tenant_id, Date.now() + 400 * DAY_MS);
      expect(archived.receipts).toBeGreaterThan(0);
    });
    const rows = parse(text);
    expect(rows.some((r) => r.table === 'receipts')).toBe(false);
    expect(rows.filter((r) => r.table === 'receipt_archive_entries').length).toBeGreaterThan(0);
    const exported = quotaOf(text).stored_bytes as number;
    // The counter still holds every receipt's full cost; the file holds 200 bytes for each.
    expect(exported).toBeGreaterThan(await storedBytesOn(from, s.tenant_id));
    expect((await importTo(to, text)).status).toBe(201);
    const counted = await countedStoredBytes(to, s.tenant_id);
    expect(counted).toBe(await storedBytesOn(from, s.tenant_id));
    expect(await storedBytesOn(to, s.tenant_id)).toBe(counted);
  });

  it('rows stored before the positional encodings count what the target stores, not what the source did', async () => {
    const s = await seedTenant('bytes-older');
    const from = shardOf(s);
    const to = 1 - from;
    await activity(s, 'a');
    const e = await exportTenant(s.tenant_id, true);
    expect(e.status).toBe(200);
    // As a shard from before 0004 and 0016 holds them: receipts wrapped (encoding 1), authorization
    // evidence and signature envelopes as objects (as the file carries them), and its counter the
    // triggers' count of exactly those rows.
    const older = parse(e.text).map(asStoredBefore0004);
    expect(
      older.some((r) => r.table === 'receipt_signatures' && String(r.row.envelope).startsWith('{')),
    ).toBe(true);
    const sourceCount = countOfFile(older);
    const file = toText(
      older.map((r) =>
        r.table === 'tenant_quotas' ? { ...r, row: { ...r.row, stored_bytes: sourceCount } } : r,
      ),
    );
    expect((await importTo(to, file)).status).toBe(201);
    const counted = await countedStoredBytes(to, s.tenant_id);
    // The target stores signatures and authorization evidence positionally: fewer bytes.
    expect(counted).toBeLessThan(sourceCount);
    expect(await storedBytesOn(to, s.tenant_id)).toBe(counted);
  });
});

const parse = (text: string) =>
  text
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as { table: string; row: Row });

const quotaOf = (text: string): Row => {
  const q = parse(text).find((r) => r.table === 'tenant_quotas');
  if (q === undefined) throw new Error('no quota row');
  return q.row;
};

/** A non-freezing export of `s`, with `meanwhile` run once its quota row (the first line) is read. */
async function exportMeanwhile(s: Seeded, meanwhile: () => Promise<unknown>): Promise<string> {
  let text = '';
  for await (const l of exportLines(
    tenantMovePort(env),
    s.tenant_id,
    { freeze: false },
    Date.now(),
    () => {},
  )) {
    if (text === '') {
      expect(JSON.parse(l.line).table).toBe('tenant_quotas');
      text = l.line;
      await meanwhile();
    } else text += l.line;
  }
  return text;
}

/** `countedStoredBytes` of a file's rows as the file holds them (the source shard's triggers' count). */
function countOfFile(rows: readonly { table: string; row: Row }[]): number {
  const bytes = (v: unknown) => (typeof v === 'string' ? new TextEncoder().encode(v).byteLength : 0);
  const live = new Set(rows.filter((r) => r.table === 'receipts').map((r) => r.row.sha256));
  let n = 0;
  for (const { table, row } of rows) {
    if (table === 'receipts')
      n += bytes(row.receipt) + bytes(row.evidence) + Number(row.evidence_bytes ?? 0) + 200;
    else if (table === 'receipt_signatures' || table === 'runs') n += bytes(row.envelope) + 200;
    else if (table === 'approvals') n += bytes(row.input) + bytes(row.target) + 200;
    else if (table === 'grants' || table === 'contracts' || table === 'policies')
      n += bytes(row.document) + 200;
    else if (table === 'receipt_archive_entries' && !live.has(row.sha256)) n += 200;
  }
  return n;
}
