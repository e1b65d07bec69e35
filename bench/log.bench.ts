/**
 * `npm run bench:log` (issue 11): what the signed receipts and the transparency log cost, in one run.
 *
 * 1. In process (Node, the same core code the Worker runs): the Ed25519 signature each receipt
 *    now carries (the only work the log adds inside a request, besides one more statement in the
 *    receipt's D1 batch), and the sequencer's appends per second for one tenant at several batch
 *    sizes (leaf hashes, tiles, entry bundles and one signed checkpoint per batch).
 * 2. Over HTTP (the Worker in local workerd, requests sent to workerd directly as in bench:edge
 *    and bench:tenants, bench/direct-worker.ts; local D1, Durable Objects and R2): `POST /v1/authorize` under load
 *    with the log live (every receipt signed, kicked into its tenant's sequencer with `waitUntil`,
 *    drained from D1 by the alarm) beside `GET /v1/healthz`; then how long after the last response
 *    the log's checkpoint covers every receipt (the inclusion delay), and the appends per second
 *    the sequencer sustained end to end.
 * 3. Paired (issue 11, "no added latency beyond noise"): a second Worker built with
 *    `WRIT_BENCH_LOG_OFF` defined (no Ed25519 signature, no log kick, so no draining; the
 *    signature row is still written with an empty signature, src/platform/bindings.ts) beside
 *    the log-on one, both seeded alike, each in its own workerd process. Concurrent loops send `POST /v1/authorize` to both in
 *    turn, alternating which goes first, for BENCH_PAIRED_S seconds: p50 / p99 of each, their
 *    ratio, the median paired difference, a sign test over the pairs (the typical request), and a
 *    95% bootstrap interval of the p99 ratio (the tail).
 *
 * Environment: BENCH_DURATION_S (default 10, max 60), BENCH_CONNECTIONS (default 8),
 * BENCH_PAIRED_S (default 40, max 60: the tail needs samples), BENCH_PAIRED_LOOPS (default 4),
 * BENCH_OFF=drain (a diagnosis: the log-off build still signs, so the pairs differ only by the log's
 * kicks and drains), BENCH_VIA_PROXY=1 (through wrangler's dev proxy, as before 2026-12-01).
 * Not part of `npm test`: numbers depend on the machine, and local workerd is not production.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { digestOf } from '../src/core/canonical/canonical.js';
import { ed25519Signer } from '../src/core/log/note.js';
import { sequenceBatch } from '../src/core/log/sequencer.js';
import { EMPTY_LOG_STATE, type LogState, TILE_WIDTH } from '../src/core/log/tiles.js';
import { generateKeyRing, parseKeyRing } from '../src/core/receipts/keys.js';
import { signReceipt } from '../src/core/receipts/signing.js';
import { utf8Encode } from '../src/core/canonical/json.js';
import { canonicalize } from '../src/core/canonical/canonical.js';
import { receiptSigner } from '../src/platform/receipt-keys.js';
import { ensureDevVars } from '../scripts/dev.js';
import { type DirectWorker, startDirectWorker } from './direct-worker.js';
import { type AutocannonResult, autocannon, seedAuthorizeTarget } from './local-authorize.js';

const DURATION_S = Math.min(60, Math.max(1, Number(process.env.BENCH_DURATION_S ?? 10)));
const CONNECTIONS = Math.min(64, Math.max(1, Number(process.env.BENCH_CONNECTIONS ?? 8)));
/** Longest wait for the log to cover every receipt after the load stops. */
const CATCH_UP_LIMIT_MS = 60_000;
const PAIRED_S = Math.min(60, Math.max(1, Number(process.env.BENCH_PAIRED_S ?? 40)));
const PAIRED_LOOPS = Math.min(16, Math.max(1, Number(process.env.BENCH_PAIRED_LOOPS ?? 4)));
/** `BENCH_OFF=drain`: the log-off build still signs every receipt; only the log is left out. */
const OFF_KEEPS_SIGNING = process.env.BENCH_OFF === 'drain';

