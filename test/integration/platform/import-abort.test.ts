/**
 * The two ways out of a tenant move that did not finish (src/services/tenant-moves.ts,
 * migrations/0013): aborting a staged import (`POST /v1/tenants/import/{tenant_id}/abort`), which
 * marks it `aborting` first so no batch of it commits any more, then deletes its rows in bounded
 * batches; and retrying an import that went live but whose directory write failed, which re-keys
 * the live principals (the failed attempt's keys were never delivered), records the directory and
 * freezes the old copy. The append-only tables still refuse every delete of a live tenant's rows.
 */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { sha256HexOfText } from '../../../src/core/canonical/canonical.js';
import { apiKeyDigest } from '../../../src/core/identity/identity.js';
import { tenantMovePort } from '../../../src/platform/bindings.js';
import type { TenantMovePort, TenantRow } from '../../../src/services/ports.js';
import { abortImport, importTenant } from '../../../src/services/tenant-moves.js';
import { database } from '../../../src/db/client.js';
import { d1PlatformStore } from '../../../src/db/platform-store.js';
import { d1TenantStore } from '../../../src/db/tenant-store.js';
import { blobStore, receiptHooks } from '../../../src/platform/bindings.js';
import { archiveExpiredReceipts } from '../../../src/services/retention.js';
import {
  ADMIN_TOKEN,
  approvedApproval,
  authorize,
  call,
  countOn,
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

const noLog = () => undefined;

const abortHttp = (tenant_id: string, shard: number | string) =>
  call('POST', `/v1/tenants/import/${tenant_id}/abort?shard=${shard}`, { key: ADMIN_TOKEN });

const importHttp = (shard: number, text: string) =>
  call('POST', `/v1/tenants/import?shard=${shard}`, {
    key: ADMIN_TOKEN,
    raw: text,
    headers: { 'content-type': 'application/x-ndjson' },
  });

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
  const rows = text
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as TenantRow);
  return { s, text, rows, from: shardOf(s), to: 1 - shardOf(s) };
}

/** The real port with the import's chunk number `failAt` (1-based) failing before it reaches D1. */
function failingChunk(failAt: number): TenantMovePort {
  const real = tenantMovePort(env);
  let chunks = 0;
  return {
    ...real,
    async importChunk(shard, st, chunk, now) {
      chunks += 1;
      if (chunks === failAt) throw new Error('injected failure in a chunk');
      return real.importChunk(shard, st, chunk, now);
    },
  };
}

/**
 * A tenant staged on the other shard: half written (the import died in its third chunk), or
 * fully written (it died keying the principals: every receipt, signature and approval is staged,
 * and only the flip was left).
 */
async function stagedTenant(prefix: string, upTo: 'half' | 'all') {
  const e = await exported(prefix);
  const real = tenantMovePort(env);
  const port: TenantMovePort =
    upTo === 'half'
      ? failingChunk(3)
      : {
          ...real,
          keyPrincipals() {
            return Promise.reject(new Error('injected failure keying the principals'));
          },
        };
  await expect(importTenant(port, e.to, e.text, Date.now(), noLog, { chunk_rows: 4 })).rejects.toThrow(
    /injected/,
  );
  expect(
    await countOn(e.to, 'SELECT rows_done AS n FROM tenant_imports WHERE tenant_id = ?', e.s.tenant_id),
  ).toBe(upTo === 'half' ? 8 : e.rows.length);
  expect(await tenantRowsOn(e.to, e.s.tenant_id)).toBeGreaterThan(0);
  return e;
}

