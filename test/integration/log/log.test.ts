/**
 * Issue 11, the service side: every receipt is signed in its own D1 batch, drained into its
 * tenant's transparency log, and served as checkpoint, tiles, proofs and offline bundles that the
 * CLI verifier checks without Writ. Also: fail closed without keys, rotation, eviction mid-drain.
 */
import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { KICK_COALESCE_MS, logPrefix, logSequencerStub } from '../../../durable-objects/log-sequencer.js';
import { digestOf } from '../../../src/core/canonical/canonical.js';
import { ed25519Signer } from '../../../src/core/log/note.js';
import { leafHash } from '../../../src/core/log/merkle.js';
import { sequenceBatch } from '../../../src/core/log/sequencer.js';
import { EMPTY_LOG_STATE, parseTilePath, tilePath } from '../../../src/core/log/tiles.js';
import {
  generateKeyRing,
  type KeyRingDocument,
  parseKeyRing,
  parsePublicKeySet,
} from '../../../src/core/receipts/keys.js';
import { database } from '../../../src/db/client.js';
import { receiptSignatures, receipts } from '../../../src/db/schema.js';
import { app } from '../../../src/http/app.js';
import { d1TenantStore } from '../../../src/db/tenant-store.js';
import { tenantStore } from '../../../src/platform/bindings.js';
import { shardDb } from '../../../src/platform/shards.js';
import { receiptSigner } from '../../../src/platform/receipt-keys.js';
import { runVerify } from '../../../src/cli/verify.js';
import { verifyBundle } from '../../../src/verify/bundle.js';
import { logOrigin, receiptLogVerifier, verifyLogConsistency } from '../../../src/verify/log.js';
import { count, eq } from 'drizzle-orm';
import { claim, observe, report, authorizedRollback } from '../executions/helpers.js';
import {
  BASE,
  call,
  type Reply,
  seedTenant,
  authorize,
  authorizeBody,
  createRun,
  d1Of,
  shardOf,
  tenantRef,
} from '../platform/harness.js';

const TEST_SEED = new Uint8Array(32).fill(7);

async function keySet(): Promise<unknown> {
  const r = await call('GET', '/.well-known/writ-keys');
  expect(r.status).toBe(200);
  return r.body;
}

function trusted(set: unknown) {
  const k = parsePublicKeySet(set);
  if (!k.ok) throw new Error(k.error.message);
  return k.value;
}

/** Verify a bundle as `npx writ verify bundle.json --keys keys.json` would (injected files). */
async function cliVerify(bundle: unknown, keys: unknown): Promise<{ code: number; out: string }> {
  const files: Record<string, string> = { 'b.json': JSON.stringify(bundle), 'k.json': JSON.stringify(keys) };
  const out: string[] = [];
  const code = await runVerify(['b.json', '--keys', 'k.json'], {
    readFile: async (p) => new TextEncoder().encode(files[p] ?? ''),
    stdout: (t) => out.push(t),
    stderr: (t) => out.push(t),
  });
  return { code, out: out.join('') };
}

/** A request to the app with other bindings (a missing or rotated key ring). */
async function callWith(
  bindings: Partial<Env>,
  method: string,
  path: string,
  key: string,
  body?: unknown,
): Promise<Reply> {
  const init: RequestInit = { method, headers: { authorization: `Bearer ${key}` } };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    (init.headers as Record<string, string>)['content-type'] = 'application/json';
  }
  const res = await app.fetch(new Request(`${BASE}${path}`, init), { ...env, ...bindings });
  const text = await res.text();
  return { status: res.status, body: text.length > 0 ? JSON.parse(text) : null, headers: res.headers };
}

async function receiptCount(tenant_id: string) {
  // The tenant's own shard (the directory's answer): placement may put it on any shard.
  const db = database({ DB: await d1Of(tenant_id) });
  const [r] = await db.select({ n: count() }).from(receipts).where(eq(receipts.tenant_id, tenant_id));
  const [s] = await db
    .select({ n: count() })
    .from(receiptSignatures)
    .where(eq(receiptSignatures.tenant_id, tenant_id));
  return { receipts: r?.n ?? 0, signatures: s?.n ?? 0 };
}

