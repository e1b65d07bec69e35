/**
 * The log side of C2SP tlog-witness: a tenant admin configures witnesses, the sequencer submits
 * its checkpoints to them (`add-checkpoint`), verifies what they return before storing it, and
 * serves the cosigned checkpoint (API, R2 copy, proofs, bundles) so `verifyBundle` with a witness
 * quorum passes. The witnesses are in-test fakes implementing add-checkpoint from the spec with
 * real Ed25519 cosignatures; submissions are driven explicitly (`submitWitnesses`), never by time.
 */
import { runInDurableObject } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import {
  type LogSequencerObject,
  type WitnessFetcher,
  logPrefix,
  logSequencerStub,
} from '../../../durable-objects/log-sequencer.js';
import { digestOf } from '../../../src/core/canonical/canonical.js';
import { parseWitnessKey, witnessPolicy } from '../../../src/core/log/cosignature.js';
import { verifyCheckpoint } from '../../../src/core/log/checkpoint.js';
import { decodeBase64 } from '../../../src/core/log/encoding.js';
import { verifyConsistency } from '../../../src/core/log/merkle.js';
import { parsePublicKeySet } from '../../../src/core/receipts/keys.js';
import { app } from '../../../src/http/app.js';
import { runVerify } from '../../../src/cli/verify.js';
import { tenantStore } from '../../../src/platform/bindings.js';
import { verifyBundle } from '../../../src/verify/bundle.js';
import { logOrigin, logVerifiers, witnessedLogVerifier } from '../../../src/verify/log.js';
import { authorizedRollback } from '../executions/helpers.js';
import { BASE, call, seedTenant, tenantRef } from '../platform/harness.js';
import { cosign, testWitness } from '../../unit/verify/fixtures.js';
import type { Seeded } from '../../../scripts/seed.js';

type Witness = ReturnType<typeof testWitness>;
const W1 = testWitness('witness.test/one', 31);
const W2 = testWitness('witness.test/two', 32);
const STRANGER = testWitness('witness.test/stranger', 33);
const T = 1_765_000_000;

async function trustedKeys() {
  const r = await call('GET', '/.well-known/writ-keys');
  const k = parsePublicKeySet(r.body);
  if (!k.ok) throw new Error(k.error.message);
  return k.value;
}

interface Submission {
  readonly url: string;
  readonly origin: string;
  readonly old: number;
  readonly proofLines: number;
  readonly size: number;
}

/**
 * A witness per C2SP tlog-witness `add-checkpoint`: verifies the log signature against the keys it
 * trusts for the origin (404 unknown origin, 403 bad signature), 400 when old > size, 409 with its
 * size (text/x.tlog.size) when old is not the size it last cosigned, 422 when the consistency
 * proof fails, then records the checkpoint and answers a real cosignature line. `misbehave`
 * replaces the answer (a wrong key, another checkpoint, an outage).
 */
class FakeWitness {
  readonly seen: Submission[] = [];
  /** Per origin: the size and root it last cosigned. */
  readonly state = new Map<string, { size: number; root: Uint8Array }>();
  misbehave: ((body: string, note: string) => Response | Promise<Response>) | null = null;

  constructor(
    readonly w: Witness,
    readonly url: string,
    /** The log keys it trusts, per origin. */
    readonly trusts: Map<string, ReturnType<typeof logVerifiers>>,
  ) {}