describe('aborting a staged import', () => {
  it('with nothing staged is a 404; a bad shard a 400; without the admin token a 401', async () => {
    expect((await abortHttp('ten-nothinghere', 0)).status).toBe(404);
    expect((await abortHttp('ten-nothinghere', 1)).body.error.code).toBe('not_found');
    expect((await abortHttp('not an id', 0)).status).toBe(404);
    expect((await abortHttp('ten-nothinghere', 7)).status).toBe(400);
    expect((await abortHttp('ten-nothinghere', 'x')).status).toBe(400);
    const anon = await call('POST', '/v1/tenants/import/ten-nothinghere/abort?shard=0');
    expect(anon.status).toBe(401);
  });

  it('of a live tenant, or of a frozen copy, is refused and deletes nothing', async () => {
    const { s, text, from, to } = await exported('abort-live');
    const before = await leftOn(from, s.tenant_id);
    const r = await abortHttp(s.tenant_id, from);
    expect(r.status).toBe(409);
    expect(await leftOn(from, s.tenant_id)).toBe(before);
    // Moved: the target copy is live, the source copy frozen; neither can be aborted.
    expect((await importHttp(to, text)).status).toBe(201);
    const live = await leftOn(to, s.tenant_id);
    expect((await abortHttp(s.tenant_id, to)).status).toBe(409);
    expect((await abortHttp(s.tenant_id, from)).status).toBe(409);
    expect(await leftOn(to, s.tenant_id)).toBe(live);
    expect(await leftOn(from, s.tenant_id)).toBe(before);
  });

  it('runs in several batches, is resumed after a failure, and fences the import off from the start', async () => {
    const { s, text, rows, to } = await stagedTenant('abort-chunks', 'all');
    const real = tenantMovePort(env);
    const calls = { n: 0 };
    const dying: TenantMovePort = {
      ...real,
      async abortChunk(shard, tenant_id, max) {
        calls.n += 1;
        if (calls.n === 3) throw new Error('injected failure in an abort batch');
        return real.abortChunk(shard, tenant_id, max);
      },
    };
    // A staged archive manifest: its mark for the orphan collector goes with it (else the
    // collector would wait for it, or fail on it, forever).
    const archive = sha256HexOfText(`archive of ${s.tenant_id}`);
    await shardD1(to)
      .prepare(
        'INSERT INTO receipt_archives (tenant_id, archive_sha256, day, receipts, bytes, created_at_unix_ms) VALUES (?, ?, 1, 1, 1, 1)',
      )
      .bind(s.tenant_id, archive)
      .run();
    const marks = () =>
      countOn(to, 'SELECT count(*) AS n FROM blob_archives_unindexed WHERE archive_sha256 = ?', archive);
    expect(await marks()).toBe(1);
    const staged = await leftOn(to, s.tenant_id);
    await expect(abortImport(dying, to, s.tenant_id, Date.now(), noLog, { chunk_rows: 2 })).rejects.toThrow(
      /injected/,
    );
    // Two batches of two rows went; the mark says aborting.
    for (const table of ['receipts', 'receipt_signatures', 'approvals'])
      expect(
        await countOn(to, `SELECT count(*) AS n FROM ${table} WHERE tenant_id = ?`, s.tenant_id),
      ).toBeGreaterThan(0);
    expect(await leftOn(to, s.tenant_id)).toBe(staged - 4);
    const state = await shardD1(to)
      .prepare('SELECT state FROM tenant_imports WHERE tenant_id = ?')
      .bind(s.tenant_id)
      .first<{ state: string }>();
    expect(state?.state).toBe('aborting');

    // From the mark on, no batch of the import commits, even one cut for its exact progress.
    const st = { tenant_id: s.tenant_id, file_sha256: sha256HexOfText(text), rows_total: rows.length };
    // (Every row was written: without the mark, the flip and the keys below would commit.)
    const quota = rows.find((r) => r.table === 'tenant_quotas') as TenantRow;
    expect(await real.goLive(to, st, quota, 1 - to, Date.now())).toBe('moved');
    expect(
      await real.keyPrincipals(to, st, [
        { principal_id: s.admin.principal_id, key_sha256: apiKeyDigest('x') },
      ]),
    ).toBe('moved');
    expect(await real.beginImport(to, st, Date.now())).toBe('aborting');
    // Sending the file again while the abort is unfinished: refused, nothing written.
    const early = await importHttp(to, text);
    expect(early.status).toBe(409);
    expect(early.body.error.message).toMatch(/abort .* has not finished/);
    expect(await leftOn(to, s.tenant_id)).toBe(staged - 4);

    // Called again, the abort goes on where it stopped and removes everything.
    const done = await abortHttp(s.tenant_id, to);
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ tenant_id: s.tenant_id, shard: to, aborted: true });
    expect(await leftOn(to, s.tenant_id)).toBe(0);
    expect(
      await countOn(to, 'SELECT count(*) AS n FROM tenant_quotas WHERE tenant_id = ?', s.tenant_id),
    ).toBe(0);
    expect((await abortHttp(s.tenant_id, to)).status).toBe(404);
    expect(calls.n).toBe(3);
    expect(await marks()).toBe(0);

    // The same file afterwards starts over, from row 0, and goes live whole.
    const fields: Record<string, unknown> = {};
    const again = await importTenant(real, to, text, Date.now(), (f) => Object.assign(fields, f));
    expect(fields.resumed_at_row).toBe(0);
    expect(await tenantRowsOn(to, s.tenant_id)).toBe(rows.length);
    const admin = again.keys.find((k) => k.principal_id === s.admin.principal_id)?.api_key as string;
    expect((await call('GET', '/v1/policy', { key: admin })).status).toBe(200);
  });

  it('wins a race with a chunk that was about to commit: the chunk writes nothing', async () => {
    const { s, text, rows, to } = await stagedTenant('abort-race', 'half');
    const real = tenantMovePort(env);
    const before = await leftOn(to, s.tenant_id);
    expect(await real.markAbort(to, s.tenant_id, Date.now())).toBe('aborting');
    const st = { tenant_id: s.tenant_id, file_sha256: sha256HexOfText(text), rows_total: rows.length };
    expect(
      await real.importChunk(to, st, { from: 8, rows: rows.slice(8, 12), exported_max_seq: 0 }, Date.now()),
    ).toBe('moved');
    expect(await leftOn(to, s.tenant_id)).toBe(before);
    // A resumed import of the same file stops at its first chunk, also after the mark.
    await expect(importTenant(real, to, text, Date.now(), noLog)).rejects.toMatchObject({
      reason: 'conflict',
    });
    expect(await leftOn(to, s.tenant_id)).toBe(before);
    const r = await abortHttp(s.tenant_id, to);
    expect(r.status).toBe(200);
    expect(r.body.rows_deleted).toBeGreaterThan(0);
    expect(await leftOn(to, s.tenant_id)).toBe(0);
  });
});

