/**
 * `npm run bench:http`: the authorize path over HTTP against a trivial route of the same Worker.
 *
 * Starts `wrangler dev` itself (local D1 and Durable Objects) on a free loopback port with a
 * throwaway state directory, seeds a demo tenant through the API, drives both routes with
 * autocannon for a bounded time each, prints requests per second and p50 / p99 latency side by
 * side, and stops the Worker. Traffic goes to 127.0.0.1 only.
 *
 * The authorize calls use the read-only contract (an approval is single use, so a write cannot
 * be repeated): each call authenticates, reads the policy, contract, run, grants in one D1 batch,
 * evaluates, and writes the receipt and the run charge in a second batch. The run budget is
 * raised so every call is authorized (the decision is checked afterwards).
 *
 * Environment: BENCH_DURATION_S (default 10, max 60), BENCH_CONNECTIONS (default 8).
 * Not part of `npm test`: numbers depend on the machine, and wrangler dev is not production.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ensureDevVars, freePort, startLocalWorker } from '../scripts/dev.js';
import { type AutocannonResult, autocannon, seedAuthorizeTarget } from './local-authorize.js';

const DURATION_S = Math.min(60, Math.max(1, Number(process.env.BENCH_DURATION_S ?? 10)));
const CONNECTIONS = Math.min(64, Math.max(1, Number(process.env.BENCH_CONNECTIONS ?? 8)));

async function main(): Promise<void> {
  const adminToken = ensureDevVars();
  const port = await freePort();
  const state = mkdtempSync(path.join(os.tmpdir(), 'writ-bench-'));
  console.log(`starting wrangler dev on 127.0.0.1:${port} (state in ${state}) ...`);
  const worker = await startLocalWorker({ port, persistTo: state, inheritOutput: false, logLevel: 'error' });
  try {
    const { agent, body } = await seedAuthorizeTarget(worker.baseUrl, adminToken);

    const common = { connections: CONNECTIONS, duration: DURATION_S };
    console.log(`warming up, then ${DURATION_S} s per route with ${CONNECTIONS} connections ...`);
    await autocannon({ ...common, duration: 2, url: `${worker.baseUrl}/v1/healthz` });
    const trivial = await autocannon({ ...common, url: `${worker.baseUrl}/v1/healthz` });
    const authz = await autocannon({
      ...common,
      url: `${worker.baseUrl}/v1/authorize`,
      method: 'POST',
      headers: agent,
      body,
    });

    const row = (name: string, r: AutocannonResult) =>
      [
        name.padEnd(22),
        r.requests.average.toFixed(0).padStart(8),
        r.latency.p50.toFixed(1).padStart(9),
        r.latency.p99.toFixed(1).padStart(9),
        String(r.requests.total).padStart(9),
        String(r.non2xx + r.errors + r.timeouts).padStart(8),
      ].join('  ');
    console.log('');
    console.log(
      `wrangler dev (local), ${CONNECTIONS} connections, ${DURATION_S} s per route, ${os.cpus().length} cores`,
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
    const codes = Object.entries(authz.statusCodeStats)
      .map(([code, v]) => `${code}: ${v.count}`)
      .join(', ');
    console.log(`\nauthorize status codes: ${codes}`);
    if (authz.non2xx > 0 || authz.errors > 0) process.exitCode = 1;
  } finally {
    await worker.stop();
    rmSync(state, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