async function inProcess(): Promise<void> {
  const doc = generateKeyRing(new Uint8Array(32).fill(1), 'writ.bench', 0);
  const ring = parseKeyRing(JSON.stringify(doc));
  if (!ring.ok) throw new Error('ring');
  // Signing: what each receipt write now adds to the request's CPU time.
  const N = 2000;
  const receipts = Array.from({ length: N }, (_, i) => {
    const body = { receipt_kind: 'authorization', tenant_id: 't_bench', n: i };
    return { sha256: digestOf(body), body };
  });
  const envelopes: Uint8Array[] = [];
  const t0 = performance.now();
  for (const r of receipts) {
    const s = signReceipt(ring.value, r, 1_767_225_600_000);
    if (!s.ok) throw new Error('sign');
    envelopes.push(utf8Encode(canonicalize(s.value)));
  }
  const signUs = ((performance.now() - t0) * 1000) / N;
  // The service's signer: the same checks, the runtime's native Ed25519 (WebCrypto).
  const native = receiptSigner({ WRIT_RECEIPT_KEYS: JSON.stringify(doc) });
  await native(receipts[0]!, 1_767_225_600_000);
  const t1 = performance.now();
  for (const r of receipts) await native(r, 1_767_225_600_000);
  const nativeUs = ((performance.now() - t1) * 1000) / N;
  console.log(
    `receipt signature per receipt: ${nativeUs.toFixed(0)} µs native (WebCrypto, what the service uses), ${signUs.toFixed(0)} µs portable (@noble/curves)`,
  );

  // Sequencing: appends per second for one tenant, by batch size.
  const origin = 'writ.bench/log/t_bench';
  const signer = ed25519Signer(origin, new Uint8Array(32).fill(1));
  if (!signer.ok) throw new Error('signer');
  const TOTAL = 8192;
  const entries = Array.from({ length: TOTAL }, (_, i) => envelopes[i % N]!);
  console.log('sequencer (one tenant, in process): batch size -> appends/s');
  for (const batch of [1, 16, 256, 1024]) {
    const count = batch === 1 ? 1024 : TOTAL;
    let state: LogState = EMPTY_LOG_STATE;
    const start = performance.now();
    for (let at = 0; at < count; at += batch) {
      // The current partial entry bundle: what the Durable Object reads back from its leaf table.
      const pending = entries.slice(state.size - (state.size % TILE_WIDTH), state.size);
      const b = sequenceBatch(state, pending, entries.slice(at, at + batch), origin, signer.value);
      if (!b.ok) throw new Error(b.error.message);
      state = b.value.state;
    }
    const perS = count / ((performance.now() - start) / 1000);
    console.log(`  ${String(batch).padStart(5)}  ${perS.toFixed(0).padStart(8)} appends/s`);
  }
}

/** A seeded local Worker, ready to authorize: its URL, the agent's headers, one authorize body. */
interface Target {
  readonly baseUrl: string;
  readonly agent: Record<string, string>;
  readonly body: string;
  readonly logSize: () => Promise<number>;
}

async function seeded(baseUrl: string, adminToken: string): Promise<Target> {
  const { agent, body } = await seedAuthorizeTarget(baseUrl, adminToken);
  const logSize = async (): Promise<number> => {
    const r = await fetch(`${baseUrl}/v1/log/checkpoint`, { headers: agent });
    return Number((await r.text()).split('\n')[1]);
  };
  return { baseUrl, agent, body, logSize };
}