/** A fabricated receipt of the tenant (the log never interprets bodies): for volume tests. */
function fakeReceipt(tenant_id: string, n: number) {
  const body = { receipt_kind: 'authorization', tenant_id, n };
  return { sha256: digestOf(body), body };
}

describe('signed receipts and the tenant log', () => {
  it('a receipt from POST /v1/authorize is signed, logged, and its bundle verifies offline with the CLI verifier', async () => {
    const s = await seedTenant('log');
    const a = await authorizedRollback(s);
    const keys = await keySet();
    const b = await call('GET', `/v1/receipts/${a.sha256}/bundle`, { key: s.admin.api_key });
    expect(b.status).toBe(200);
    expect(b.body.signature).toMatchObject({
      issuer: 'writ.test',
      tenant_id: s.tenant_id,
      receipt_kind: 'authorization',
      receipt_sha256: a.sha256,
    });
    const v = await cliVerify(b.body, keys);
    expect(v.out).toMatch(/^VALID authorization receipt/);
    expect(v.out).toContain(`included at index 0 of 1 (writ.test/log/${s.tenant_id})`);
    expect(v.code).toBe(0);
    // The proof route serves the same tlog-proof.
    const p = await call('GET', `/v1/receipts/${a.sha256}/proof`, { key: s.agent.api_key });
    expect(p.status).toBe(200);
    expect(p.body).toMatchObject({ receipt_sha256: a.sha256, index: 0, tree_size: 1 });
    expect(p.body.proof).toMatch(/^c2sp\.org\/tlog-proof@v1\nindex 0\n\n/);
    // A changed byte in the bundle's log section is caught.
    const forged = {
      ...b.body,
      log: { ...b.body.log, checkpoint: b.body.log.checkpoint.replace('\n1\n', '\n2\n') },
    };
    expect((await cliVerify(forged, keys)).code).toBe(1);
  });

  it('execution receipts are signed by the idempotency object’s mirror and logged after the authorization', async () => {
    const s = await seedTenant('log-exec');
    const a = await authorizedRollback(s);
    const c = await claim(s, a.sha256);
    const r = await report(s, c.body.operation_id, c.body.fencing_token, observe(a.receipt, 'succeeded'));
    expect(r.status).toBe(200);
    const sha = r.body.execution_receipt.sha256 as string;
    const keys = await keySet();
    const b = await call('GET', `/v1/receipts/${sha}/bundle`, { key: s.executor.api_key });
    expect(b.status).toBe(200);
    expect(b.body.inputs.kind).toBe('execution');
    const verdict = verifyBundle(b.body, { trustedKeys: trusted(keys), logVerifier: receiptLogVerifier });
    expect(verdict).toMatchObject({ valid: true, log: { status: 'included', inclusion: { index: 1 } } });
  });

  it('checkpoints are consistent across growth; a forked checkpoint fails the consistency check', async () => {
    const s = await seedTenant('log-fork');
    const store = tenantStore(env, tenantRef(s));
    for (let i = 0; i < 3; i++) await store.insertReceipt({ ...row(s.tenant_id, i) });
    const log = logSequencerStub(env, s.tenant_id);
    await log.drain(s.tenant_id);
    const older = await app.fetch(
      new Request(`${BASE}/v1/log/checkpoint`, { headers: { authorization: `Bearer ${s.agent.api_key}` } }),
      env,
    );
    expect(older.status).toBe(200);
    expect(older.headers.get('content-type')).toContain('text/plain');
    const olderText = await older.text();
    expect(olderText.split('\n').slice(0, 2)).toEqual([`writ.test/log/${s.tenant_id}`, '3']);
    for (let i = 3; i < 300; i++) await store.insertReceipt({ ...row(s.tenant_id, i) });
    await log.drain(s.tenant_id);
    const newerText = await checkpointText(s.admin.api_key);
    expect(newerText.split('\n')[1]).toBe('300');
    const cons = await call('GET', '/v1/log/consistency?from=3&to=300', { key: s.admin.api_key });
    expect(cons.status).toBe(200);
    const keys = trusted(await keySet());
    expect(verifyLogConsistency(olderText, newerText, cons.body.proof, keys, s.tenant_id)).toMatchObject({
      ok: true,
      value: { from: 3, to: 300 },
    });
    // A fork: the same key signs a 300-leaf tree whose history differs from the first 3 leaves.
    const signer = ed25519Signer(logOrigin('writ.test', s.tenant_id), TEST_SEED);
    if (!signer.ok) throw new Error('signer');
    const entries = Array.from({ length: 300 }, (_, i) => new TextEncoder().encode(`forged ${i}`));
    const fork = sequenceBatch(
      EMPTY_LOG_STATE,
      [],
      entries,
      logOrigin('writ.test', s.tenant_id),
      signer.value,
    );
    if (!fork.ok) throw new Error('fork');
    const forked = verifyLogConsistency(olderText, fork.value.checkpoint, cons.body.proof, keys, s.tenant_id);
    expect(forked).toMatchObject({ ok: false, error: { reason: 'root_mismatch' } });
    // The tiles are served at their C2SP paths: the first full level-0 tile holds 256 leaf hashes.
    const t0 = await fetchTile(s.admin.api_key, 'tile/0/000');
    expect(t0.status).toBe(200);
    expect((await t0.arrayBuffer()).byteLength).toBe(256 * 32);
    expect((await fetchTile(s.admin.api_key, 'tile/0/0')).status).toBe(404);
    expect((await fetchTile(s.admin.api_key, 'tile/entries/000')).status).toBe(200);
    // The partial tile and bundle the size-3 checkpoint named were deleted once their full ones
    // existed (C2SP tlog-tiles allows it); the partials of the current size are still served.
    const prefix = logPrefix(s.tenant_id);
    for (const gone of ['tile/0/000.p/3', 'tile/entries/000.p/3']) {
      expect(await env.LOG_TILES.head(prefix + gone)).toBeNull();
      expect((await fetchTile(s.admin.api_key, gone)).status).toBe(404);
    }
    expect((await env.LOG_TILES.list({ prefix: `${prefix}tile/0/000.p/` })).objects).toEqual([]);
    for (const kept of ['tile/0/001.p/44', 'tile/entries/001.p/44', 'tile/1/000.p/1']) {
      expect((await fetchTile(s.admin.api_key, kept)).status).toBe(200);
    }
    // Sizes beyond the tree are a 400, not a proof.
    expect((await call('GET', '/v1/log/consistency?from=3&to=301', { key: s.admin.api_key })).status).toBe(
      400,
    );
    expect((await call('GET', '/v1/log/consistency?from=x&to=3', { key: s.admin.api_key })).status).toBe(400);
  });

  it('eviction mid-drain loses and repeats nothing: every receipt is logged exactly once, in commit order', async () => {
    const s = await seedTenant('log-evict');
    // No kick on commit: the sequencer must not start before this test drives it. The store is
    // opened on the tenant's own shard: the sequencer reads the shard the directory names, and a
    // receipt written to another shard would be neither in the tenant's quota nor in its log.
    const store = d1TenantStore(shardDb(env, shardOf(s)), s.tenant_id, {
      sign: receiptSigner(env),
      committed: () => {},
    });
    const N = 40;
    const shas: string[] = [];
    for (let i = 0; i < N; i++) {
      const r = row(s.tenant_id, i);
      shas.push(r.receipt.sha256);
      await store.insertReceipt(r);
    }
    const log = logSequencerStub(env, s.tenant_id);
    // A drain of one batch of 7 leaves, then the object is evicted with the rest still in D1.
    const first = await log.drain(s.tenant_id, 7, 1);
    expect(first).toEqual({ appended: 7, size: 7, more: true });
    await evictDurableObject(log);
    // A crashed drain may have written the next batch's tiles to R2 and died before committing:
    // write them ahead (the same paths and bytes the redo writes) and the redo must accept them.
    const ahead = sequenceBatch(
      EMPTY_LOG_STATE,
      [],
      (await store.signaturesAfter(0, N)).map((r) => new TextEncoder().encode(r.envelope)),
      logOrigin('writ.test', s.tenant_id),
      mustSigner(s.tenant_id),
    );
    if (!ahead.ok) throw new Error('ahead');
    for (const t of ahead.value.tiles)
      await env.LOG_TILES.put(logPrefix(s.tenant_id) + tilePath(t), t.hashes);
    // The rest drains from the alarm after a kick (the Worker's waitUntil path); the alarm the
    // first drain armed may already have run it: the outcome is the same either way.
    await log.kick(s.tenant_id);
    await runDurableObjectAlarm(log);
    await evictDurableObject(log);
    const cp = await log.checkpoint(s.tenant_id);
    expect(cp.size).toBe(N);
    for (let i = 0; i < N; i++) {
      const inc = await log.inclusion(s.tenant_id, shas[i]!);
      expect(inc).toMatchObject({ status: 'included', index: i, size: N });
    }
    // Nothing left over: one more drain appends nothing.
    expect((await log.drain(s.tenant_id)).appended).toBe(0);
  });

  it('create-only tiles: other bytes at a path no checkpoint named are replaced; if R2’s checkpoint is beyond the state, the drain fails and commits nothing', async () => {
    const s = await seedTenant('log-corrupt');
    const store = d1TenantStore(shardDb(env, shardOf(s)), s.tenant_id, {
      sign: receiptSigner(env),
      committed: () => {},
    });
    for (let i = 0; i < 3; i++) await store.insertReceipt(row(s.tenant_id, i));
    const log = logSequencerStub(env, s.tenant_id);
    // Something else at the partial tile the drain will write: the one conditional put is refused.
    const bad = logPrefix(s.tenant_id) + 'tile/0/000.p/3';
    const cpKey = logPrefix(s.tenant_id) + 'checkpoint';
    await env.LOG_TILES.put(bad, new Uint8Array(5));
    // R2's checkpoint names size 3 while the object's state is empty (its storage went back): the
    // object at the path may be published, so it is never replaced and the drain stops.
    await env.LOG_TILES.put(cpKey, `writ.test/log/${s.tenant_id}\n3\nAAAA\n`);
    // Settled with `then`: `expect(...).rejects` would touch other properties of the RPC promise,
    // each a pipelined call that rejects again, unhandled.
    const failed = await log.drain(s.tenant_id).then(
      () => 'drained',
      (e: unknown) => (e instanceof Error ? e.message : String(e)),
    );
    expect(failed).toMatch(/differs and may be published/);
    expect((await log.checkpoint(s.tenant_id)).size).toBe(0);
    expect((await env.LOG_TILES.head(bad))?.size).toBe(5);
    // Without a checkpoint beyond the state, nothing named the path: a drain cut short before its
    // commit left it (other entries at this size, as a move can cause). It is replaced.
    await env.LOG_TILES.delete(cpKey);
    expect(await log.drain(s.tenant_id)).toMatchObject({ appended: 3, size: 3 });
    expect((await env.LOG_TILES.head(bad))?.size).toBe(3 * 32);
    const entries = (await store.signaturesAfter(0, 3)).map((r) => new TextEncoder().encode(r.envelope));
    const tile = new Uint8Array(await (await env.LOG_TILES.get(bad))!.arrayBuffer());
    expect(tile).toEqual(new Uint8Array(entries.flatMap((e) => [...leafHash(e)])));
  });

  it('a drain whose R2 checkpoint write fails after its commit: the next drain, with nothing to read, writes it', async () => {
    const s = await seedTenant('log-cpwrite');
    const store = d1TenantStore(shardDb(env, shardOf(s)), s.tenant_id, {
      sign: receiptSigner(env),
      committed: () => {},
    });
    for (let i = 0; i < 3; i++) await store.insertReceipt(row(s.tenant_id, i));
    const log = logSequencerStub(env, s.tenant_id);
    const cpKey = logPrefix(s.tenant_id) + 'checkpoint';
    // R2 refuses the checkpoint write alone: the batch is committed (size 3), its tiles written.
    const failed = await runInDurableObject(log, async (o) => {
      const own = Reflect.get(o, 'env') as Env;
      const bucket = new Proxy(own.LOG_TILES, {
        get(target, prop) {
          if (prop === 'put')
            return (key: string, ...rest: unknown[]) =>
              key === cpKey
                ? Promise.reject(new Error('r2 unavailable'))
                : (target.put as (...a: unknown[]) => unknown).call(target, key, ...rest);
          const v: unknown = Reflect.get(target, prop);
          return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
        },
      });
      Reflect.set(o, 'env', { ...own, LOG_TILES: bucket });
      try {
        return await o.drain(s.tenant_id).then(
          () => 'drained',
          (e: unknown) => (e instanceof Error ? e.message : String(e)),
        );
      } finally {
        Reflect.set(o, 'env', own);
      }
    });
    expect(failed).toBe('r2 unavailable');
    const committed = await log.checkpoint(s.tenant_id);
    expect(committed.size).toBe(3);
    expect(await env.LOG_TILES.head(cpKey)).toBeNull();
    // The retry (the alarm's, or the next kick's) finds no row to read; the public copy still
    // catches up with the committed checkpoint, also after an eviction.
    await evictDurableObject(log);
    expect(await log.drain(s.tenant_id)).toEqual({ appended: 0, size: 3, more: false });
    expect(await (await env.LOG_TILES.get(cpKey))?.text()).toBe(committed.checkpoint);
  });

  it('a kick answers the drain time it armed and the sequencer keeps it: a drain that ran early re-arms it, across an eviction', async () => {
    // A tenant with no commit yet: nothing has kicked its sequencer.
    const s = await seedTenant('log-kick');
    const log = logSequencerStub(env, s.tenant_id);
    const alarm = () => runInDurableObject(log, (_o, state) => state.storage.getAlarm());
    expect(await alarm()).toBeNull();
    const before = Date.now();
    const at = await log.kick(s.tenant_id);
    expect(at).toBeGreaterThanOrEqual(before + KICK_COALESCE_MS);
    // Kicks of the same window share its drain and are told the same time.
    expect(await log.kick(s.tenant_id)).toBe(at);
    // The alarm runs early (as a backlog re-arm or an on-demand drain would): a Worker told `at`
    // may skip kicks for commits made until then, so the drain at `at` is armed again.
    expect(await runDurableObjectAlarm(log)).toBe(true);
    expect(await alarm()).toBe(at);
    // The promise is durable: after an eviction, an early run re-arms it again.
    await evictDurableObject(log);
    expect(await runDurableObjectAlarm(log)).toBe(true);
    expect(await alarm()).toBe(at);
    // An on-demand drain with nothing left keeps it too.
    await log.drain(s.tenant_id);
    expect(await alarm()).toBe(at);
  });

  it('without a usable key ring every receipt-issuing write is a 503 and nothing is written', async () => {
    const s = await seedTenant('log-nokeys');
    const run = await createRun(s);
    const before = await receiptCount(s.tenant_id);
    for (const ring of [undefined, '', '{"key_ring_version":1}', 'not json']) {
      const bindings = { WRIT_RECEIPT_KEYS: ring } as unknown as Partial<Env>;
      const r = await callWith(bindings, 'POST', '/v1/authorize', s.agent.api_key, authorizeBody(s, run));
      expect(r.status, String(ring)).toBe(503);
      expect(r.body.error.code).toBe('signing_unavailable');
      expect((await callWith(bindings, 'GET', '/.well-known/writ-keys', s.agent.api_key)).status).toBe(503);
    }
    expect(await receiptCount(s.tenant_id)).toEqual(before);
    // With the key ring, the same request issues a signed receipt.
    const ok = await authorize(s, authorizeBody(s, run));
    expect([200, 403]).toContain(ok.status);
    const after = await receiptCount(s.tenant_id);
    expect(after).toEqual({ receipts: before.receipts + 1, signatures: before.signatures + 1 });
  });

  it('rotation: receipts signed by the old key still verify under the new key set; the retired key cannot sign', async () => {
    const s = await seedTenant('log-rotate');
    const a = await authorizedRollback(s);
    const at = Date.now();
    const rotated = rotate(generateKeyRing(TEST_SEED, 'writ.test', 0), new Uint8Array(32).fill(9), at);
    const bindings = { WRIT_RECEIPT_KEYS: JSON.stringify(rotated) } as Partial<Env>;
    const newKeys = await callWith(bindings, 'GET', '/.well-known/writ-keys', s.admin.api_key);
    expect(newKeys.status).toBe(200);
    expect(newKeys.body.keys.map((k: { status: string }) => k.status)).toEqual(['retired', 'active']);
    const b = await callWith(bindings, 'GET', `/v1/receipts/${a.sha256}/bundle`, s.admin.api_key);
    expect(b.status).toBe(200);
    const v = await cliVerify(b.body, newKeys.body);
    expect(v.code).toBe(0);
    // New receipts are signed by the new key.
    const run = await createRun(s);
    const r = await callWith(bindings, 'POST', '/v1/authorize', s.agent.api_key, authorizeBody(s, run));
    expect([200, 403]).toContain(r.status);
    const sig = await tenantStore(env, tenantRef(s)).receiptSignature(r.body.receipt.sha256);
    expect(JSON.parse(sig?.envelope ?? '{}').key_id).toBe(rotated.active);
    // A ring whose active key is retired refuses to sign (503), writing nothing.
    const retired = { ...rotated, active: rotated.keys[0]!.key_id };
    const before = await receiptCount(s.tenant_id);
    const refused = await callWith(
      { WRIT_RECEIPT_KEYS: JSON.stringify(retired) } as Partial<Env>,
      'POST',
      '/v1/authorize',
      s.agent.api_key,
      authorizeBody(s, run),
    );
    expect(refused.status).toBe(503);
    expect(await receiptCount(s.tenant_id)).toEqual(before);
  });

  it('another tenant’s receipt, proof or tile is not found', async () => {
    const s = await seedTenant('log-a');
    const t = await seedTenant('log-b');
    const a = await authorizedRollback(s);
    for (const path of [`/v1/receipts/${a.sha256}/proof`, `/v1/receipts/${a.sha256}/bundle`]) {
      expect((await call('GET', path, { key: t.admin.api_key })).status).toBe(404);
    }
    // The proof route drains on demand: afterwards the tenant's partial tile exists.
    const p = await call('GET', `/v1/receipts/${a.sha256}/proof`, { key: s.admin.api_key });
    const path = `tile/0/000.p/${p.body.tree_size as number}`;
    expect(parseTilePath(path).ok).toBe(true);
    expect((await fetchTile(s.admin.api_key, path)).status).toBe(200);
    expect((await fetchTile(t.admin.api_key, path)).status).toBe(404);
  });
});

