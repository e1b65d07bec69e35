/**
 * The public read path of a tenant's log (docs/transparency-log.md, "Public logs"): opt-in by a
 * tenant admin, served without a key at `/log/<tenant_id>/` as C2SP tlog-tiles, byte-equal to the
 * authenticated routes, verifiable from the tiles alone with the published verifier key, and one
 * 404 for an unpublished, unknown or malformed tenant and any malformed path, before storage.
 */
import { evictDurableObject, runInDurableObject } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { logPrefix, logSequencerStub, publicationMarkerKey } from '../../../durable-objects/log-sequencer.js';
import { digestOf } from '../../../src/core/canonical/canonical.js';
import { verifyCheckpoint } from '../../../src/core/log/checkpoint.js';
import { consistencyProof, inclusionProof } from '../../../src/core/log/merkle.js';
import { parseVerifierKey } from '../../../src/core/log/note.js';
import {
  serializeTlogProof,
  verifyCheckpointConsistency,
  verifyTlogProof,
} from '../../../src/core/log/proof.js';
import {
  type Tile,
  entryBundlePath,
  hashReaderFromTiles,
  parseEntryBundle,
  tileFromBytes,
  tilePath,
  tilesForConsistencyProof,
  tilesForInclusionProof,
} from '../../../src/core/log/tiles.js';
import { app } from '../../../src/http/app.js';
import { tenantStore } from '../../../src/platform/bindings.js';
import { BASE, call, seedTenant, tenantRef } from '../platform/harness.js';
import { restoreMetaWithoutShard } from './sequencer-schema.js';

type Seed = Awaited<ReturnType<typeof seedTenant>>;

/** An unauthenticated request, as a witness in another company sends it. */
function anonymous(path: string, method = 'GET', bindings: Partial<Env> = {}): Promise<Response> {
  return Promise.resolve(app.fetch(new Request(`${BASE}${path}`, { method }), { ...env, ...bindings }));
}

async function bytesOf(res: Response): Promise<Uint8Array> {
  return new Uint8Array(await res.arrayBuffer());
}

/** The authenticated route's answer for the same resource. */
async function authenticated(key: string, path: string): Promise<Response> {
  return app.fetch(
    new Request(`${BASE}/v1/log/${path}`, { headers: { authorization: `Bearer ${key}` } }),
    env,
  );
}

/** What a 404 says, without its request id (which differs per request). */
async function notFoundShape(res: Response) {
  const body = (await res.json()) as { error: { code: string; message: string; issues: unknown[] } };
  return {
    status: res.status,
    cache: res.headers.get('cache-control'),
    type: res.headers.get('content-type'),
    code: body.error.code,
    message: body.error.message,
    issues: body.error.issues,
  };
}

function publish(s: Seed, published: boolean, key = s.admin.api_key) {
  return call('PUT', '/v1/log/publication', { key, body: { published } });
}

/** Receipts the log never interprets, committed to the tenant's store (no kick), then drained. */
async function logReceipts(s: Seed, from: number, to: number): Promise<string[]> {
  const store = tenantStore(env, tenantRef(s));
  const shas: string[] = [];
  for (let n = from; n < to; n++) {
    const body = { receipt_kind: 'authorization', tenant_id: s.tenant_id, n };
    const receipt = { sha256: digestOf(body), body };
    shas.push(receipt.sha256);
    await store.insertReceipt({
      kind: 'authorization',
      receipt,
      outcome: 'denied',
      created_at_unix_ms: Date.now(),
    });
  }
  await logSequencerStub(env, s.tenant_id).drain(s.tenant_id);
  return shas;
}

/** Tiles fetched from the public prefix, checked against their coordinates. */
async function publicTiles(
  tenant_id: string,
  refs: readonly { level: number; index: number; width: number }[],
) {
  const tiles: Tile[] = [];
  for (const ref of refs) {
    const res = await anonymous(`/log/${tenant_id}/${tilePath(ref)}`);
    expect(res.status, tilePath(ref)).toBe(200);
    const t = tileFromBytes(ref, await bytesOf(res));
    if (!t.ok) throw new Error(t.error.message);
    tiles.push(t.value);
  }
  return tiles;
}

