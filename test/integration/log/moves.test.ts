/**
 * The log cursor across tenant moves (docs/transparency-log.md, "The cursor names its shard"): a
 * cursor is a `seq` of one shard's sequence, and a move renumbers the tenant's signature rows on
 * the new shard. The sequencer keeps the shard beside its cursor and rescans the tenant's rows on
 * any other shard the directory names; what is already a leaf is skipped. Also: an object stored
 * before the cursor named its shard rescans once, which repairs a log the old cursor skipped rows of.
 */
import { evictDurableObject, runInDurableObject } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import {
  type LogSequencerObject,
  DRAIN_BATCH,
  DRAIN_MAX_BATCHES,
  logPrefix,
  logSequencerStub,
} from '../../../durable-objects/log-sequencer.js';
import type { Seeded } from '../../../scripts/seed.js';
import { digestOf } from '../../../src/core/canonical/canonical.js';
import { leafHash } from '../../../src/core/log/merkle.js';
import { parseEntryBundle } from '../../../src/core/log/tiles.js';
import { parsePublicKeySet } from '../../../src/core/receipts/keys.js';
import { d1TenantStore } from '../../../src/db/tenant-store.js';
import { receiptSigner } from '../../../src/platform/receipt-keys.js';
import { shardDb } from '../../../src/platform/shards.js';
import { verifyLogConsistency } from '../../../src/verify/log.js';
import { restoreMetaWithoutShard } from './sequencer-schema.js';
import {
  READ_INPUT,
  authorize,
  call,
  createRun,
  directoryShard,
  expectMoveRecorded,
  exportTenant,
  importTo,
  seedTenant,
  shardD1,
  shardOf,
} from '../platform/harness.js';

/** The tenant's store on `shard`, without the commit's kick: only the test drains. */
function quietStore(tenant_id: string, shard: number) {
  return d1TenantStore(shardDb(env, shard), tenant_id, { sign: receiptSigner(env), committed: () => {} });
}

/** A fabricated receipt row of the tenant (the log never interprets bodies). */
function row(tenant_id: string, n: number) {
  const body = { receipt_kind: 'authorization', tenant_id, n };
  return {
    kind: 'authorization',
    receipt: { sha256: digestOf(body), body },
    outcome: 'denied',
    created_at_unix_ms: Date.now(),
  };
}

/** The receipts `shard` holds signatures of for the tenant, in `seq` order. */
async function signatures(shard: number, tenant_id: string) {
  const r = await shardD1(shard)
    .prepare('SELECT seq, receipt_sha256 FROM receipt_signatures WHERE tenant_id = ? ORDER BY seq')
    .bind(tenant_id)
    .all<{ seq: number; receipt_sha256: string }>();
  return r.results;
}

/** The highest `seq` on `shard` (rows are never deleted: the table is append-only). */
async function top(shard: number): Promise<number> {
  const r = await shardD1(shard)
    .prepare('SELECT coalesce(max(seq), 0) AS m FROM receipt_signatures')
    .first<{ m: number }>();
  return r?.m ?? 0;
}

/** Every leaf of the object, in index order: its receipt digests. */
function leaves(log: DurableObjectStub<LogSequencerObject>): Promise<string[]> {
  return runInDurableObject(log, (_o: LogSequencerObject, state) =>
    state.storage.sql
      .exec<{ receipt_sha256: string }>('SELECT receipt_sha256 FROM leaf ORDER BY idx')
      .toArray()
      .map((r) => r.receipt_sha256),
  );
}

async function authorized(s: Seeded, agent_key = s.agent.api_key): Promise<string> {
  const run = await call('POST', '/v1/runs', {
    key: agent_key,
    body: { max_calls: 5, max_external_writes: 1, max_duration_ms: 600_000 },
  });
  expect(run.status).toBe(201);
  const r = await call('POST', '/v1/authorize', {
    key: agent_key,
    body: { tool_contract_sha256: s.read_contract_sha256, input: READ_INPUT, run_id: run.body.run_id },
  });
  expect(r.status).toBe(200);
  return r.body.receipt.sha256 as string;
}

async function trustedKeys() {
  const r = await call('GET', '/.well-known/writ-keys');
  expect(r.status).toBe(200);
  const k = parsePublicKeySet(r.body);
  if (!k.ok) throw new Error(k.error.message);
  return k.value;
}

