/**
 * `npm run bench:edge`: what an agent far from the D1 primary pays per call, with and without
 * read replication, in one run.
 *
 * Starts the Worker in workerd (bench/direct-worker.ts: wrangler's DevEnv, local D1 and Durable Objects,
 * a throwaway state directory, migrations applied to every D1 shard) through the bench-only entry
 * bench/edge-worker.ts, which routes every shard's D1 binding as read replication would and sleeps
 * before each round trip: `PRIMARY_MS` for one to the primary, `REPLICA_MS` for one to a replica
 * (defaults 80 and 5: an agent on another continent than the primary, a replica nearby). Nothing
 * in src/ knows about it.
 *
 * For each route (authorize allowed, authorize denied, claim, report) it sends `BENCH_REQUESTS`
 * sequential requests in each of four modes, interleaved: replicas on, replicas off, replicas on
 * with each round trip's latency including the storage's own execution (`inside`: local D1 and
 * Durable Objects run in this process and take milliseconds a real round trip already contains),
 * and replicas on without injected latency (this machine's processing time); it prints the primary
 * and replica round trips per request (as the Worker and the idempotency object counted them) and p50 / p99 latency seen by
 * the client. Set-up traffic (seeding, approvals) skips the injected latency.
 *
 * Then, per route and mode, the median timeline of one request (bench/edge-worker.ts): when
 * each storage round trip and Durable Object call started and ended inside the Worker, how long
 * the request waited before the Worker got it and after it answered (wall clock), and the
 * client's total, so local artifacts (the dev proxy, work of earlier requests still running in
 * the same workerd process) show apart from the request's own path.
 *
 * Environment: PRIMARY_MS (80), REPLICA_MS (5), DO_MS (5: before each awaited Durable Object call;
 * not counted in `wait ms`, which is D1 only), BENCH_REQUESTS (40, max 500), BENCH_LOG=off (a
 * diagnosis: measured requests kick no transparency-log drain), BENCH_VIA_PROXY=1 (send requests
 * through wrangler's dev proxy, as this bench did before 2026-12-01; by default they go to workerd
 * directly, since the proxy is a second workerd process and an extra HTTP hop no deployment has).
 * Not part of `npm test`: numbers depend on the machine, and local workerd is not production.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startDirectWorker } from './direct-worker.js';
import { generateKeyRing } from '../src/core/receipts/keys.js';
import { DEMO_EXECUTOR_RELEASE, DEMO_POLICY, seedDemo, type Seeded } from '../scripts/seed.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PRIMARY_MS = Math.max(0, Number(process.env.PRIMARY_MS ?? 80));
const REPLICA_MS = Math.max(0, Number(process.env.REPLICA_MS ?? 5));
/** Injected before each awaited Durable Object call (rate limiter, idempotency): an object nearby. */
const DO_MS = Math.max(0, Number(process.env.DO_MS ?? 5));
/** `BENCH_LOG=off`: measured requests kick no log drain (a diagnosis of what the drain costs). */
const LOG_OFF = process.env.BENCH_LOG === 'off';
const REQUESTS = Math.min(500, Math.max(5, Number(process.env.BENCH_REQUESTS ?? 40)));

/**
 * `on`: read replication, latency injected before each round trip (added to local D1's own
 * execution in this process); `off`: every round trip to the primary, latency injected as for
 * `on`; `inside`: as `on`, but each round trip takes its latency in all, the storage's execution
 * included (the Worker pads the trip after it returns up to the latency), as a real round trip's
 * latency includes the work done at the database; `local`: read replication without injected
 * latency, the Worker's own processing time on this machine (what `on` adds the latency to).
 */
type Mode = 'on' | 'off' | 'inside' | 'local';

interface Sample {
  readonly ms: number;
  readonly primary: number;
  readonly replica: number;
  readonly status: number;
  /** The Worker's `writ-bench-timeline` (bench/edge-worker.ts). */
  readonly timeline: string;
  /** Wall-clock ms from the client's send to the Worker's entry, and from its answer to the client. */
  readonly before: number;
  readonly after: number;
}

interface Row {
  readonly route: string;
  readonly mode: Mode;
  readonly samples: readonly Sample[];
}

function percentile(sorted: readonly number[], p: number): number {
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i] ?? NaN;
}