  async handle(body: string): Promise<Response> {
    const blank = body.indexOf('\n\n');
    const head = body.slice(0, blank).split('\n');
    const note = body.slice(blank + 2);
    const old = Number(head[0]!.replace(/^old /, ''));
    const proof = head.slice(1).map((l) => decodeBase64(l)!);
    const origin = note.split('\n')[0]!;
    const verifiers = this.trusts.get(origin);
    if (verifiers === undefined) return new Response('unknown origin', { status: 404 });
    const cp = verifyCheckpoint(note, verifiers, origin);
    if (!cp.ok) return new Response('bad signature', { status: 403 });
    const { size, rootHash } = cp.value.checkpoint;
    this.seen.push({ url: this.url, origin, old, proofLines: proof.length, size });
    if (this.misbehave !== null) return this.misbehave(body, note);
    if (old > size) return new Response('old > size', { status: 400 });
    const had = this.state.get(origin);
    if (old !== (had?.size ?? 0)) {
      return new Response(`${had?.size ?? 0}\n`, {
        status: 409,
        headers: { 'content-type': 'text/x.tlog.size' },
      });
    }
    if (had !== undefined) {
      const c = verifyConsistency(had.size, size, had.root, rootHash, proof);
      if (!c.ok) return new Response('inconsistent', { status: 422 });
    } else if (proof.length > 0) return new Response('proof from 0', { status: 422 });
    this.state.set(origin, { size, root: rootHash });
    return new Response(this.cosignLine(note), { status: 200, headers: { 'content-type': 'text/plain' } });
  }

  cosignLine(note: string, w: Witness = this.w): string {
    return cosign(note, w, T).slice(note.length);
  }
}

/** One fetcher for a set of fake witnesses, by URL; anything else is a network error. */
function fetcherFor(witnesses: readonly FakeWitness[]): WitnessFetcher {
  return async (url, init) => {
    const w = witnesses.find((x) => `${x.url}/add-checkpoint` === url);
    if (w === undefined) throw new TypeError('fetch failed');
    return w.handle(init.body);
  };
}

async function setup(prefix: string, ws: readonly Witness[]) {
  const s = await seedTenant(prefix);
  const origin = logOrigin('writ.test', s.tenant_id);
  const trusts = new Map([[origin, logVerifiers(await trustedKeys(), origin)]]);
  const fakes = ws.map((w, i) => new FakeWitness(w, `https://w${i}.${prefix}.example`, trusts));
  const stub = logSequencerStub(env, s.tenant_id);
  await runInDurableObject(stub, (o: LogSequencerObject) => {
    o.witnessFetcher = fetcherFor(fakes);
    // Submissions happen when a test says (`submitWitnesses`, or the alarm run explicitly).
    o.witnessAutoSubmit = false;
  });
  const put = await configure(
    s,
    fakes.map((f) => ({ vkey: f.w.vkey, url: f.url })),
  );
  expect(put.status, JSON.stringify(put.body)).toBe(200);
  return { s, origin, fakes, stub, trusts };
}

function configure(s: Seeded, witnesses: readonly { vkey: string; url: string }[], key = s.admin.api_key) {
  return call('PUT', '/v1/log/witnesses', { key, body: { witnesses } });
}

/** Fabricated receipts (the log never interprets bodies), drained into the log. */
async function append(s: Seeded, from: number, n: number) {
  const store = tenantStore(env, tenantRef(s));
  for (let i = from; i < from + n; i++) {
    const body = { receipt_kind: 'authorization', tenant_id: s.tenant_id, n: i };
    await store.insertReceipt({
      kind: 'authorization',
      receipt: { sha256: digestOf(body), body },
      outcome: 'denied',
      created_at_unix_ms: Date.now(),
    });
  }
  return logSequencerStub(env, s.tenant_id).drain(s.tenant_id);
}

async function checkpointText(s: Seeded): Promise<string> {
  const res = await app.fetch(
    new Request(`${BASE}/v1/log/checkpoint`, { headers: { authorization: `Bearer ${s.agent.api_key}` } }),
    env,
  );
  return res.text();
}

const policy = (ws: readonly Witness[], quorum?: number) => {
  const p = witnessPolicy(
    ws.map((w) => {
      const k = parseWitnessKey(w.vkey);
      if (!k.ok) throw new Error(k.error.message);
      return k.value;
    }),
    quorum,
  );
  if (!p.ok) throw new Error(p.error.message);
  return p.value;
};