describe('the append-only tables', () => {
  it('still refuse every delete of a live tenant, also with a forged mark', async () => {
    const { s, from } = await exported('append-only');
    const d1 = shardD1(from);
    const t = s.tenant_id;
    await d1
      .prepare(
        'INSERT INTO receipt_archives (tenant_id, archive_sha256, day, receipts, bytes, created_at_unix_ms) VALUES (?, ?, 1, 1, 1, 1)',
      )
      .bind(t, 'b'.repeat(64))
      .run();
    await d1
      .prepare('INSERT INTO receipt_archive_entries (tenant_id, sha256, archive_sha256) VALUES (?, ?, ?)')
      .bind(t, 'c'.repeat(64), 'b'.repeat(64))
      .run();
    const guarded: [string, RegExp][] = [
      ['receipts', /receipt_immutable/],
      ['receipt_signatures', /receipt_signature_immutable/],
      ['receipt_archives', /receipt_archive_immutable/],
      ['receipt_archive_entries', /receipt_archive_immutable/],
      ['approvals', /approval_immutable/],
    ];
    const rowsOf = async (table: string) =>
      countOn(from, `SELECT count(*) AS n FROM ${table} WHERE tenant_id = ?`, t);
    const tryDeletes = async () => {
      for (const [table, message] of guarded) {
        const n = await rowsOf(table);
        expect(n).toBeGreaterThan(0);
        await expect(d1.prepare(`DELETE FROM ${table} WHERE tenant_id = ?`).bind(t).run()).rejects.toThrow(
          message,
        );
        expect(await rowsOf(table)).toBe(n);
      }
    };
    // (The manifest's object does not exist: its collector mark must not outlive this test.)
    await d1
      .prepare('DELETE FROM blob_archives_unindexed WHERE archive_sha256 = ?')
      .bind('b'.repeat(64))
      .run();
    await tryDeletes();
    // A mark cannot be opened for a tenant that has rows here, so the exception never applies.
    await expect(
      d1
        .prepare(
          "INSERT INTO tenant_imports (tenant_id, file_sha256, rows_total, rows_done, started_at_unix_ms, updated_at_unix_ms, state) VALUES (?, ?, 1, 0, 0, 0, 'aborting')",
        )
        .bind(t, 'd'.repeat(64))
        .run(),
    ).rejects.toThrow(/import_tenant_exists/);
    await tryDeletes();
    // Nor can a live principal's key change without an unrecorded import of the tenant.
    await expect(
      d1
        .prepare('UPDATE principals SET key_sha256 = ? WHERE tenant_id = ? AND principal_id = ?')
        .bind('e'.repeat(64), t, s.agent.principal_id)
        .run(),
    ).rejects.toThrow(/principal_immutable/);
  });

  it('refuse deletes of a staged import that is not aborting', async () => {
    const { s, to } = await stagedTenant('append-staged', 'all');
    const n = await countOn(to, 'SELECT count(*) AS n FROM receipts WHERE tenant_id = ?', s.tenant_id);
    expect(n).toBeGreaterThan(0);
    await expect(
      shardD1(to).prepare('DELETE FROM receipts WHERE tenant_id = ?').bind(s.tenant_id).run(),
    ).rejects.toThrow(/receipt_immutable/);
    expect(await countOn(to, 'SELECT count(*) AS n FROM receipts WHERE tenant_id = ?', s.tenant_id)).toBe(n);
  });
});