function row(tenant_id: string, n: number) {
  return {
    kind: 'authorization',
    receipt: fakeReceipt(tenant_id, n),
    outcome: 'denied',
    created_at_unix_ms: Date.now(),
  };
}

function mustSigner(tenant_id: string) {
  const s = ed25519Signer(logOrigin('writ.test', tenant_id), TEST_SEED);
  if (!s.ok) throw new Error('signer');
  return s.value;
}

async function checkpointText(key: string): Promise<string> {
  const res = await app.fetch(
    new Request(`${BASE}/v1/log/checkpoint`, { headers: { authorization: `Bearer ${key}` } }),
    env,
  );
  return res.text();
}

function fetchTile(key: string, path: string): Promise<Response> {
  return Promise.resolve(
    app.fetch(new Request(`${BASE}/v1/log/${path}`, { headers: { authorization: `Bearer ${key}` } }), env),
  );
}

/** The documented rotation: close the old key's window at `at`, add the new key, make it active. */
function rotate(doc: KeyRingDocument, seed: Uint8Array, at: number): KeyRingDocument {
  const next = generateKeyRing(seed, doc.issuer, at);
  const parsed = parseKeyRing(JSON.stringify(next));
  if (!parsed.ok) throw new Error('ring');
  return {
    ...doc,
    active: next.active,
    keys: [...doc.keys.map((k) => ({ ...k, signing_until_unix_ms: at })), ...next.keys],
  };
}