describe('log witnesses (C2SP tlog-witness, the log side)', () => {
  it('witnesses cosign the new checkpoint; the checkpoint, the R2 copy and the bundle carry it, and the bundle passes a witness quorum', async () => {
    const { s, stub, fakes } = await setup('wit-cosign', [W1, W2]);
    const a = await authorizedRollback(s);
    await stub.drain(s.tenant_id);
    const keys = await trustedKeys();
    const verify = async (sha: string, ws: readonly Witness[], quorum?: number) => {
      const b = await call('GET', `/v1/receipts/${sha}/bundle`, { key: s.admin.api_key });
      expect(b.status).toBe(200);
      return {
        bundle: b.body,
        verdict: verifyBundle(b.body, {
          trustedKeys: keys,
          logVerifier: witnessedLogVerifier(policy(ws, quorum)),
        }),
      };
    };
    // Before any submission: the log's signature alone, so a witness quorum is not met.
    expect((await verify(a.sha256, [W1])).verdict).toMatchObject({
      valid: false,
      log: { status: 'failed', reason: 'witness_quorum_not_met' },
    });
    const state = await stub.submitWitnesses(s.tenant_id);
    expect(state.witnesses.map((w) => [w.name, w.cosigned_size, w.last_outcome, w.failures])).toEqual([
      [W1.name, 1, 'cosigned', 0],
      [W2.name, 1, 'cosigned', 0],
    ]);
    expect(fakes.map((f) => f.seen.map((x) => [x.old, x.proofLines, x.size]))).toEqual([
      [[0, 0, 1]],
      [[0, 0, 1]],
    ]);
    const cosigned = await verify(a.sha256, [W1, W2]);
    expect(cosigned.verdict).toMatchObject({
      valid: true,
      log: { status: 'included', inclusion: { index: 0, tree_size: 1, witnesses: { quorum: 2 } } },
    });
    // `writ verify --witness` accepts it too, and names who cosigned.
    const files: Record<string, string> = {
      'b.json': JSON.stringify(cosigned.bundle),
      'k.json': JSON.stringify((await call('GET', '/.well-known/writ-keys')).body),
    };
    const out: string[] = [];
    const code = await runVerify(['b.json', '--keys', 'k.json', '--witness', W1.vkey, '--witness', W2.vkey], {
      readFile: async (p) => new TextEncoder().encode(files[p] ?? ''),
      stdout: (t) => out.push(t),
      stderr: (t) => out.push(t),
    });
    expect(out.join('')).toContain('witnesses: 2 of 2 cosigned');
    expect(code).toBe(0);
    // The served checkpoint and the R2 copy carry the same verified lines.
    const served = await checkpointText(s);
    expect(served).toBe(cosigned.bundle.log.checkpoint);
    expect(served).toContain(`\u2014 ${W1.name} `);
    const r2 = await env.LOG_TILES.get(`${logPrefix(s.tenant_id)}checkpoint`);
    expect(await r2!.text()).toBe(served);
    // Nothing is submitted again for a checkpoint already cosigned.
    await stub.submitWitnesses(s.tenant_id);
    expect(fakes[0]!.seen).toHaveLength(1);

    // The log grows (size 3) with no submission yet: the latest checkpoint is the log's alone,
    // but the first receipt's bundle uses the newest cosigned checkpoint that covers it.
    await append(s, 0, 2);
    expect(await checkpointText(s)).not.toContain('\u2014 witness.test/');
    const older = await verify(a.sha256, [W1, W2]);
    expect(older.verdict).toMatchObject({ valid: true, log: { inclusion: { index: 0, tree_size: 1 } } });
    // Submitting the new checkpoint sends the consistency proof from 1 to 3; then size 3 is used.
    await stub.submitWitnesses(s.tenant_id);
    expect(fakes[0]!.seen.at(-1)).toMatchObject({ old: 1, size: 3 });
    expect(fakes[0]!.seen.at(-1)!.proofLines).toBeGreaterThan(0);
    expect((await verify(a.sha256, [W1, W2])).verdict).toMatchObject({
      valid: true,
      log: { inclusion: { index: 0, tree_size: 3 } },
    });

    // W2 goes down and W1 alone cosigns size 4: the latest checkpoint is served with W1's line,
    // and the bundle keeps the checkpoint both cosigned (the most cosignatures covering it).
    fakes[1]!.misbehave = () => new Response('down', { status: 503 });
    await append(s, 2, 1);
    await stub.submitWitnesses(s.tenant_id);
    const latest = await checkpointText(s);
    expect(latest.split('\n')[1]).toBe('4');
    expect(latest).toContain(`\u2014 ${W1.name} `);
    expect(latest).not.toContain(W2.name);
    expect((await verify(a.sha256, [W1, W2])).verdict).toMatchObject({
      valid: true,
      log: { inclusion: { tree_size: 3 } },
    });
    // Size 1 was dropped: both its witnesses cosigned size 3, which covers all it covers.
    const kept = await runInDurableObject(stub, (_o: LogSequencerObject, st) =>
      st.storage.sql.exec<{ size: number }>('SELECT size FROM cosigned_checkpoint ORDER BY size').toArray(),
    );
    expect(kept.map((r) => r.size)).toEqual([3, 4]);
  });

  it('a cosignature by the wrong key, over another checkpoint, or malformed is never stored', async () => {
    const { s, stub, fakes } = await setup('wit-bad', [W1]);
    await append(s, 0, 2);
    const f = fakes[0]!;
    const other = (await checkpointText(s)).replace(/\n2\n/, '\n7\n');
    const answers: [string, (note: string) => string][] = [
      ['another key under another name', (note) => f.cosignLine(note, STRANGER)],
      [
        'another key under the witness name and key id',
        (note) => f.cosignLine(note, { ...testWitness(W1.name, 34), keyId: W1.keyId }),
      ],
      ['the witness key over another checkpoint', () => f.cosignLine(other)],
      ['not signature lines', () => 'cosigned!\n'],
    ];
    for (const [what, answer] of answers) {
      f.misbehave = (_body, note) => new Response(answer(note), { status: 200 });
      const state = await runInDurableObject(stub, async (o: LogSequencerObject, st) => {
        // Past any backoff of the previous round.
        st.storage.sql.exec('UPDATE witness SET next_attempt_unix_ms = 0');
        return o.submitWitnesses(s.tenant_id);
      });
      expect(state.witnesses[0], what).toMatchObject({ cosigned_size: null, last_outcome: 'invalid_answer' });
      expect(await checkpointText(s), what).not.toContain(W1.name);
      const rows = await runInDurableObject(stub, (_o: LogSequencerObject, st) =>
        st.storage.sql.exec<{ n: number }>('SELECT count(*) AS n FROM cosignature').one(),
      );
      expect(rows.n, what).toBe(0);
    }
    expect(f.seen).toHaveLength(answers.length);
  });

  it('a 409 with the witness’s size is retried once with the consistency proof from that size', async () => {
    const { s, stub, fakes } = await setup('wit-409', [W1]);
    await append(s, 0, 3);
    await stub.submitWitnesses(s.tenant_id);
    const f = fakes[0]!;
    // The list is cleared and set again: the sequencer forgets the witness's size, the witness not.
    expect((await configure(s, [])).status).toBe(200);
    expect((await configure(s, [{ vkey: W1.vkey, url: f.url }])).status).toBe(200);
    await append(s, 3, 20);
    const state = await stub.submitWitnesses(s.tenant_id);
    expect(f.seen.map((x) => [x.old, x.size])).toEqual([
      [0, 3],
      [0, 23],
      [3, 23],
    ]);
    expect(f.seen[2]!.proofLines).toBeGreaterThan(1);
    expect(state.witnesses[0]).toMatchObject({ cosigned_size: 23, last_outcome: 'cosigned', failures: 0 });
    expect(await checkpointText(s)).toContain(`\u2014 ${W1.name} `);
    // A witness that answers 409 again is recorded, not retried a third time.
    await append(s, 23, 1);
    f.misbehave = () => new Response('5\n', { status: 409, headers: { 'content-type': 'text/x.tlog.size' } });
    const again = await stub.submitWitnesses(s.tenant_id);
    expect(f.seen.slice(3).map((x) => x.old)).toEqual([23, 5]);
    expect(again.witnesses[0]).toMatchObject({ cosigned_size: 5, last_outcome: '409', failures: 1 });
  });

  it('a down or hanging witness never delays the drain, the authorize path or the checkpoint; its failure is backed off', async () => {
    const { s, stub, fakes } = await setup('wit-down', [W1, W2]);
    await append(s, 0, 1);
    // The hanging answer is built inside the fetcher (the object's context), once released.
    let release: (status: number) => void = () => undefined;
    const hanging = new Promise<number>((resolve) => {
      release = resolve;
    });
    let calls = 0;
    await runInDurableObject(stub, (o: LogSequencerObject) => {
      o.witnessFetcher = async (url) => {
        calls++;
        if (url.startsWith(fakes[0]!.url)) throw new TypeError('connection refused');
        return new Response('unavailable', { status: await hanging });
      };
    });
    const round = stub.submitWitnesses(s.tenant_id);
    // While W2 hangs: drains complete and checkpoints advance, and an authorization is decided.
    // (`size`, not `appended`: an alarm the first drain armed may have taken the rows first.)
    expect(await append(s, 1, 2)).toMatchObject({ size: 3, more: false });
    expect((await checkpointText(s)).split('\n')[1]).toBe('3');
    await authorizedRollback(s);
    expect((await stub.drain(s.tenant_id)).size).toBe(4);
    release(503);
    const state = await round;
    expect(state.witnesses.map((w) => [w.last_outcome, w.failures, w.cosigned_size])).toEqual([
      ['network', 1, null],
      ['503', 1, null],
    ]);
    for (const w of state.witnesses) expect(w.retry_after_unix_ms).toBeGreaterThan(Date.now());
    // The retry is armed, and nothing is submitted again before it.
    const alarm = await runInDurableObject(stub, (_o: LogSequencerObject, st) => st.storage.getAlarm());
    expect(alarm).not.toBeNull();
    await stub.submitWitnesses(s.tenant_id);
    expect(calls).toBe(2);
  });

  it('the alarm submits after its drain', async () => {
    const { s, stub, fakes } = await setup('wit-alarm', [W1]);
    await append(s, 0, 2);
    // The alarm handler itself, run here (the runtime may also fire one the drain armed: rounds
    // never overlap and a cosigned size is not submitted again, so the outcome is the same).
    await runInDurableObject(stub, async (o: LogSequencerObject) => {
      o.witnessAutoSubmit = true;
      await o.alarm();
      o.witnessAutoSubmit = false;
    });
    expect(fakes[0]!.seen.map((x) => [x.old, x.size])).toEqual([[0, 2]]);
    expect((await stub.witnesses(s.tenant_id)).witnesses[0]).toMatchObject({ cosigned_size: 2 });
    expect(await checkpointText(s)).toContain(`\u2014 ${W1.name} `);
  });

  it('tenant isolation: one tenant’s witnesses never see or cosign another tenant’s log', async () => {
    const one = await setup('wit-iso1', [W1]);
    const two = await setup('wit-iso2', [W2]);
    // Both objects reach both witnesses (one fetcher), and W1 even trusts tenant two's log key.
    const all = [...one.fakes, ...two.fakes];
    for (const [origin, v] of two.trusts) one.fakes[0]!.trusts.set(origin, v);
    for (const x of [one, two]) {
      await runInDurableObject(x.stub, (o: LogSequencerObject) => {
        o.witnessFetcher = fetcherFor(all);
      });
      await append(x.s, 0, 2);
      await x.stub.submitWitnesses(x.s.tenant_id);
    }
    expect(one.fakes[0]!.seen.map((x) => x.origin)).toEqual([one.origin]);
    expect(two.fakes[0]!.seen.map((x) => x.origin)).toEqual([two.origin]);
    const cp1 = await checkpointText(one.s);
    const cp2 = await checkpointText(two.s);
    expect(cp1).toContain(W1.name);
    expect(cp1).not.toContain(W2.name);
    expect(cp2).toContain(W2.name);
    expect(cp2).not.toContain(W1.name);
    const listed = await call('GET', '/v1/log/witnesses', { key: two.s.agent.api_key });
    expect(listed.status).toBe(200);
    expect(listed.body.witnesses.map((w: { name: string }) => w.name)).toEqual([W2.name]);
  });

  it('configuration is validated strictly and a refused list changes nothing', async () => {
    const { s } = await setup('wit-config', [W1]);
    const url = 'https://w.example';
    const before = await call('GET', '/v1/log/witnesses', { key: s.admin.api_key });
    const publication = await call('GET', '/v1/log/publication', { key: s.admin.api_key });
    const logVkey = publication.body.verifier_keys[0].vkey as string;
    const many = Array.from({ length: 9 }, (_, i) => ({
      vkey: testWitness(`witness.test/m${i}`, 50 + i).vkey,
      url: `https://m${i}.example`,
    }));
    const refused: [string, unknown, string][] = [
      ['plain http', [{ vkey: W2.vkey, url: 'http://w.example' }], 'invalid_witness_url'],
      [
        'http loopback outside development',
        [{ vkey: W2.vkey, url: 'http://127.0.0.1:9' }],
        'invalid_witness_url',
      ],
      ['credentials in the url', [{ vkey: W2.vkey, url: 'https://u:p@w.example' }], 'invalid_witness_url'],
      ['a query', [{ vkey: W2.vkey, url: 'https://w.example/?a=b' }], 'invalid_witness_url'],
      ['the log’s own note key', [{ vkey: logVkey, url }], 'unsupported_witness_key_type'],
      ['a garbled vkey', [{ vkey: `${W2.vkey}x`, url }], 'malformed_witness_key'],
      [
        'the same witness twice',
        [
          { vkey: W2.vkey, url },
          { vkey: W2.vkey, url: `${url}/2` },
        ],
        'duplicate_witness',
      ],
      ['nine witnesses', many, 'too_many_witnesses'],
    ];
    for (const [what, witnesses, reason] of refused) {
      const r = await call('PUT', '/v1/log/witnesses', { key: s.admin.api_key, body: { witnesses } });
      expect(r.status, what).toBe(400);
      expect(JSON.stringify(r.body), what).toContain(reason);
    }
    expect(
      (await call('PUT', '/v1/log/witnesses', { key: s.admin.api_key, body: { witnesses: [], x: 1 } }))
        .status,
    ).toBe(400);
    // Only a tenant admin configures witnesses.
    expect((await configure(s, [{ vkey: W2.vkey, url }], s.agent.api_key)).status).toBe(403);
    expect((await call('GET', '/v1/log/witnesses', { key: s.admin.api_key })).body).toEqual(before.body);
    // In development (WRIT_WITNESS_HTTP_LOOPBACK=true) a loopback http witness is accepted.
    const dev = await app.fetch(
      new Request(`${BASE}/v1/log/witnesses`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${s.admin.api_key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ witnesses: [{ vkey: W2.vkey, url: 'http://127.0.0.1:9/w/' }] }),
      }),
      { ...env, WRIT_WITNESS_HTTP_LOOPBACK: 'true' } as Env,
    );
    expect(dev.status).toBe(200);
    const after = (await dev.json()) as { witnesses: { url: string }[]; changed_by: string };
    expect(after.witnesses.map((w) => w.url)).toEqual(['http://127.0.0.1:9/w']);
    expect(after.changed_by).toBe(s.admin.principal_id);
  });
});