/** The real port whose first `record` throws, as when shard 0 is unreachable at that moment. */
function failingRecord(): TenantMovePort {
  const real = tenantMovePort(env);
  let failed = false;
  return {
    ...real,
    async record(t) {
      if (!failed) {
        failed = true;
        throw new Error('injected failure of the directory write');
      }
      return real.record(t);
    },
  };
}

const keyDigests = async (shard: number, tenant_id: string) =>
  (
    await shardD1(shard)
      .prepare(
        'SELECT key_sha256 FROM principals WHERE tenant_id = ? AND revoked_at_unix_ms IS NULL ORDER BY principal_id',
      )
      .bind(tenant_id)
      .all<{ key_sha256: string }>()
  ).results.map((r) => r.key_sha256);

describe('an import whose directory write failed after it went live', () => {
  it('is finished by the same file: new keys, the directory, the old copy frozen', async () => {
    const { s, text, rows, from, to } = await exported('rekey');
    await expect(importTenant(failingRecord(), to, text, Date.now(), noLog)).rejects.toThrow(/injected/);
    expect(await directoryShard(s.tenant_id)).toBe(from);
    expect(await tenantRowsOn(to, s.tenant_id)).toBe(rows.length);
    const undelivered = await keyDigests(to, s.tenant_id);
    expect(undelivered.length).toBeGreaterThan(0);

    // Another export of the tenant is not this import: refused, nothing changes.
    const other = `${text.trimEnd().split('\n').slice(0, -1).join('\n')}\n`;
    expect((await importHttp(to, other)).status).toBe(409);
    expect(await keyDigests(to, s.tenant_id)).toEqual(undelivered);

    const retry = await importHttp(to, text);
    expect(retry.status).toBe(201);
    expect(retry.body).toMatchObject({ tenant_id: s.tenant_id, shard: to, previous_shard: from });
    expect(await directoryShard(s.tenant_id)).toBe(to);
    // Every live principal has a new key digest: the failed attempt's keys match none.
    const now = await keyDigests(to, s.tenant_id);
    expect(now).toHaveLength(undelivered.length);
    for (const d of undelivered) expect(now).not.toContain(d);
    const keys = retry.body.keys as { principal_id: string; api_key: string }[];
    expect(keys).toHaveLength(undelivered.length);
    expect(keys.map((k) => apiKeyDigest(k.api_key)).sort()).toEqual([...now].sort());
    const admin = keys.find((k) => k.principal_id === s.admin.principal_id)?.api_key as string;
    expect((await call('GET', '/v1/policy', { key: admin })).status).toBe(200);
    // The old copy is frozen, its keys fail; the re-keying window is closed.
    await expectMoveRecorded(s, from, to);

    // Once the directory points at the target, the same file is refused and changes nothing.
    expect((await importHttp(to, text)).status).toBe(409);
    expect(await keyDigests(to, s.tenant_id)).toEqual(now);
    expect((await call('GET', '/v1/policy', { key: admin })).status).toBe(200);
  });

  it('a successful import leaves no re-keying window', async () => {
    const { s, text, to } = await exported('rekey-none');
    expect((await importHttp(to, text)).status).toBe(201);
    expect(
      await countOn(
        to,
        'SELECT count(*) AS n FROM tenant_imports_unrecorded WHERE tenant_id = ?',
        s.tenant_id,
      ),
    ).toBe(0);
    const port = tenantMovePort(env);
    expect(await port.beginRekey(to, s.tenant_id, sha256HexOfText(text), Date.now())).toBe('none');
  });

  it('two retries at once: the earlier one writes nothing more, only the later one records', async () => {
    const { s, text, to } = await exported('rekey-race');
    await expect(importTenant(failingRecord(), to, text, Date.now(), noLog)).rejects.toThrow(/injected/);
    const port = tenantMovePort(env);
    const file = sha256HexOfText(text);
    const first = await port.beginRekey(to, s.tenant_id, file, Date.now());
    const second = await port.beginRekey(to, s.tenant_id, file, Date.now());
    if (first === 'none' || first === 'other_file' || second === 'none' || second === 'other_file')
      throw new Error('no unrecorded import');
    expect(second.attempt).toBe(first.attempt + 1);
    const before = await keyDigests(to, s.tenant_id);
    const key = [{ principal_id: s.admin.principal_id, key_sha256: apiKeyDigest('writ_1_stale') }];
    expect(await port.rekeyPrincipals(to, s.tenant_id, first.attempt, key)).toBe('moved');
    expect(await port.settleImport(to, s.tenant_id, first.attempt)).toBe('moved');
    expect(await keyDigests(to, s.tenant_id)).toEqual(before);
    expect(await port.beginRekey(to, s.tenant_id, '0'.repeat(64), Date.now())).toBe('other_file');
    // The file sent again takes the next attempt and finishes the move.
    expect((await importHttp(to, text)).status).toBe(201);
    expect(await directoryShard(s.tenant_id)).toBe(to);
  });
});