describe('the public log path', () => {
  it('an unpublished log is the same 404 as an unknown tenant or an invalid id, although its tiles are in R2', async () => {
    const s = await seedTenant('pub-off');
    await logReceipts(s, 0, 3);
    // The objects exist: only the opt-in stands between them and the public path.
    expect(await env.LOG_TILES.head(`${logPrefix(s.tenant_id)}tile/0/000.p/3`)).not.toBeNull();
    expect(await env.LOG_TILES.head(`${logPrefix(s.tenant_id)}checkpoint`)).not.toBeNull();
    const state = await call('GET', '/v1/log/publication', { key: s.agent.api_key });
    expect(state.status).toBe(200);
    expect(state.body).toMatchObject({ published: false, events: [] });
    const unknown = await notFoundShape(await anonymous('/log/ten-doesnotexist/checkpoint'));
    expect(unknown).toEqual({
      status: 404,
      cache: 'no-store',
      type: 'application/json',
      code: 'not_found',
      message: 'no such log resource',
      issues: [],
    });
    for (const path of [
      `/log/${s.tenant_id}/checkpoint`,
      `/log/${s.tenant_id}/tile/0/000.p/3`,
      `/log/${s.tenant_id}/tile/entries/000.p/3`,
      '/log/ten+invalid/checkpoint',
      `/log/${s.tenant_id}/tile/0/0`,
    ]) {
      expect(await notFoundShape(await anonymous(path)), path).toEqual(unknown);
      expect((await anonymous(path, 'HEAD')).status, path).toBe(404);
    }
  });

  it('only a tenant admin publishes; others are refused and nothing changes', async () => {
    const s = await seedTenant('pub-role');
    await logReceipts(s, 0, 1);
    for (const key of [s.agent.api_key, s.approver.api_key, s.executor.api_key]) {
      const r = await publish(s, true, key);
      expect(r.status).toBe(403);
      expect(r.body.error.code).toBe('forbidden_role');
    }
    expect((await call('PUT', '/v1/log/publication', { body: { published: true } })).status).toBe(401);
    // A body that is not exactly `{ published: boolean }` is refused before anything is asked.
    for (const body of [{}, { published: 'yes' }, { published: true, tenant_id: s.tenant_id }]) {
      expect((await call('PUT', '/v1/log/publication', { key: s.admin.api_key, body })).status).toBe(400);
    }
    expect(await env.LOG_TILES.head(publicationMarkerKey(s.tenant_id))).toBeNull();
    const state = await call('GET', '/v1/log/publication', { key: s.admin.api_key });
    expect(state.body).toMatchObject({ published: false, events: [] });
    expect((await anonymous(`/log/${s.tenant_id}/checkpoint`)).status).toBe(404);
  });

  it('published: checkpoint, tiles and bundles without a key, byte-equal to the authenticated routes, with C2SP caching', async () => {
    const s = await seedTenant('pub-on');
    const shas = await logReceipts(s, 0, 300);
    const p = await publish(s, true);
    expect(p.status).toBe(200);
    const origin = `writ.test/log/${s.tenant_id}`;
    expect(p.body).toMatchObject({
      changed: true,
      published: true,
      origin,
      prefix_path: `/log/${s.tenant_id}/`,
      events: [{ published: true, principal_id: s.admin.principal_id }],
    });
    expect(p.body.verifier_keys).toHaveLength(1);
    expect(p.body.verifier_keys[0].vkey).toMatch(
      new RegExp(`^${origin.replace(/\./g, '\\.')}\\+[0-9a-f]{8}\\+`),
    );

    const cp = await anonymous(`/log/${s.tenant_id}/checkpoint`);
    expect(cp.status).toBe(200);
    expect(cp.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expectShortLived(cp.headers.get('cache-control'));
    const cpText = await cp.text();
    expect(cpText).toBe(await (await authenticated(s.agent.api_key, 'checkpoint')).text());
    expect(cpText.split('\n').slice(0, 2)).toEqual([origin, '300']);

    for (const path of [
      'tile/0/000',
      'tile/0/001.p/44',
      'tile/1/000.p/1',
      'tile/entries/000',
      'tile/entries/001.p/44',
    ]) {
      const pub = await anonymous(`/log/${s.tenant_id}/${path}`);
      expect(pub.status, path).toBe(200);
      expect(pub.headers.get('content-type')).toBe('application/octet-stream');
      expectImmutable(pub.headers.get('cache-control'));
      const body = await bytesOf(pub);
      expect(body).toEqual(await bytesOf(await authenticated(s.agent.api_key, path)));
      // HEAD: the headers and length, no body.
      const head = await anonymous(`/log/${s.tenant_id}/${path}`, 'HEAD');
      expect(head.status).toBe(200);
      expect(head.headers.get('content-length')).toBe(String(body.length));
      expectImmutable(head.headers.get('cache-control'));
      expect((await head.arrayBuffer()).byteLength).toBe(0);
    }
    // A tile the tree does not have yet: the same 404, not cached.
    expect(await notFoundShape(await anonymous(`/log/${s.tenant_id}/tile/0/002`))).toMatchObject({
      status: 404,
      cache: 'no-store',
      message: 'no such log resource',
    });

    // A witness's check, from the public objects alone: the checkpoint verifies under the
    // published verifier key; the entry is in the public bundle; its inclusion proof, computed
    // from the public tiles, verifies, and is the very proof the authenticated route gives.
    const verifier = parseVerifierKey(p.body.verifier_keys[0].vkey);
    if (!verifier.ok) throw new Error(verifier.error.message);
    const head = verifyCheckpoint(cpText, [verifier.value], origin);
    if (!head.ok) throw new Error(head.error.message);
    const size = head.value.checkpoint.size;
    for (const index of [5, 270]) {
      const tiles = await publicTiles(s.tenant_id, tilesForInclusionProof(index, size));
      const hashes = inclusionProof(index, size, hashReaderFromTiles(tiles));
      if (!hashes.ok) throw new Error(hashes.error.message);
      const proof = serializeTlogProof({ index, hashes: hashes.value, checkpoint: cpText });
      if (!proof.ok) throw new Error(proof.error.message);
      const bundleIndex = Math.floor(index / 256);
      const width = bundleIndex === 0 ? 256 : size % 256;
      const bundle = await anonymous(`/log/${s.tenant_id}/${entryBundlePath(bundleIndex, width)}`);
      const entries = parseEntryBundle(await bytesOf(bundle), width);
      if (!entries.ok) throw new Error(entries.error.message);
      const entry = entries.value[index % 256]!;
      expect(verifyTlogProof(proof.value, { data: entry }, [verifier.value], origin)).toMatchObject({
        ok: true,
        value: { index },
      });
      // A different entry does not verify at that index.
      expect(
        verifyTlogProof(proof.value, { data: entries.value[(index + 1) % 256]! }, [verifier.value], origin)
          .ok,
      ).toBe(false);
      const signature = await tenantStore(env, tenantRef(s)).receiptSignature(shas[index]!);
      expect(new TextDecoder().decode(entry)).toBe(signature?.envelope);
      const routed = await call('GET', `/v1/receipts/${shas[index]}/proof`, { key: s.agent.api_key });
      expect(routed.body).toMatchObject({ index, tree_size: 300, proof: proof.value });
    }

    // Growth: the next checkpoint is consistent with this one, from the public tiles alone.
    await logReceipts(s, 300, 310);
    const newer = await (await anonymous(`/log/${s.tenant_id}/checkpoint`)).text();
    expect(newer.split('\n')[1]).toBe('310');
    const tiles = await publicTiles(s.tenant_id, tilesForConsistencyProof(300, 310));
    const cons = consistencyProof(300, 310, hashReaderFromTiles(tiles));
    if (!cons.ok) throw new Error(cons.error.message);
    expect(verifyCheckpointConsistency(cpText, newer, cons.value, [verifier.value], origin).ok).toBe(true);
  });

  it('publishing is idempotent and recorded once; unpublishing answers the unknown tenant’s 404 again', async () => {
    const s = await seedTenant('pub-toggle');
    // An empty log: publishing writes the size-0 checkpoint, the one the authenticated route signs.
    expect((await publish(s, true)).body.changed).toBe(true);
    const empty = await anonymous(`/log/${s.tenant_id}/checkpoint`);
    expect(empty.status).toBe(200);
    const emptyText = await empty.text();
    expect(emptyText).toBe(await (await authenticated(s.agent.api_key, 'checkpoint')).text());
    expect(emptyText.split('\n')[1]).toBe('0');
    const again = await publish(s, true);
    expect(again.body).toMatchObject({ changed: false, published: true });
    expect(again.body.events).toHaveLength(1);

    const off = await publish(s, false);
    expect(off.body).toMatchObject({ changed: true, published: false });
    expect(off.body.events.map((e: { published: boolean }) => e.published)).toEqual([false, true]);
    expect(await env.LOG_TILES.head(publicationMarkerKey(s.tenant_id))).toBeNull();
    const unknown = await notFoundShape(await anonymous('/log/ten-doesnotexist/checkpoint'));
    expect(await notFoundShape(await anonymous(`/log/${s.tenant_id}/checkpoint`))).toEqual(unknown);
    expect((await publish(s, false)).body).toMatchObject({ changed: false, published: false });
    // The history survives the object's eviction (it is stored, not held in memory).
    await evictDurableObject(logSequencerStub(env, s.tenant_id));
    const read = await call('GET', '/v1/log/publication', { key: s.executor.api_key });
    expect(read.body.events).toHaveLength(2);
  });

  it('without a usable key ring publishing is refused before anything changes (no keys to tell witnesses)', async () => {
    const s = await seedTenant('pub-nokeys');
    await logReceipts(s, 0, 1);
    const res = await app.fetch(
      new Request(`${BASE}/v1/log/publication`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${s.admin.api_key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ published: true }),
      }),
      { ...env, WRIT_RECEIPT_KEYS: '' },
    );
    expect(res.status).toBe(503);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('signing_unavailable');
    // The sequencer (which has its own bindings) was never asked.
    expect(await logSequencerStub(env, s.tenant_id).publication(s.tenant_id)).toEqual({
      published: false,
      events: [],
    });
    expect(await env.LOG_TILES.head(publicationMarkerKey(s.tenant_id))).toBeNull();
    expect((await anonymous(`/log/${s.tenant_id}/checkpoint`)).status).toBe(404);
  });

  it('the sequencer records a publish only once its checkpoint is signed: without its key ring, nothing', async () => {
    const s = await seedTenant('pub-do-nokeys');
    const log = logSequencerStub(env, s.tenant_id);
    // The empty log's checkpoint is signed at publication; the object's own key ring is missing.
    const refused = await runInDurableObject(log, async (o) => {
      const own = Reflect.get(o, 'env') as Env;
      Reflect.set(o, 'env', { ...own, WRIT_RECEIPT_KEYS: '' });
      try {
        return await o.setPublication(s.tenant_id, true, s.admin.principal_id, Date.now()).then(
          () => 'published',
          (e: unknown) => (e instanceof Error ? e.message : String(e)),
        );
      } finally {
        Reflect.set(o, 'env', own);
      }
    });
    expect(refused).toMatch(/signing is not configured/);
    expect(await log.publication(s.tenant_id)).toEqual({ published: false, events: [] });
    expect(await env.LOG_TILES.head(publicationMarkerKey(s.tenant_id))).toBeNull();
    // With it, the same request publishes.
    expect((await publish(s, true)).body).toMatchObject({ changed: true, published: true });
  });

  it('an unpublish whose marker delete fails records nothing: the state never says unpublished while the log is served', async () => {
    const s = await seedTenant('pub-do-r2down');
    expect((await publish(s, true)).body.published).toBe(true);
    const log = logSequencerStub(env, s.tenant_id);
    const failed = await runInDurableObject(log, async (o) => {
      const own = Reflect.get(o, 'env') as Env;
      const bucket = new Proxy(own.LOG_TILES, {
        get(target, prop) {
          if (prop === 'delete') return () => Promise.reject(new Error('r2 unavailable'));
          const v: unknown = Reflect.get(target, prop);
          return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
        },
      });
      Reflect.set(o, 'env', { ...own, LOG_TILES: bucket });
      try {
        return await o.setPublication(s.tenant_id, false, s.admin.principal_id, Date.now()).then(
          () => 'unpublished',
          (e: unknown) => (e instanceof Error ? e.message : String(e)),
        );
      } finally {
        Reflect.set(o, 'env', own);
      }
    });
    expect(failed).toBe('r2 unavailable');
    expect((await log.publication(s.tenant_id)).published).toBe(true);
    expect((await anonymous(`/log/${s.tenant_id}/checkpoint`)).status).toBe(200);
    // Repeating the request completes it.
    expect((await publish(s, false)).body).toMatchObject({ changed: true, published: false });
    expect((await anonymous(`/log/${s.tenant_id}/checkpoint`)).status).toBe(404);
  });

  it('a sequencer created at schema version 2 gains the publication table at its next start, its log intact', async () => {
    const s = await seedTenant('pub-schema');
    await logReceipts(s, 0, 2);
    const log = logSequencerStub(env, s.tenant_id);
    // As an object of the previous version stored it: no publication table, version 2.
    await runInDurableObject(log, (_o, state) => {
      state.storage.sql.exec('DROP TABLE publication');
      state.storage.sql.exec('UPDATE schema_version SET v = 2');
    });
    await evictDurableObject(log);
    expect(await log.publication(s.tenant_id)).toEqual({ published: false, events: [] });
    expect((await log.checkpoint(s.tenant_id)).size).toBe(2);
    expect((await publish(s, true)).body).toMatchObject({ changed: true, published: true });
    const v = await runInDurableObject(
      log,
      (_o, state) => state.storage.sql.exec<{ v: number }>('SELECT v FROM schema_version').one().v,
    );
    expect(v).toBe(4);
    // The upgrade also creates version 4's witness tables (C2SP tlog-witness), empty.
    expect(await log.witnesses(s.tenant_id)).toEqual({
      witnesses: [],
      changed_by: null,
      changed_at_unix_ms: null,
    });
  });

  it('a brand-new sequencer is at schema version 4 with every table and column', async () => {
    const s = await seedTenant('pub-schema-new');
    const log = logSequencerStub(env, s.tenant_id);
    expect(await log.publication(s.tenant_id)).toEqual({ published: false, events: [] });
    const layout = await runInDurableObject(log, (_o, state) => schemaOf(state.storage.sql));
    expect(layout).toEqual({
      v: 4,
      meta: ['singleton', 'tenant_id', 'cursor', 'state', 'checkpoint', 'shard'],
      leaf: ['idx', 'receipt_sha256', 'seq', 'entry'],
      tile: ['level', 'idx', 'hashes'],
      publication: ['seq', 'published', 'principal_id', 'at_unix_ms'],
      witness: [
        'position',
        'vkey',
        'url',
        'known_size',
        'failures',
        'next_attempt_unix_ms',
        'last_attempt_unix_ms',
        'last_outcome',
        'last_error',
      ],
      witness_change: ['seq', 'principal_id', 'at_unix_ms', 'vkeys'],
      cosigned_checkpoint: ['size', 'checkpoint'],
      cosignature: ['size', 'vkey', 'line', 'timestamp_unix_s'],
    });
  });

  it('a sequencer the publiclog branch stored (version 2 = publication, no meta.shard) is repaired at its next start', async () => {
    // Before the merge renumbered the schema, that branch's version 2 was the publication table;
    // an object it created (wrangler dev state) has no `meta.shard`, which version 2 now means.
    const s = await seedTenant('pub-schema-branch');
    await logReceipts(s, 0, 2);
    const log = logSequencerStub(env, s.tenant_id);
    await runInDurableObject(log, (_o, state) => {
      restoreMetaWithoutShard(state.storage.sql, 2);
    });
    await evictDurableObject(log);
    expect((await log.checkpoint(s.tenant_id)).size).toBe(2);
    await logReceipts(s, 2, 3);
    expect((await log.checkpoint(s.tenant_id)).size).toBe(3);
    const layout = await runInDurableObject(log, (_o, state) => schemaOf(state.storage.sql));
    expect(layout.v).toBe(4);
    expect(layout.meta).toContain('shard');
  });

  it('a malformed path is the same 404 before any storage is read; a well-formed one reads the marker first', async () => {
    const s = await seedTenant('pub-paths');
    await publish(s, true);
    const t = s.tenant_id;
    const unknown = await notFoundShape(await anonymous('/log/ten-doesnotexist/checkpoint'));
    for (const path of [
      `/log/${t}`,
      `/log/${t}/`,
      `/log/${t}/checkpoint/`,
      `/log/${t}/Checkpoint`,
      `/log/${t}/tile/0/0`,
      `/log/${t}/tile/0/x000/001`,
      `/log/${t}/tile/00/000`,
      `/log/${t}/tile/0/000.p/0`,
      `/log/${t}/tile/entries/000.p/256`,
      `/log/${t}/tile/0/%30%30%30`,
      `/log/${t}/state`,
      '/log/ten%2Fx/checkpoint',
      '/log/ten+x/checkpoint',
      `/log/${'a'.repeat(129)}/checkpoint`,
      `/log/${t}/tile/0/${'x001/'.repeat(400)}000`,
      // A query is a second cache key for the same object (C2SP clients send none).
      `/log/${t}/checkpoint?`,
      `/log/${t}/checkpoint?v=1`,
      `/log/${t}/checkpoint/?`,
    ]) {
      const touched: string[] = [];
      const res = await anonymous(path, 'GET', { LOG_TILES: spy(touched) });
      expect(await notFoundShape(res), path).toEqual(unknown);
      expect(touched, path).toEqual([]);
    }
    // The spy sees a well-formed request's reads: the marker, then the object.
    const touched: string[] = [];
    const ok = await anonymous(`/log/${t}/checkpoint`, 'GET', { LOG_TILES: spy(touched) });
    expect(ok.status).toBe(200);
    expect(touched).toEqual(['head', 'get']);
    // HEAD reads the object's size, never its body.
    const headed: string[] = [];
    const head = await anonymous(`/log/${t}/checkpoint`, 'HEAD', { LOG_TILES: spy(headed) });
    expect(head.status).toBe(200);
    expect(headed).toEqual(['head', 'head']);
  });
});