async function overHttp(): Promise<void> {
  const adminToken = ensureDevVars();
  const state = mkdtempSync(path.join(os.tmpdir(), 'writ-bench-log-'));
  const stateOff = mkdtempSync(path.join(os.tmpdir(), 'writ-bench-log-off-'));
  console.log('\nstarting two Workers in workerd (log on, log off) ...');
  // The bench measures the log, not the write limits: both workers admit every request (a 429
  // would be counted as a failure and end the paired comparison early).
  const unlimited = Object.fromEntries(
    [
      ...['WRIT_RATE_LIMIT_PER_SECOND', 'WRIT_RATE_LIMIT_BURST'],
      ...['WRIT_TENANT_RATE_LIMIT_PER_SECOND', 'WRIT_TENANT_RATE_LIMIT_BURST'],
    ].map((name) => [name, '1000000']),
  );
  const vars = { WRIT_ADMIN_TOKEN: adminToken, ...unlimited };
  // One after the other: two DevEnvs starting at once in one process share wrangler's state.
  // Each is disposed before the error propagates (nothing outlives the bench).
  const worker = await startDirectWorker({ state, vars });
  let off: DirectWorker;
  try {
    off = await startDirectWorker({
      state: stateOff,
      vars,
      define: { WRIT_BENCH_LOG_OFF: 'true', ...(OFF_KEEPS_SIGNING ? { WRIT_BENCH_LOG_SIGNED: 'true' } : {}) },
    });
  } catch (e) {
    await worker.dispose();
    rmSync(state, { recursive: true, force: true });
    rmSync(stateOff, { recursive: true, force: true });
    throw e;
  }
  console.log(`requests go to ${worker.base} and ${off.base} (${worker.route})`);
  try {
    const on = await seeded(worker.base, adminToken);
    const logOff = await seeded(off.base, adminToken);
    const { agent, body } = on;
    const size = on.logSize;

    const common = { connections: CONNECTIONS, duration: DURATION_S };
    await autocannon({ ...common, duration: 2, url: `${worker.base}/v1/healthz` });
    const trivial = await autocannon({ ...common, url: `${worker.base}/v1/healthz` });
    const loadStart = performance.now();
    const authz = await autocannon({
      ...common,
      url: `${worker.base}/v1/authorize`,
      method: 'POST',
      headers: agent,
      body,
    });
    const loadEnd = performance.now();
    const issued = 1 + authz.requests.total - authz.non2xx - authz.errors - authz.timeouts;
    let logged = await size();
    while (logged < issued && performance.now() - loadEnd < CATCH_UP_LIMIT_MS) {
      await new Promise((r) => setTimeout(r, 50));
      logged = await size();
    }
    const caughtUp = performance.now();

    const row = (name: string, r: AutocannonResult) =>
      [
        name.padEnd(22),
        r.requests.average.toFixed(0).padStart(8),
        r.latency.p50.toFixed(1).padStart(9),
        r.latency.p99.toFixed(1).padStart(9),
        String(r.requests.total).padStart(9),
        String(r.non2xx + r.errors + r.timeouts).padStart(8),
      ].join('  ');
    console.log(
      `\nworkerd (local), ${CONNECTIONS} connections, ${DURATION_S} s per route, ${os.cpus().length} cores`,
    );
    console.log(
      [
        'route'.padEnd(22),
        'req/s'.padStart(8),
        'p50 ms'.padStart(9),
        'p99 ms'.padStart(9),
        'requests'.padStart(9),
        'failed'.padStart(8),
      ].join('  '),
    );
    console.log(row('GET /v1/healthz', trivial));
    console.log(row('POST /v1/authorize', authz));
    const e2e = logged / ((caughtUp - loadStart) / 1000);
    console.log(
      `\nlog: ${logged} receipts logged (at least the ${issued} answered within the window); the checkpoint covered them ${(caughtUp - loadEnd).toFixed(0)} ms after the load stopped; ${e2e.toFixed(0)} appends/s end to end (bounded by the authorize rate)`,
    );
    if (logged < issued || authz.non2xx > 0 || authz.errors > 0) process.exitCode = 1;

    const paired = await pairedAuthorize(on, logOff);
    // The log-off build must really be one: its log never took a receipt in.
    const offLogged = await logOff.logSize();
    if (offLogged !== 0 || paired.failed > 0) process.exitCode = 1;
    console.log(
      offLogged === 0
        ? 'log-off build confirmed: its log stayed empty'
        : `log-off build NOT confirmed: its log holds ${offLogged} receipts`,
    );
  } finally {
    await off.dispose();
    await worker.dispose();
    rmSync(state, { recursive: true, force: true });
    rmSync(stateOff, { recursive: true, force: true });
  }
}

/** The `q` quantile (nearest rank) of sorted numbers. */
/**
 * A 95 % interval for quantile `q`'s ratio on/off, by the percentile bootstrap: the pairs are
 * resampled with replacement `rounds` times (a fixed-seed generator, so the interval is a
 * function of the run's samples). A tail difference is measurable beyond noise only when the
 * interval excludes 1; the sign test speaks for the typical request, this for the slowest.
 */
function bootstrapRatio(pairs: readonly [number, number][], q: number, rounds = 2000): [number, number] {
  let seed = 0x9e3779b9;
  const next = () => {
    // xorshift32: reproducible, and good enough to pick indices.
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return (seed >>> 0) / 2 ** 32;
  };
  const ratios: number[] = [];
  const n = pairs.length;
  for (let r = 0; r < rounds; r++) {
    const on: number[] = [];
    const off: number[] = [];
    for (let i = 0; i < n; i++) {
      const p = pairs[Math.floor(next() * n)]!;
      on.push(p[0]);
      off.push(p[1]);
    }
    on.sort((x, y) => x - y);
    off.sort((x, y) => x - y);
    ratios.push(quantile(on, q) / quantile(off, q));
  }
  ratios.sort((x, y) => x - y);
  return [quantile(ratios, 0.025), quantile(ratios, 0.975)];
}