/**
 * Shard 0's binding (it holds the directory) whose first directory write (`UPDATE tenant_shards`)
 * commits and then throws, as an answer lost after the commit. With `reread_fails`, every later
 * read of the directory through it throws too (shard 0 unreachable for the read-back).
 */
interface DirectoryFault {
  readonly reread_fails: boolean;
  tripped?: boolean;
}

function directoryFaulty(d1: D1Database, fault: DirectoryFault): D1Database {
  const writeThenThrow = (stmt: D1PreparedStatement): D1PreparedStatement =>
    new Proxy(stmt, {
      get(t, p) {
        if (p === 'bind') return (...args: unknown[]) => writeThenThrow(t.bind(...args));
        if (p === 'run' || p === 'all' || p === 'raw' || p === 'first')
          return async () => {
            if (fault.tripped === true) return (t.run as () => Promise<unknown>).call(t);
            fault.tripped = true;
            await t.run();
            throw new Error('Network connection lost.');
          };
        const v: unknown = Reflect.get(t, p, t);
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
      },
    });
  return new Proxy(d1, {
    get(t, p) {
      if (p === 'prepare')
        return (q: string) => {
          if (/^update "tenant_shards"/i.test(q)) return writeThenThrow(t.prepare(q));
          if (fault.tripped === true && fault.reread_fails && /from "tenant_shards"/i.test(q))
            throw new Error('D1_ERROR: shard 0 unreachable');
          return t.prepare(q);
        };
      const v: unknown = Reflect.get(t, p, t);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
    },
  });
}