/** C2SP tlog-tiles: the checkpoint is mutable, "headers SHOULD prevent caching beyond a few seconds". */
function expectShortLived(header: string | null): void {
  const maxAge = /(?:^|,\s*)max-age=(\d+)(?:,|$)/.exec(header ?? '');
  expect(maxAge, String(header)).not.toBeNull();
  expect(Number(maxAge![1])).toBeLessThanOrEqual(10);
  expect(header).not.toMatch(/immutable|s-maxage|stale-/);
}

/** C2SP tlog-tiles: tiles and bundles are immutable, "caching headers SHOULD be long-lived". */
function expectImmutable(header: string | null): void {
  const maxAge = /(?:^|,\s*)max-age=(\d+)(?:,|$)/.exec(header ?? '');
  expect(Number(maxAge?.[1])).toBeGreaterThanOrEqual(365 * 24 * 3600);
  expect(header).toMatch(/(^|,\s*)public(,|$)/);
  expect(header).toMatch(/(^|,\s*)immutable(,|$)/);
}

/** The object's schema version and each table's columns, in order. */
function schemaOf(sql: SqlStorage) {
  const columns = (table: string) =>
    sql
      .exec<{ name: string }>('SELECT name FROM pragma_table_info(?) ORDER BY cid', table)
      .toArray()
      .map((r) => r.name);
  return {
    v: sql.exec<{ v: number }>('SELECT v FROM schema_version').one().v,
    meta: columns('meta'),
    leaf: columns('leaf'),
    tile: columns('tile'),
    publication: columns('publication'),
    witness: columns('witness'),
    witness_change: columns('witness_change'),
    cosigned_checkpoint: columns('cosigned_checkpoint'),
    cosignature: columns('cosignature'),
  };
}

/** `LOG_TILES` that records every method called on it, then does it. */
function spy(calls: string[]): R2Bucket {
  const bucket = env.LOG_TILES;
  return new Proxy(bucket, {
    get(target, prop) {
      const v: unknown = Reflect.get(target, prop);
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => {
        calls.push(String(prop));
        return (v as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}