function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

/**
 * Paired, interleaved: each loop sends one authorize to each Worker in turn (which one first
 * alternates), so both see the same machine load at the same moments; a pair is kept only if both
 * answered 200. A sign test over the pairs asks whether "log on is slower" wins more often than
 * chance: |z| < 2 is no difference beyond noise.
 */
async function pairedAuthorize(on: Target, off: Target): Promise<{ failed: number }> {
  const once = async (t: Target): Promise<number | null> => {
    const start = performance.now();
    const r = await fetch(`${t.baseUrl}/v1/authorize`, { method: 'POST', headers: t.agent, body: t.body });
    await r.arrayBuffer();
    return r.status === 200 ? performance.now() - start : null;
  };
  // Warm both (isolates, caches) before measuring.
  for (let i = 0; i < 5; i++) await Promise.all([once(on), once(off)]);
  const pairs: [number, number][] = [];
  let failed = 0;
  const until = performance.now() + PAIRED_S * 1000;
  await Promise.all(
    Array.from({ length: PAIRED_LOOPS }, async (_, loop) => {
      for (let k = loop; performance.now() < until; k++) {
        const onFirst = k % 2 === 0;
        const a = onFirst ? await once(on) : await once(off);
        const b = onFirst ? await once(off) : await once(on);
        const [tOn, tOff] = onFirst ? [a, b] : [b, a];
        if (tOn === null || tOff === null) failed++;
        else pairs.push([tOn, tOff]);
      }
    }),
  );
  const sortedOn = pairs.map((p) => p[0]).sort((x, y) => x - y);
  const sortedOff = pairs.map((p) => p[1]).sort((x, y) => x - y);
  const diffs = pairs.map(([a, b]) => a - b).sort((x, y) => x - y);
  const slower = diffs.filter((d) => d > 0).length;
  const faster = diffs.filter((d) => d < 0).length;
  const n = slower + faster;
  const z = n === 0 ? 0 : (slower - n / 2) / Math.sqrt(n / 4);
  const fmt = (x: number) => x.toFixed(1).padStart(9);
  console.log(
    `\npaired POST /v1/authorize, log on vs off${OFF_KEEPS_SIGNING ? ' (off still signs: BENCH_OFF=drain)' : ''}: ${pairs.length} pairs, ${PAIRED_LOOPS} loops, ${PAIRED_S} s, ${failed} failed`,
  );
  console.log(['build'.padEnd(22), 'p50 ms'.padStart(9), 'p99 ms'.padStart(9)].join('  '));
  console.log(
    ['log on (signed, drained)'.padEnd(22), fmt(quantile(sortedOn, 0.5)), fmt(quantile(sortedOn, 0.99))].join(
      '  ',
    ),
  );
  console.log(
    ['log off'.padEnd(22), fmt(quantile(sortedOff, 0.5)), fmt(quantile(sortedOff, 0.99))].join('  '),
  );
  console.log(
    `ratio on/off: p50 ${(quantile(sortedOn, 0.5) / quantile(sortedOff, 0.5)).toFixed(2)}, p99 ${(quantile(sortedOn, 0.99) / quantile(sortedOff, 0.99)).toFixed(2)}; median paired difference ${quantile(diffs, 0.5).toFixed(1)} ms; log on slower in ${slower} of ${n} pairs (sign test z = ${z.toFixed(2)}: ${Math.abs(z) < 2 ? '|z| < 2, no difference beyond noise' : '|z| >= 2, a difference beyond noise'})`,
  );
  const [lo, hi] = bootstrapRatio(pairs, 0.99);
  console.log(
    `p99 ratio on/off, 95% bootstrap interval over the pairs: ${lo.toFixed(2)} to ${hi.toFixed(2)} (${lo <= 1 && hi >= 1 ? 'contains 1: no tail difference beyond noise' : 'excludes 1: the tail differs beyond noise'})`,
  );
  return { failed };
}

async function main(): Promise<void> {
  console.log(
    `load average ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}, ${os.cpus().length} cores`,
  );
  await inProcess();
  await overHttp();
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