const directoryFaultyPort = (fault: DirectoryFault) =>
  tenantMovePort({ ...env, DB: directoryFaulty(env.DB, fault) } as Env);

/** A tenant with receipts, exported without freezing: its old copy stays live until the move is recorded. */
async function exportedLive(prefix: string) {
  const s = await seedTenant(prefix);
  const r = await authorize(s, {
    tool_contract_sha256: s.read_contract_sha256,
    input: READ_INPUT,
    run_id: await createRun(s),
  });
  expect(r.status).toBe(200);
  const { status, text } = await exportTenant(s.tenant_id, false);
  expect(status).toBe(200);
  return { s, text, from: shardOf(s), to: 1 - shardOf(s) };
}

const unrecordedOn = (shard: number, tenant_id: string) =>
  countOn(shard, 'SELECT count(*) AS n FROM tenant_imports_unrecorded WHERE tenant_id = ?', tenant_id);

describe('an import whose directory write committed but answered an error', () => {
  it('is finished by the same file: new keys, the old copy frozen, the window closed', async () => {
    const { s, text, from, to } = await exportedLive('dir-committed');
    const fault: DirectoryFault = { reread_fails: true };
    await expect(importTenant(directoryFaultyPort(fault), to, text, Date.now(), noLog)).rejects.toThrow(
      /update "tenant_shards"/,
    );
    expect(fault.tripped).toBe(true);
    // The directory names the target, but nothing was delivered and the old copy still answers.
    expect(await directoryShard(s.tenant_id)).toBe(to);
    expect(await unrecordedOn(to, s.tenant_id)).toBe(1);
    expect((await call('GET', '/v1/policy', { key: s.admin.api_key })).status).toBe(200);
    const undelivered = await keyDigests(to, s.tenant_id);

    // Another export of the tenant is not this import: refused, nothing changes.
    const other = `${text.trimEnd().split('\n').slice(0, -1).join('\n')}\n`;
    expect((await importHttp(to, other)).status).toBe(409);
    expect(await keyDigests(to, s.tenant_id)).toEqual(undelivered);
    expect(await unrecordedOn(to, s.tenant_id)).toBe(1);

    const retry = await importHttp(to, text);
    expect(retry.status).toBe(201);
    expect(retry.body).toMatchObject({ tenant_id: s.tenant_id, shard: to, previous_shard: from });
    const keys = retry.body.keys as { principal_id: string; api_key: string }[];
    const now = await keyDigests(to, s.tenant_id);
    expect(keys.map((k) => apiKeyDigest(k.api_key)).sort()).toEqual([...now].sort());
    for (const d of undelivered) expect(now).not.toContain(d);
    const admin = keys.find((k) => k.principal_id === s.admin.principal_id)?.api_key as string;
    expect((await call('GET', '/v1/policy', { key: admin })).status).toBe(200);
    await expectMoveRecorded(s, from, to);
    expect(await directoryShard(s.tenant_id)).toBe(to);

    // Delivered once: the same file again is refused and changes nothing.
    expect((await importHttp(to, text)).status).toBe(409);
    expect(await keyDigests(to, s.tenant_id)).toEqual(now);
  });

  it('read back by the call itself, answers the keys there and then', async () => {
    const { s, text, from, to } = await exportedLive('dir-readback');
    const fault: DirectoryFault = { reread_fails: false };
    const imported = await importTenant(directoryFaultyPort(fault), to, text, Date.now(), noLog);
    expect(fault.tripped).toBe(true);
    expect(imported).toMatchObject({ tenant_id: s.tenant_id, shard: to, previous_shard: from });
    const admin = imported.keys.find((k) => k.principal_id === s.admin.principal_id)?.api_key as string;
    expect((await call('GET', '/v1/policy', { key: admin })).status).toBe(200);
    await expectMoveRecorded(s, from, to);
    expect((await importHttp(to, text)).status).toBe(409);
  });

  it('is refused when the directory names the target for another reason', async () => {
    // A tenant created on the shard (never imported there): its own export is refused.
    const { s: here, text: itself } = await exportedLive('dir-native');
    const native = shardOf(here);
    expect((await importHttp(native, itself)).status).toBe(409);
    expect((await call('GET', '/v1/policy', { key: here.admin.api_key })).status).toBe(200);

    // An import that went live before migration 0014 does not say where the tenant came from:
    // no copy is guessed and frozen, nothing changes.
    const { s, text, to } = await exportedLive('dir-unknown');
    await expect(
      importTenant(directoryFaultyPort({ reread_fails: true }), to, text, Date.now(), noLog),
    ).rejects.toThrow(/update "tenant_shards"/);
    await shardD1(to)
      .prepare('UPDATE tenant_imports_unrecorded SET previous_shard = -1 WHERE tenant_id = ?')
      .bind(s.tenant_id)
      .run();
    const undelivered = await keyDigests(to, s.tenant_id);
    const refused = await importHttp(to, text);
    expect(refused.status).toBe(409);
    expect(JSON.stringify(refused.body)).toMatch(/not known/);
    expect(await keyDigests(to, s.tenant_id)).toEqual(undelivered);
    expect(await unrecordedOn(to, s.tenant_id)).toBe(1);
    expect((await call('GET', '/v1/policy', { key: s.admin.api_key })).status).toBe(200);
  });
});