describe('the log cursor names the shard it counts on', () => {
  it('a move after a non-freezing export: every receipt of the new shard is logged once, in commit order, consistent with the checkpoint before', async () => {
    const s = await seedTenant('log-shard');
    const from = shardOf(s);
    const to = 1 - from;
    const log = logSequencerStub(env, s.tenant_id);
    const before: string[] = [];
    for (let i = 0; i < 2; i++) {
      const r = await authorize(s, {
        tool_contract_sha256: s.read_contract_sha256,
        input: READ_INPUT,
        run_id: await createRun(s),
      });
      expect(r.status).toBe(200);
      before.push(r.body.receipt.sha256 as string);
    }
    await log.drain(s.tenant_id);

    // Not frozen: the old copy still takes receipts after the export.
    const e = await exportTenant(s.tenant_id);
    expect(e.status).toBe(200);
    // The old shard's sequence ahead of the new one's (a busier shard): the receipt the old copy
    // takes next gets a `seq` above every one the import and the new shard's next receipts get.
    // An execution signature: the quota triggers count it, never refuse it (no quota row needed).
    await shardD1(from)
      .prepare(
        `INSERT INTO receipt_signatures (seq, tenant_id, receipt_sha256, envelope, created_at_unix_ms) VALUES (?, 'ten-seqpad', ?, '{"receipt_kind":"execution"}', 0)`,
      )
      .bind(Math.max(await top(from), await top(to)) + 1000, crypto.randomUUID())
      .run();
    const late = await authorized(s);
    // A drain on the old shard logs it: the cursor is now a `seq` above the new shard's rows.
    await log.drain(s.tenant_id);
    const older = await log.checkpoint(s.tenant_id);
    expect(older.size).toBe(3);
    const lateSeq = (await signatures(from, s.tenant_id)).find((r) => r.receipt_sha256 === late)?.seq;

    const imported = await importTo(to, e.text);
    expect(imported.status).toBe(201);
    expect(await directoryShard(s.tenant_id)).toBe(to);
    await expectMoveRecorded(s, from, to);
    // The export predates `late`: the new shard has the two earlier receipts, not it.
    expect((await signatures(to, s.tenant_id)).map((r) => r.receipt_sha256)).toEqual(before);
    const keys = imported.body.keys as { principal_id: string; api_key: string }[];
    const agent = keys.find((k) => k.principal_id === s.agent.principal_id)?.api_key as string;
    const after = [await authorized(s, agent)];
    const store = quietStore(s.tenant_id, to);
    for (let i = 0; i < 4; i++) {
      const r = row(s.tenant_id, i);
      await store.insertReceipt(r);
      after.push(r.receipt.sha256);
    }
    const onNew = await signatures(to, s.tenant_id);
    expect(onNew.map((r) => r.receipt_sha256)).toEqual([...before, ...after]);
    // The bug this guards against: the new shard numbered these rows below the old cursor.
    for (const r of onNew) expect(r.seq).toBeLessThan(lateSeq as number);

    // Part of the rescan, an eviction, then the rest (the alarm may also run it: same outcome).
    await log.drain(s.tenant_id, 2, 1);
    await evictDurableObject(log);
    await log.drain(s.tenant_id);
    await evictDurableObject(log);

    const logged = [...before, late, ...after];
    expect(await leaves(log)).toEqual(logged);
    const newer = await log.checkpoint(s.tenant_id);
    expect(newer.size).toBe(logged.length);
    for (const r of onNew) {
      expect(await log.inclusion(s.tenant_id, r.receipt_sha256)).toMatchObject({
        status: 'included',
        index: logged.indexOf(r.receipt_sha256),
        size: logged.length,
      });
    }
    const cons = await log.consistency(s.tenant_id, older.size, newer.size);
    if (!cons.ok) throw new Error(cons.message);
    expect(
      verifyLogConsistency(older.checkpoint, newer.checkpoint, cons.proof, await trustedKeys(), s.tenant_id),
    ).toMatchObject({ ok: true, value: { from: 3, to: logged.length } });
    expect((await log.drain(s.tenant_id)).appended).toBe(0);
  });

  it('an object stored before the cursor named its shard rescans the current shard once: rows the old cursor had passed are logged', async () => {
    const s = await seedTenant('log-legacy');
    const shard = shardOf(s);
    const store = quietStore(s.tenant_id, shard);
    const shas: string[] = [];
    const insert = async (n: number) => {
      const r = row(s.tenant_id, n);
      await store.insertReceipt(r);
      shas.push(r.receipt.sha256);
    };
    for (let i = 0; i < 3; i++) await insert(i);
    const log = logSequencerStub(env, s.tenant_id);
    expect(await log.drain(s.tenant_id)).toEqual({ appended: 3, size: 3, more: false });
    for (let i = 3; i < 6; i++) await insert(i);
    const rows = await signatures(shard, s.tenant_id);
    // The layout of schema version 1 (no shard beside the cursor), with the cursor past the last
    // three rows, as a move could leave it: those rows were never read.
    const past = rows[rows.length - 1]?.seq as number;
    await runInDurableObject(log, (_o: LogSequencerObject, state) => {
      restoreMetaWithoutShard(state.storage.sql, 1, past);
    });
    await evictDurableObject(log);

    // Bounded: a call reads at most its batches, the rows already logged included (this one read
    // the first two and appended nothing); the alarm it armed may run the rest (same outcome).
    expect(await log.drain(s.tenant_id, 2, 1)).toEqual({ appended: 0, size: 3, more: true });
    await log.drain(s.tenant_id, DRAIN_BATCH, DRAIN_MAX_BATCHES);
    expect(await leaves(log)).toEqual(shas);
    for (const [index, sha] of shas.entries())
      expect(await log.inclusion(s.tenant_id, sha)).toMatchObject({ status: 'included', index, size: 6 });
    // Upgraded in place: the cursor now names the shard it counts on.
    const meta = await runInDurableObject(log, (_o: LogSequencerObject, state) => ({
      v: state.storage.sql.exec<{ v: number }>('SELECT v FROM schema_version').one().v,
      meta: state.storage.sql
        .exec<{ shard: number | null; cursor: number }>('SELECT shard, cursor FROM meta')
        .one(),
    }));
    expect(meta).toEqual({ v: 4, meta: { shard, cursor: past } });
    expect((await log.drain(s.tenant_id)).appended).toBe(0);
  });
  it('a drain cut short after its R2 writes, then a move that leaves the row it read behind: the objects at that size are replaced by the logged leaves', async () => {
    const s = await seedTenant('log-cutmove');
    const from = shardOf(s);
    const to = 1 - from;
    const log = logSequencerStub(env, s.tenant_id);
    const before: string[] = [];
    for (let i = 0; i < 2; i++) before.push(await authorized(s));
    await log.drain(s.tenant_id);
    // Not frozen: the old copy takes `late` after the export.
    const e = await exportTenant(s.tenant_id);
    expect(e.status).toBe(200);
    const late = await authorized(s);
    // A drain reads `late`, writes its tiles and bundle (size 3) to R2, and dies before its commit.
    const cut = await runInDurableObject(log, async (o: LogSequencerObject, state) => {
      const storage = new Proxy(state.storage, {
        get(target, prop) {
          if (prop === 'transactionSync')
            return () => {
              throw new Error('cut short');
            };
          const v: unknown = Reflect.get(target, prop);
          return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
        },
      });
      const ctx = new Proxy(state, {
        get(target, prop) {
          if (prop === 'storage') return storage;
          const v: unknown = Reflect.get(target, prop);
          return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
        },
      });
      Reflect.set(o, 'ctx', ctx);
      try {
        return await o.drain(s.tenant_id).then(
          () => 'drained',
          (err: unknown) => (err instanceof Error ? err.message : String(err)),
        );
      } finally {
        Reflect.set(o, 'ctx', state);
      }
    });
    expect(cut).toBe('cut short');
    const tile = `${logPrefix(s.tenant_id)}tile/0/000.p/3`;
    const bundle = `${logPrefix(s.tenant_id)}tile/entries/000.p/3`;
    expect(await env.LOG_TILES.head(tile)).not.toBeNull();
    expect((await log.checkpoint(s.tenant_id)).size).toBe(2);

    // The move: the new shard has the two earlier receipts, not `late` (it stays behind).
    const imported = await importTo(to, e.text);
    expect(imported.status).toBe(201);
    const keys = imported.body.keys as { principal_id: string; api_key: string }[];
    const agent = keys.find((k) => k.principal_id === s.agent.principal_id)?.api_key as string;
    const next = await authorized(s, agent);
    expect((await signatures(to, s.tenant_id)).map((r) => r.receipt_sha256)).toEqual([...before, next]);

    // The redo on the new shard puts `next` at index 2: the size-3 objects must be its, not the
    // cut-short drain's (which no checkpoint ever named), or the published checkpoint's tiles lie.
    expect(await log.drain(s.tenant_id)).toMatchObject({ appended: 1, size: 3 });
    expect(await leaves(log)).toEqual([...before, next]);
    const envelopes = await Promise.all(
      [...before, next].map(
        async (sha) => (await quietStore(s.tenant_id, to).receiptSignature(sha))!.envelope,
      ),
    );
    const entries = envelopes.map((t) => new TextEncoder().encode(t));
    const stored = new Uint8Array(await (await env.LOG_TILES.get(tile))!.arrayBuffer());
    expect(stored).toEqual(new Uint8Array(entries.flatMap((x) => [...leafHash(x)])));
    const b = parseEntryBundle(new Uint8Array(await (await env.LOG_TILES.get(bundle))!.arrayBuffer()), 3);
    if (!b.ok) throw new Error(b.error.message);
    expect(b.value).toEqual(entries);
    expect(late).not.toBe(next);
  });
});
