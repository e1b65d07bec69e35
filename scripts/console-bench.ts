/**
 * `npx tsx scripts/console-bench.ts`: how long the approval console's pending page takes with 10,000
 * requests in the queue.
 *
 * Starts `wrangler dev` (scripts/dev.ts) with a throwaway state directory, seeds a demo tenant,
 * files one approval request through the API, then stops the Worker and copies that row
 * `BENCH_QUEUE` times as pending, `BENCH_QUEUE` times as denied and `BENCH_QUEUE` times as
 * approved and used (each with an operation in the index, as a claimed and reported call leaves)
 * straight into the local D1 file (`wrangler d1 execute --local`: filing 10,000 requests through
 * the rate-limited API would take minutes), restarts, signs in to the console and times
 * sequential requests over loopback: the pending page (first, and page 500 through a cursor), one
 * request's review page, the history (first page, a deep page older and newer through cursors)
 * and the history of denied requests (first page and a deep one). Loopback wall time bounds the
 * server's time from above. Prints p50 / p99 / max in milliseconds.
 *
 * Environment: BENCH_QUEUE (default 10000), BENCH_REQUESTS (default 200 per page).
 * Not part of `npm test`: numbers depend on the machine, and wrangler dev is not production.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureDevVars, freePort, startLocalWorker } from './dev.js';
import { encodeCursor } from '../src/services/pagination.js';
import { seedDemo } from './seed.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const WRANGLER = path.join(ROOT, 'node_modules', '.bin', 'wrangler');
const QUEUE = Math.min(100_000, Math.max(2, Number(process.env.BENCH_QUEUE ?? 10_000)));
const REQUESTS = Math.min(5_000, Math.max(10, Number(process.env.BENCH_REQUESTS ?? 200)));

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

async function time(label: string, url: string, headers: Record<string, string>): Promise<string> {
  const ms: number[] = [];
  for (let i = 0; i < REQUESTS; i++) {
    const t0 = performance.now();
    const r = await fetch(url, { headers, redirect: 'manual' });
    await r.arrayBuffer();
    ms.push(performance.now() - t0);
    if (r.status !== 200) throw new Error(`${label} answered ${r.status}`);
  }
  ms.sort((a, b) => a - b);
  const f = (n: number) => n.toFixed(1).padStart(7);
  return `${label.padEnd(44)} ${f(percentile(ms, 50))} ${f(percentile(ms, 99))} ${f(ms.at(-1) as number)}`;
}

async function main(): Promise<void> {
  const adminToken = ensureDevVars();
  const port = await freePort();
  const state = mkdtempSync(path.join(os.tmpdir(), 'writ-console-bench-'));
  let worker = await startLocalWorker({ port, persistTo: state, inheritOutput: false, logLevel: 'error' });
  try {
    const s = await seedDemo({ baseUrl: worker.baseUrl, adminToken, fetch, now: Date.now(), name: 'bench' });
    const req = await fetch(`${worker.baseUrl}/v1/approval-requests`, {
      method: 'POST',
      headers: { authorization: `Bearer ${s.agent.api_key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        tool_contract_sha256: s.rollback_contract_sha256,
        input: { service: 'api', environment: 'production', from_version: 'v42', to_version: 'v41' },
      }),
    });
    if (req.status !== 201) throw new Error(`approval request answered ${req.status}`);
    const { approval_id } = (await req.json()) as { approval_id: string };
    if (!/^[a-z0-9-]+$/.test(approval_id)) throw new Error('unexpected approval id');
    await worker.stop();

    console.log(`filling the queue to ${QUEUE} pending, ${QUEUE} denied and ${QUEUE} used requests ...`);
    // The tenant's quotas are raised first (1,000 open approvals by default). Both lists hold
    // QUEUE rows: pending (the queue) and denied (the history).
    const cols = `approval_id, tenant_id, requester_principal_id, policy_sha256, tool_contract_sha256,
 input_sha256, input_bytes, input, target, effect, status, created_at_unix_ms, decided_by, decided_at_unix_ms`;
    const copy = (prefix: string, status: string, decided: string) =>
      `INSERT INTO approvals (${cols}) SELECT '${prefix}' || c.n, tenant_id, requester_principal_id, policy_sha256,
 tool_contract_sha256, input_sha256, input_bytes, input, target, effect, '${status}', created_at_unix_ms + c.n,
 ${decided} FROM approvals,
 (WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < ${QUEUE}) SELECT n FROM c) AS c
 WHERE approval_id = '${approval_id}'`;
    const sql = [
      `UPDATE tenant_quotas SET max_open_approvals = ${QUEUE * 3}, max_stored_bytes = 4294967296, max_receipts_per_day = 10000000`,
      copy('apr-bench-', 'pending', 'NULL, NULL'),
      copy('apr-bench-d-', 'denied', "'bench-approver', created_at_unix_ms + c.n"),
      // QUEUE more approved and used, decided after the denials (the newest history), each with
      // its authorization digest and an operation claimed under it that reports an execution
      // receipt: the history joins every row of its page to an operation and a receipt probe.
      copy('apr-bench-c-', 'consumed', `'bench-approver', created_at_unix_ms + ${QUEUE} + c.n`),
      `UPDATE approvals SET consumed_by_receipt_sha256 = printf('%064x', CAST(substr(approval_id, 13) AS INTEGER)),
 consumed_at_unix_ms = decided_at_unix_ms WHERE approval_id LIKE 'apr-bench-c-%'`,
      `INSERT INTO operations (operation_id, tenant_id, tool_contract_sha256, idempotency_key, input_sha256, state,
 authorization_receipt_sha256, execution_receipt_sha256, updated_at_unix_ms)
 SELECT printf('%064x', ${QUEUE * 10} + CAST(substr(approval_id, 13) AS INTEGER)), tenant_id, tool_contract_sha256,
 'bench-' || approval_id, input_sha256, 'succeeded', consumed_by_receipt_sha256,
 printf('%064x', ${QUEUE * 20} + CAST(substr(approval_id, 13) AS INTEGER)), decided_at_unix_ms
 FROM approvals WHERE approval_id LIKE 'apr-bench-c-%'`,
    ]
      .join('; ')
      .replaceAll('\n', '');
    const fill = spawnSync(
      WRANGLER,
      ['d1', 'execute', 'DB', '--local', '--persist-to', state, '--command', sql],
      { cwd: ROOT, env: { ...process.env, CI: 'true', WRANGLER_SEND_METRICS: 'false' }, encoding: 'utf8' },
    );
    if (fill.status !== 0) throw new Error(`filling the queue failed:\n${fill.stdout}\n${fill.stderr}`);

    worker = await startLocalWorker({ port, persistTo: state, inheritOutput: false, logLevel: 'error' });
    const base = worker.baseUrl;
    const form = await fetch(`${base}/console/sign-in`);
    const anon = /__Host-writ_console=([^;]+)/.exec(form.headers.get('set-cookie') ?? '')?.[1];
    const csrf = /name="csrf" value="([^"]+)"/.exec(await form.text())?.[1];
    if (anon === undefined || csrf === undefined) throw new Error('no sign-in form');
    const signIn = await fetch(`${base}/console/sign-in`, {
      method: 'POST',
      redirect: 'manual',
      headers: {
        cookie: `__Host-writ_console=${anon}`,
        origin: base,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: new URLSearchParams({ csrf, api_key: s.approver.api_key }).toString(),
    });
    const session = /__Host-writ_console=([^;]+)/.exec(signIn.headers.get('set-cookie') ?? '')?.[1];
    if (signIn.status !== 303 || session === undefined) throw new Error(`sign-in answered ${signIn.status}`);
    const headers = { cookie: `__Host-writ_console=${session}` };
    // A cursor deep in the queue (page 500 of 1,000), as the page's own links carry it.
    const seed = (await (
      await fetch(`${base}/v1/approval-requests/${approval_id}`, {
        headers: { authorization: `Bearer ${s.approver.api_key}` },
      })
    ).json()) as { created_at_unix_ms: number };
    const middle = Math.floor(QUEUE / 2);
    const deep = encodeCursor([
      'approvals',
      'pending',
      seed.created_at_unix_ms + middle,
      `apr-bench-${middle}`,
    ]);
    const deepDenied = encodeCursor([
      'history',
      'denied',
      'older',
      seed.created_at_unix_ms + middle,
      `apr-bench-d-${middle}`,
    ]);
    // The middle of the whole history (newest first: the used approvals' middle).
    const deepHistory = encodeCursor([
      'history',
      '',
      'older',
      seed.created_at_unix_ms + QUEUE + middle,
      `apr-bench-c-${middle}`,
    ]);
    const back = encodeCursor([
      'history',
      '',
      'newer',
      seed.created_at_unix_ms + QUEUE + middle,
      `apr-bench-c-${middle}`,
    ]);
    const check = await fetch(`${base}/console/pending?cursor=${deep}`, { headers });
    if (!(await check.text()).includes(`apr-bench-${middle + 1}`))
      throw new Error('the deep page is not where expected');
    const checkHistory = await (
      await fetch(`${base}/console/history?cursor=${deepHistory}`, { headers })
    ).text();
    if (
      !checkHistory.includes(`apr-bench-c-${middle - 1}`) ||
      !checkHistory.includes('Executed: success, verified')
    )
      throw new Error('the deep history page is not where expected');

    // Warm-up, then the measured runs.
    await time('warm-up', `${base}/console/pending`, headers);
    const lines = [
      await time('GET /console/pending', `${base}/console/pending`, headers),
      await time('GET /console/pending?cursor= (p. 500)', `${base}/console/pending?cursor=${deep}`, headers),
      await time('GET /console/approvals/:id', `${base}/console/approvals/${approval_id}`, headers),
      await time('GET /console/history', `${base}/console/history`, headers),
      await time(
        'GET /console/history?cursor= (older)',
        `${base}/console/history?cursor=${deepHistory}`,
        headers,
      ),
      await time('GET /console/history?cursor= (newer)', `${base}/console/history?cursor=${back}`, headers),
      await time('GET /console/history?status=denied', `${base}/console/history?status=denied`, headers),
      await time(
        'GET /console/history?status=denied&cursor=',
        `${base}/console/history?status=denied&cursor=${deepDenied}`,
        headers,
      ),
    ];
    console.log('');
    console.log(
      `wrangler dev (local D1), ${QUEUE} pending, ${QUEUE} denied and ${QUEUE} used (each with an operation) requests in the tenant (10 / 25 per page),`,
    );
    console.log(`${REQUESTS} sequential requests per route over loopback, ${os.cpus().length} cores`);
    console.log(
      `${'route'.padEnd(44)} ${'p50 ms'.padStart(7)} ${'p99 ms'.padStart(7)} ${'max ms'.padStart(7)}`,
    );
    for (const l of lines) console.log(l);
  } finally {
    await worker.stop();
    rmSync(state, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