async function main(): Promise<void> {
  const state = mkdtempSync(path.join(os.tmpdir(), 'writ-bench-edge-'));
  const adminToken = randomBytes(32).toString('hex');
  // Every receipt is signed (issue 11): a throwaway key ring, as for the admin token.
  const receiptKeys = JSON.stringify(generateKeyRing(randomBytes(32), 'writ.bench', Date.now()));
  // wrangler looks the required secrets up in the environment too; the bindings below are what count.
  process.env.WRIT_ADMIN_TOKEN ??= adminToken;
  process.env.WRIT_RECEIPT_KEYS ??= receiptKeys;
  console.log(`starting the Worker in workerd (state in ${state}) ...`);
  // The seeded tenant lands on whichever shard holds the fewest.
  const worker = await startDirectWorker({
    state,
    entrypoint: path.join(ROOT, 'bench', 'edge-worker.ts'),
    vars: {
      WRIT_ADMIN_TOKEN: adminToken,
      WRIT_RECEIPT_KEYS: receiptKeys,
      WRIT_BENCH_PRIMARY_MS: String(PRIMARY_MS),
      WRIT_BENCH_REPLICA_MS: String(REPLICA_MS),
      WRIT_BENCH_DO_MS: String(DO_MS),
      // Every request of the bench comes from one agent: the write limit is not what is measured.
      WRIT_RATE_LIMIT_PER_SECOND: '100000',
      WRIT_RATE_LIMIT_BURST: '100000',
    },
  });
  try {
    const base = worker.base;
    console.log(`requests go to ${base} (${worker.route})`);
    const setupFetch: typeof fetch = (input, init) => {
      const headers = new Headers(init?.headers);
      headers.set('writ-bench-latency', 'off');
      return fetch(input, { ...init, headers });
    };
    const api = async (key: string, method: string, p: string, body?: unknown, mode?: Mode) => {
      const headers: Record<string, string> = { authorization: `Bearer ${key}` };
      if (body !== undefined) headers['content-type'] = 'application/json';
      if (mode === undefined || mode === 'local') headers['writ-bench-latency'] = 'off';
      if (mode === 'off') headers['writ-bench-replicas'] = 'off';
      if (mode === 'inside') headers['writ-bench-trip'] = 'inside';
      if (mode !== undefined && LOG_OFF) headers['writ-bench-log'] = 'off';
      const init: RequestInit = { method, headers };
      if (body !== undefined) init.body = JSON.stringify(body);
      const t0 = performance.now();
      const sent = Date.now();
      const res = await fetch(`${base}${p}`, init);
      const received = Date.now();
      const json = (await res.json()) as Record<string, unknown>;
      const ms = performance.now() - t0;
      const [primary, replica] = (res.headers.get('writ-bench-trips') ?? 'NaN,NaN').split(',').map(Number);
      const timeline = res.headers.get('writ-bench-timeline') ?? '';
      const [entered, left] = (res.headers.get('writ-bench-wall') ?? 'NaN,NaN').split(',').map(Number);
      const before = (entered ?? NaN) - sent;
      const after = received - (left ?? NaN);
      return {
        json,
        sample: {
          ms,
          primary: primary ?? NaN,
          replica: replica ?? NaN,
          status: res.status,
          timeline,
          before,
          after,
        },
      };
    };

    const policy = {
      ...DEMO_POLICY,
      run_budget_limits: {
        ...DEMO_POLICY.run_budget_limits,
        max_calls: 100_000,
        max_external_writes: 10_000,
      },
    };
    const s: Seeded = await seedDemo({
      baseUrl: base,
      adminToken,
      fetch: setupFetch,
      now: Date.now(),
      name: 'bench-edge',
      policy,
    });
    const agent = s.agent.api_key;
    const run = await api(agent, 'POST', '/v1/runs', {
      max_calls: 100_000,
      max_external_writes: 10_000,
      max_duration_ms: 3_600_000,
    });
    if (run.sample.status !== 201) throw new Error(`set-up run: ${JSON.stringify(run.json)}`);
    const run_id = run.json.run_id as string;
    const readCall = {
      tool_contract_sha256: s.read_contract_sha256,
      input: { service: 'api', environment: 'production' },
      run_id,
    };
    const rollback = { service: 'api', environment: 'production', from_version: 'v42', to_version: 'v41' };
    let n = 0;
    const writeCall = (extra: Record<string, unknown> = {}) => ({
      tool_contract_sha256: s.rollback_contract_sha256,
      input: rollback,
      idempotency_key: `bench-${process.pid}-${(n += 1)}`,
      run_id,
      ...extra,
    });
    /** An approved rollback authorized without injected latency: what a claim starts from. */
    const authorized = async () => {
      const req = await api(agent, 'POST', '/v1/approval-requests', {
        tool_contract_sha256: s.rollback_contract_sha256,
        input: rollback,
      });
      const approval_id = req.json.approval_id as string;
      await api(s.approver.api_key, 'POST', `/v1/approval-requests/${approval_id}/approve`);
      const a = await api(agent, 'POST', '/v1/authorize', writeCall({ approval_id }));
      if (a.sample.status !== 200) throw new Error(`set-up authorization: ${JSON.stringify(a.json)}`);
      return a.json.receipt as { sha256: string; body: Record<string, unknown> };
    };

    const rows: Row[] = [];
    const MODES = ['on', 'off', 'inside', 'local'] as const;
    /**
     * `REQUESTS` rounds of one request per mode, the modes in rotating order, so a change in the
     * machine's load during the run weighs on every mode alike.
     */
    const measure = async (route: string, expect: number, one: (mode: Mode) => Promise<Sample>) => {
      const samples = new Map<Mode, Sample[]>(MODES.map((m) => [m, []]));
      for (const m of MODES) await one(m); // warm
      for (let i = 0; i < REQUESTS; i++) {
        for (let k = 0; k < MODES.length; k++) {
          const mode = MODES[(i + k) % MODES.length] as Mode;
          const sample = await one(mode);
          if (sample.status !== expect)
            throw new Error(`${route} (${mode}): answered ${sample.status}, expected ${expect}`);
          samples.get(mode)?.push(sample);
        }
      }
      for (const m of MODES) rows.push({ route, mode: m, samples: samples.get(m) ?? [] });
    };

    console.log(`${REQUESTS} sequential requests per route and mode, modes interleaved ...`);
    // The harness's floor: a request that touches no storage, through the same dev proxy.
    await measure('GET /v1/healthz', 200, async (mode) => {
      return (await api(agent, 'GET', '/v1/healthz', undefined, mode)).sample;
    });
    await measure('authorize (allowed)', 200, async (mode) => {
      return (await api(agent, 'POST', '/v1/authorize', readCall, mode)).sample;
    });
    await measure('authorize (denied)', 403, async (mode) => {
      return (await api(agent, 'POST', '/v1/authorize', writeCall(), mode)).sample;
    });
    // Claim and report each need an operation of their own, prepared without latency.
    type Receipt = { sha256: string; body: Record<string, unknown> };
    const receipts = new Map<Mode, Receipt[]>(MODES.map((m) => [m, []]));
    for (const m of MODES) for (let i = 0; i <= REQUESTS; i++) receipts.get(m)?.push(await authorized());
    const claims = new Map<Mode, { operation_id: string; fencing_token: string; receipt: Receipt }[]>(
      MODES.map((m) => [m, []]),
    );
    await measure('claim', 200, async (mode) => {
      const receipt = receipts.get(mode)?.shift();
      if (receipt === undefined) throw new Error('out of receipts');
      const c = await api(
        s.executor.api_key,
        'POST',
        '/v1/executions/claim',
        { authorization_receipt_sha256: receipt.sha256 },
        mode,
      );
      claims.get(mode)?.push({
        operation_id: c.json.operation_id as string,
        fencing_token: c.json.fencing_token as string,
        receipt,
      });
      return c.sample;
    });
    await measure('report', 200, async (mode) => {
      const c = claims.get(mode)?.shift();
      if (c === undefined) throw new Error('out of claims');
      // Started after its claim (an effect that began before the claim is not the owner's).
      const started = Date.now() - 10;
      const observation = {
        observation_id: `obs-bench-${process.pid}-${(n += 1)}`,
        authorization_receipt_sha256: c.receipt.sha256,
        invocation_sha256: c.receipt.body.invocation_sha256,
        executor_release: DEMO_EXECUTOR_RELEASE,
        outcome: 'indeterminate',
        started_at_unix_ms: started,
        completed_at_unix_ms: started + 5,
        output_sha256: null,
        output_bytes: 0,
        effect_id: null,
        before_state_sha256: null,
        after_state_sha256: null,
        idempotency_key: c.receipt.body.idempotency_key,
      };
      const r = await api(
        s.executor.api_key,
        'POST',
        '/v1/executions/report',
        { operation_id: c.operation_id, fencing_token: c.fencing_token, observation },
        mode,
      );
      return r.sample;
    });

    const fmt = (x: number) => x.toFixed(1).padStart(8);
    console.log('');
    console.log(
      `injected latency: ${PRIMARY_MS} ms per primary round trip, ${REPLICA_MS} ms per replica round trip, ` +
        `${DO_MS} ms per Durable Object call; ` +
        `${REQUESTS} sequential requests per row; ${os.cpus().length} cores`,
    );
    console.log(
      [
        'route'.padEnd(22),
        'mode'.padEnd(8),
        'primary',
        'replica',
        'wait ms'.padStart(8),
        'p50 ms'.padStart(8),
        'p99 ms'.padStart(8),
      ].join('  '),
    );
    for (const r of rows) {
      const sorted = r.samples.map((x) => x.ms).sort((a, b) => a - b);
      const avg = (f: (x: Sample) => number) => r.samples.reduce((t, x) => t + f(x), 0) / r.samples.length;
      console.log(
        [
          r.route.padEnd(22),
          r.mode.padEnd(8),
          avg((x) => x.primary)
            .toFixed(2)
            .padStart(7),
          avg((x) => x.replica)
            .toFixed(2)
            .padStart(7),
          // The injected latency a request waits for: its round trips times their cost.
          fmt(
            r.mode === 'local' ? 0 : avg((x) => x.primary) * PRIMARY_MS + avg((x) => x.replica) * REPLICA_MS,
          ),
          fmt(percentile(sorted, 50)),
          fmt(percentile(sorted, 99)),
        ].join('  '),
      );
    }
    // Where one request's time goes: the median of each timeline mark (ms since the request
    // entered the Worker), then the client's total; the rest is the dev proxy and loopback.
    console.log('\nmedian timeline per request (ms since the Worker got it; > start, < end):');
    for (const r of rows) {
      const at = new Map<string, number[]>();
      for (const x of r.samples) {
        const seen = new Map<string, number>();
        for (const entry of x.timeline.split(',').filter((e) => e !== '')) {
          const i = entry.lastIndexOf('@');
          const base = entry.slice(0, i);
          const k = (seen.get(base) ?? 0) + 1;
          seen.set(base, k);
          const label = k === 1 ? base : `${base}#${k}`;
          at.set(label, [...(at.get(label) ?? []), Number(entry.slice(i + 1))]);
        }
      }
      const marks = [...at.entries()]
        .map(
          ([label, v]) =>
            [
              label,
              percentile(
                [...v].sort((a, b) => a - b),
                50,
              ),
            ] as const,
        )
        .sort((a, b) => a[1] - b[1])
        .map(([label, t]) => `${label} ${t.toFixed(1)}`);
      const med = (f: (x: Sample) => number) =>
        percentile(
          r.samples.map(f).sort((a, b) => a - b),
          50,
        );
      console.log(
        `  ${r.route} (${r.mode}): before the Worker ${med((x) => x.before).toFixed(0)}; ${marks.join(', ')}; ` +
          `after it ${med((x) => x.after).toFixed(0)}; client total ${med((x) => x.ms).toFixed(1)}`,
      );
    }
    const p50 = (route: string, mode: Mode) => {
      const row = rows.find((r) => r.route === route && r.mode === mode);
      return row === undefined
        ? NaN
        : percentile(
            row.samples.map((x) => x.ms).sort((a, b) => a - b),
            50,
          );
    };
    const goal = PRIMARY_MS + 15;
    const on = p50('authorize (allowed)', 'on');
    const inside = p50('authorize (allowed)', 'inside');
    const local = p50('authorize (allowed)', 'local');
    const health = p50('GET /v1/healthz', 'inside');
    console.log(
      `\ngoal: authorize p50 <= one primary round trip + 15 ms = ${goal} ms:\n` +
        `  latency added to local execution (on):     ${on.toFixed(1)} ms (${on <= goal ? 'met' : 'not met'}); ` +
        `of which ${local.toFixed(1)} ms is this machine's processing without injected latency, ` +
        `and ${(on - local).toFixed(1)} ms waiting on storage\n` +
        `  latency including execution (inside):      ${inside.toFixed(1)} ms (${inside <= goal ? 'met' : 'not met'}); ` +
        `of which ${health.toFixed(1)} ms is the client and loopback HTTP (GET /v1/healthz)`,
    );
  } finally {
    await worker.dispose();
    rmSync(state, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? (e.stack ?? e.message) : e);
  process.exit(1);
});