const DAY_MS = 86_400_000;

/**
 * The retention run of `shard` (src/services/retention.ts over the shard's real tenant list),
 * limited to `tenant_id` so other files' tenants cannot spend its budget.
 */
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

const receiptsOn = (shard: number, tenant_id: string) =>
  countOn(shard, 'SELECT count(*) AS n FROM receipts WHERE tenant_id = ?', tenant_id);
const manifestsOn = (shard: number, tenant_id: string) =>
  countOn(shard, 'SELECT count(*) AS n FROM receipt_archives WHERE tenant_id = ?', tenant_id);

describe('retention and an import that is not the tenant yet', () => {
  it('leaves a staged import alone, also once every receipt of it is staged, and an aborted one leaves no archive', async () => {
    const { s, to } = await stagedTenant('retain-staged', 'all');
    const staged = await receiptsOn(to, s.tenant_id);
    expect(staged).toBeGreaterThan(0);
    const later = Date.now() + 400 * DAY_MS;
    expect(await retentionOf(to, s.tenant_id, later)).toMatchObject({ archives: 0, receipts: 0, failed: 0 });
    expect(await receiptsOn(to, s.tenant_id)).toBe(staged);
    expect(await manifestsOn(to, s.tenant_id)).toBe(0);
    // Aborted, nothing of the tenant is left on the target: no manifest, no archive entry.
    expect((await abortHttp(s.tenant_id, to)).status).toBe(200);
    expect(await tenantRowsOn(to, s.tenant_id)).toBe(0);
  });

  it('leaves an import that went live but is not in the directory alone until the move is recorded', async () => {
    const { s, text, from, to } = await exported('retain-unrecorded');
    await expect(importTenant(failingRecord(), to, text, Date.now(), noLog)).rejects.toThrow(/injected/);
    expect(await directoryShard(s.tenant_id)).toBe(from);
    const copied = await receiptsOn(to, s.tenant_id);
    expect(copied).toBeGreaterThan(0);
    const later = Date.now() + 400 * DAY_MS;
    // The copy no key reaches (its keys were never delivered) is not archived: no R2 archive or
    // manifest for a copy the move may still replace, and every row stays as imported.
    expect(await retentionOf(to, s.tenant_id, later)).toMatchObject({ archives: 0, receipts: 0, failed: 0 });
    expect(await receiptsOn(to, s.tenant_id)).toBe(copied);
    expect(await manifestsOn(to, s.tenant_id)).toBe(0);
    // Recorded (the same file again), it is the tenant: retention archives it as any other.
    expect((await importHttp(to, text)).status).toBe(201);
    expect(await directoryShard(s.tenant_id)).toBe(to);
    expect(await retentionOf(to, s.tenant_id, later)).toMatchObject({ receipts: copied, failed: 0 });
    expect(await receiptsOn(to, s.tenant_id)).toBe(0);
  });
});
