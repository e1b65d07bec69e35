/**
 * Issue 10, "reads near the agent, writes once": round trips per request, the D1 bookmark
 * header, and what a stale replica read can and cannot do.
 *
 * Requests go through the Worker's own handler with routed D1 bindings (test/support/d1-routing.ts)
 * that count each round trip as D1 would route it (primary or replica) and, for the stale-read
 * tests, answer replica reads from a snapshot of the database taken before the change under test.
 * Tenants are spread over two D1 shards (docs/scaling.md, "Shards"): every shard's binding is
 * routed and counted, and the stale snapshot is of the shard the tenant lives on.
 */
import { applyD1Migrations, createExecutionContext, waitOnExecutionContext } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { beforeAll, describe, expect, it } from 'vitest';
import { DEMO_POLICY, ROLLBACK_CONTRACT, type Seeded } from '../../../scripts/seed.js';
import worker from '../../../src/worker.js';
import { MAX_BOOKMARK_HEADER_LENGTH } from '../../../src/db/client.js';
import { allShards } from '../../../src/platform/shards.js';
import { API_KEY_BYTES, formatApiKey } from '../../../src/core/identity/identity.js';
import {
  type TripCounts,
  counting,
  dropTriggers,
  snapshotDatabase,
  withRoutedShards,
} from '../../support/d1-routing.js';
import { authorizedRollback, observe } from '../executions/helpers.js';
import { rawOutput } from './observation-helpers.js';
import {
  BASE,
  type Reply,
  approvedApproval,
  authorizeBody,
  call,
  createRun,
  doorReads,
  READ_INPUT,
  ROLLBACK_INPUT,
  seedTenant,
  shardOf,
  shardOfKey,
  tenantD1,
  uniqueName,
} from '../platform/harness.js';

const SLOW_MS = 60_000;
const D1_BOOKMARK = '[0-9a-f]{8}-[0-9a-f]{8}-[0-9a-f]{8}-[0-9a-f]{32}';
/** A response's bookmark names its shard: `<shard>:<d1 bookmark>` (one shard per tenant request). */
const BOOKMARK = new RegExp(`^(0|[1-9][0-9]*):${D1_BOOKMARK}$`);

interface Sent extends Reply {
  readonly trips: TripCounts;
}

/** The stale snapshot standing in for a lagging replica of shard `n` (vitest.config.ts). */
function staleReplicaOf(n: number): D1Database {
  const d1 = [env.DB_STALE_REPLICA, env.DB_STALE_REPLICA_1][n];
  if (d1 === undefined) throw new Error(`no stale replica database for shard ${n}`);
  return d1;
}

/** One request through the Worker's handler, its D1 bindings routed (and counted) as D1 would. */
async function send(
  method: string,
  path: string,
  key: string,
  body?: unknown,
  o: { headers?: Record<string, string>; replicas?: boolean; stale?: boolean } = {},
): Promise<Sent> {
  const trips: TripCounts = { primary: 0, replica: 0, stale: 0 };
  // Every shard is routed into one count: a tenant request touches only the shard its key names,
  // so a round trip to another shard would show here. The stale snapshot is the key's shard's.
  const shard = shardOfKey(key);
  const routed = withRoutedShards(env, allShards(env), (n) => ({
    onRoundTrip: counting(trips),
    ...(o.replicas === undefined ? {} : { replicas: o.replicas }),
    ...(o.stale === true && n === shard ? { staleReplica: staleReplicaOf(n) } : {}),
  }));
  const headers: Record<string, string> = { authorization: `Bearer ${key}`, ...o.headers };
  const init: RequestInit = { method, headers };
  if (body !== undefined) {
    headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const ctx = createExecutionContext();
  const res = await worker.fetch(new Request(`${BASE}${path}`, init), routed, ctx);
  await waitOnExecutionContext(ctx);
  const text = await res.text();
  return { status: res.status, body: text.length > 0 ? JSON.parse(text) : null, headers: res.headers, trips };
}

const OK_BOOKMARK = '0000007b-0000b26e-00001538-0c3e87bb37b3db5cc52eedb93cd3b96b';

const readBody = (s: Seeded, run_id: string) => ({
  tool_contract_sha256: s.read_contract_sha256,
  input: READ_INPUT,
  run_id,
});

describe('round trips per request', { timeout: SLOW_MS }, () => {
  it('authorize: one replica read and one primary commit, allowed or denied', async () => {
    const s = await seedTenant('rt');
    const run = await createRun(s);
    const allow = await send('POST', '/v1/authorize', s.agent.api_key, readBody(s, run));
    expect(allow.status).toBe(200);
    expect(allow.trips).toEqual({ primary: 1, replica: 1, stale: 0 });
    // A write without approval: a stored denial, the same two round trips.
    const deny = await send('POST', '/v1/authorize', s.agent.api_key, authorizeBody(s, run));
    expect(deny.status).toBe(403);
    expect(deny.trips).toEqual({ primary: 1, replica: 1, stale: 0 });
    // With an approval, consumed in the commit batch: still one primary round trip.
    const approval_id = await approvedApproval(s);
    const approved = await send(
      'POST',
      '/v1/authorize',
      s.agent.api_key,
      authorizeBody(s, run, { approval_id }),
    );
    expect(approved.status).toBe(200);
    expect(approved.trips).toEqual({ primary: 1, replica: 1, stale: 0 });
  });

  it('authorize with read replication disabled: every round trip is a primary one', async () => {
    const s = await seedTenant('rt');
    const run = await createRun(s);
    const r = await send('POST', '/v1/authorize', s.agent.api_key, readBody(s, run), { replicas: false });
    expect(r.status).toBe(200);
    expect(r.trips).toEqual({ primary: 2, replica: 0, stale: 0 });
  });

  it('claim, report and observation: the key lookup at the primary, then reads near the caller', async () => {
    const s = await seedTenant('rt');
    const a = await authorizedRollback(s);
    const c = await send('POST', '/v1/executions/claim', s.executor.api_key, {
      authorization_receipt_sha256: a.sha256,
    });
    expect(c.status).toBe(200);
    const r = await send('POST', '/v1/executions/report', s.executor.api_key, {
      operation_id: c.body.operation_id,
      fencing_token: c.body.fencing_token,
      observation: observe(a.receipt, 'succeeded'),
    });
    expect(r.status).toBe(200);
    const o = await send('POST', '/v1/observations', s.executor.api_key, {
      kind: 'output',
      observation: rawOutput(s, { authorization: a.receipt, execution: r.body.execution_receipt }),
    });
    expect(o.status).toBe(201);
    expect({ claim: c.trips, report: r.trips, observation: o.trips }).toEqual(EXECUTION_TRIPS);
  });
});

const allowed = (door: string, r: Sent): boolean =>
  door === 'mcp'
    ? r.body.decision === 'allow'
    : door === 'authzen'
      ? r.body.decision === true
      : r.body === null;

describe('the standard doors cost what /v1/authorize costs', { timeout: SLOW_MS }, () => {
  it('MCP, AuthZEN and Docker: one replica read (key, tool pins, state) and one primary commit', async () => {
    const s = await seedTenant('rt');
    const run = await createRun(s);
    const v1 = await send('POST', '/v1/authorize', s.agent.api_key, readBody(s, run));
    expect(v1.status).toBe(200);
    for (const [door, d] of Object.entries(doorReads(s, run))) {
      const r = await send('POST', d.path, s.agent.api_key, d.body);
      expect([door, r.status, allowed(door, r)]).toEqual([door, 200, true]);
      expect([door, r.trips]).toEqual([door, v1.trips]);
    }
  });

  it("AuthZEN's batch: the key near the caller, then each evaluation's reads near it and one commit", async () => {
    const s = await seedTenant('rt');
    const run = await createRun(s);
    const v1 = await send('POST', '/v1/authorize', s.agent.api_key, readBody(s, run));
    expect(v1.status).toBe(200);
    const item = doorReads(s, run).authzen.body;
    const r = await send('POST', '/access/v1/evaluations', s.agent.api_key, {
      evaluations: [item, item],
    });
    expect(r.status).toBe(200);
    expect(r.body.evaluations.map((e: { decision: boolean }) => e.decision)).toEqual([true, true]);
    // Measured, then pinned: the key lookup near the caller, then per evaluation two reads near
    // the caller (the tool's binding, then the state: the key is known) and one primary commit.
    expect(r.trips).toEqual({ primary: 2 * v1.trips.primary, replica: 1 + 2 * 2, stale: 0 });
  });

  it("Docker's after: the key lookup near the caller, nothing at the primary", async () => {
    const s = await seedTenant('rt');
    const r = await send('POST', '/docker-mcp/v1/after', s.agent.api_key, {
      content: [{ type: 'text', text: 'deployment api/production is healthy' }],
    });
    expect([r.status, r.body]).toEqual([200, null]);
    expect(r.trips).toEqual({ primary: 0, replica: 1, stale: 0 });
  });

  it('an unknown tool name: one more read, at the primary, before it is refused; nothing written', async () => {
    const s = await seedTenant('rt');
    const run = await createRun(s);
    const r = await send('POST', '/mcp/v1/authorize', s.agent.api_key, {
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'no_such_tool', arguments: {}, _meta: { 'dev.writ/run_id': run } },
    });
    expect(r.body.decision).toBe('deny');
    expect(r.body.jsonrpc_error.error.data.writ_error.code).toBe('not_found');
    expect(r.trips).toEqual({ primary: 1, replica: 1, stale: 0 });
    // AuthZEN's batch the same: the key and the name near the caller, the name again at the
    // primary, then the item's refusal (no receipt, nothing written).
    const b = await send('POST', '/access/v1/evaluations', s.agent.api_key, {
      evaluations: [{ ...doorReads(s, run).authzen.body, action: { name: 'no_such_tool' } }],
    });
    expect([b.status, b.body.evaluations[0].decision, b.body.evaluations[0].context.error.code]).toEqual([
      200,
      false,
      'not_found',
    ]);
    expect(b.trips).toEqual({ primary: 1, replica: 2, stale: 0 });
  });
});

// Measured, then pinned: a change that adds a round trip to these paths fails here.
const EXECUTION_TRIPS: Record<'claim' | 'report' | 'observation', TripCounts> = {
  claim: { primary: 1, replica: 2, stale: 0 },
  report: { primary: 1, replica: 3, stale: 0 },
  observation: { primary: 2, replica: 5, stale: 0 },
};

describe('Writ-D1-Bookmark', { timeout: SLOW_MS }, () => {
  it('every response that touched D1 carries the session bookmark; sent back, it is accepted', async () => {
    const s = await seedTenant('bm');
    const run = await createRun(s);
    const a = await send('POST', '/v1/authorize', s.agent.api_key, readBody(s, run));
    const bookmark = a.headers.get('writ-d1-bookmark');
    expect(bookmark).toMatch(BOOKMARK);
    const g = await send('GET', `/v1/runs/${run}`, s.agent.api_key, undefined, {
      headers: { 'writ-d1-bookmark': bookmark ?? '' },
    });
    expect(g.status).toBe(200);
    expect(g.body.calls_used).toBe(1);
    expect(g.headers.get('writ-d1-bookmark')).toMatch(BOOKMARK);
    // GET reads near the caller: the key lookup and the run are replica reads.
    expect(g.trips.primary).toBe(0);
  });

  it('a request refused as unauthenticated gets no bookmark of the shard its key names', async () => {
    const s = await seedTenant('bm');
    for (const shard of [0, 1]) {
      const stranger = formatApiKey(crypto.getRandomValues(new Uint8Array(API_KEY_BYTES)), shard);
      const run = await createRun(s);
      for (const [method, path, body] of [
        ['GET', `/v1/runs/${run}`, undefined],
        ['POST', '/v1/authorize', readBody(s, run)],
      ] as const) {
        const r = await send(method, path, stranger, body);
        expect([shard, method, r.status]).toEqual([shard, method, 401]);
        // The key lookup did touch the shard: the header is left out, not absent for lack of a session.
        expect(r.trips.primary + r.trips.replica).toBeGreaterThan(0);
        expect(r.headers.get('writ-d1-bookmark')).toBeNull();
      }
    }
  });

  it('a malformed bookmark is a 400 invalid_request before storage is touched, and nothing is written', async () => {
    const s = await seedTenant('bm');
    const bad = [
      'x'.repeat(MAX_BOOKMARK_HEADER_LENGTH + 1),
      '0'.repeat(MAX_BOOKMARK_HEADER_LENGTH + 1),
      // Qualified, but: a shard twice, a shard number beyond any, a leading zero, too many parts.
      `0:${OK_BOOKMARK},0:${OK_BOOKMARK}`,
      `1000:${OK_BOOKMARK}`,
      `01:${OK_BOOKMARK}`,
      Array.from({ length: 9 }, (_, i) => `${i}:${OK_BOOKMARK}`).join(','),
      `0:${OK_BOOKMARK},`,
      `0:${OK_BOOKMARK}, 1:${OK_BOOKMARK}`,
      'garbage',
      '00000000-00000003-00000000-0000000000000000000000000000000G',
      '00000000-00000003-00000000',
      "00000000-00000003-00000000-00000000000000000000000000000000'; --",
      '',
    ];
    for (const value of bad) {
      const r = await send(
        'POST',
        '/v1/runs',
        s.agent.api_key,
        { max_calls: 1, max_external_writes: 0, max_duration_ms: 60_000 },
        {
          headers: { 'writ-d1-bookmark': value },
        },
      );
      expect([value, r.status, r.body.error.code]).toEqual([value, 400, 'invalid_request']);
      expect(r.trips).toEqual({ primary: 0, replica: 0, stale: 0 });
    }
  });
});

/**
 * The race tests of test/integration/platform/storage.test.ts, with the read deliberately stale:
 * the snapshot the replica serves is taken before the change, so the request decides from state
 * that no longer holds. The commit's guards run at the primary, so the change still wins.
 */
describe('a stale replica read never outruns a change committed at the primary', { timeout: SLOW_MS }, () => {
  beforeAll(async () => {
    for (const n of allShards(env)) {
      await applyD1Migrations(staleReplicaOf(n), env.TEST_MIGRATIONS);
      await dropTriggers(staleReplicaOf(n));
    }
  });

  /** The tenant's shard as it is now, copied into that shard's stale replica. */
  const snapshot = (s: Seeded) => snapshotDatabase(tenantD1(s), staleReplicaOf(shardOf(s)));
  const stale = (s: Seeded, body: unknown) =>
    send('POST', '/v1/authorize', s.agent.api_key, body, { stale: true });
  /** A tenant with a tool pinned at the primary after the stale replica's snapshot. */
  async function pinnedAfterSnapshot() {
    const s = await seedTenant('st');
    const run = await createRun(s);
    await snapshot(s);
    const tool_name = uniqueName('late_tool');
    const pinned = await call('POST', '/v1/contracts', {
      key: s.admin.api_key,
      body: { ...ROLLBACK_CONTRACT, tool_name },
    });
    expect(pinned.status).toBe(201);
    return { s, run, tool_name, tool_contract_sha256: pinned.body.tool_contract_sha256 as string };
  }

  /** A tenant whose approval the stale replica still shows approved, consumed since at the primary. */
  async function consumedAfterSnapshot() {
    const s = await seedTenant('st');
    const run = await createRun(s);
    const approval_id = await approvedApproval(s);
    await snapshot(s);
    const used = await call('POST', '/v1/authorize', {
      key: s.agent.api_key,
      body: authorizeBody(s, run, { approval_id }),
    });
    expect(used.status).toBe(200);
    return { s, run, approval_id };
  }

  it('a consumed approval', async () => {
    const { s, run, approval_id } = await consumedAfterSnapshot();
    const r = await stale(s, authorizeBody(s, run, { approval_id }));
    expect(r.trips.stale).toBe(1);
    expect(r.status).toBe(403);
    expect(r.body.violations).toEqual(['approval_unusable']);
  });

  it('a spent run budget', async () => {
    const s = await seedTenant('st');
    const run = await createRun(s, { max_calls: 1 });
    await snapshot(s);
    expect(
      (await call('POST', '/v1/authorize', { key: s.agent.api_key, body: readBody(s, run) })).status,
    ).toBe(200);
    const r = await stale(s, readBody(s, run));
    expect(r.trips.stale).toBe(1);
    expect(r.status).toBe(403);
    expect(r.body.violations).toContain('run_call_budget_spent');
  });

  it('a revoked grant', async () => {
    const s = await seedTenant('st');
    const run = await createRun(s);
    await snapshot(s);
    expect((await call('POST', `/v1/grants/${s.grant_id}/revoke`, { key: s.admin.api_key })).status).toBe(
      200,
    );
    const r = await stale(s, readBody(s, run));
    expect(r.trips.stale).toBe(1);
    expect(r.status).toBe(403);
    expect(r.body.receipt.body.decision).toBe('denied');
  });

  it('a quarantined contract', async () => {
    const s = await seedTenant('st');
    const run = await createRun(s);
    await snapshot(s);
    await call('POST', `/v1/contracts/${s.read_contract_sha256}/quarantine`, { key: s.admin.api_key });
    const r = await stale(s, readBody(s, run));
    expect(r.trips.stale).toBe(1);
    expect(r.status).toBe(403);
    expect(r.body.receipt.body.decision).toBe('denied');
  });

  it('a tool pinned after the replica read: a door re-reads the binding at the primary', async () => {
    const { s, run, tool_name, tool_contract_sha256 } = await pinnedAfterSnapshot();
    const r = await send(
      'POST',
      '/mcp/v1/authorize',
      s.agent.api_key,
      {
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: tool_name, arguments: ROLLBACK_INPUT, _meta: { 'dev.writ/run_id': run } },
      },
      { stale: true },
    );
    // Unknown at the stale replica, found at the primary: decided and receipted (no grant covers
    // it), never refused as an unknown tool.
    expect(r.trips.stale).toBe(1);
    expect(r.body.decision).toBe('deny');
    expect(r.body.receipt.body.decision).toBe('denied');
    expect(r.body.receipt.body.tool_contract_sha256).toBe(tool_contract_sha256);
  });

  it('a revoked agent: never authorized', async () => {
    const s = await seedTenant('st');
    const run = await createRun(s);
    await snapshot(s);
    await call('POST', `/v1/principals/${s.agent.principal_id}/revoke`, { key: s.admin.api_key });
    const r = await stale(s, readBody(s, run));
    expect(r.trips.stale).toBe(1);
    expect([401, 403]).toContain(r.status);
    expect(r.body.receipt?.body.decision ?? 'no receipt').not.toBe('authorized');
  });

  it("a revoked agent: never authorized by AuthZEN's batch either", async () => {
    const s = await seedTenant('st');
    const run = await createRun(s);
    await snapshot(s);
    await call('POST', `/v1/principals/${s.agent.principal_id}/revoke`, { key: s.admin.api_key });
    const item = doorReads(s, run).authzen.body;
    const r = await send(
      'POST',
      '/access/v1/evaluations',
      s.agent.api_key,
      { evaluations: [item, item] },
      {
        stale: true,
      },
    );
    expect(r.trips.stale).toBeGreaterThanOrEqual(1);
    if (r.status === 200) {
      expect(r.body.evaluations.map((e: { decision: boolean }) => e.decision)).toEqual([false, false]);
    } else expect([401, 403]).toContain(r.status);
  });

  /** AuthZEN's batch of `items`, every read it can serve near the caller from the stale snapshot. */
  const staleBatch = (s: Seeded, items: unknown[], evaluations_semantic?: string) =>
    send(
      'POST',
      '/access/v1/evaluations',
      s.agent.api_key,
      {
        evaluations: items,
        ...(evaluations_semantic === undefined ? {} : { options: { evaluations_semantic } }),
      },
      { stale: true },
    );
  const decisions = (r: Sent) => r.body.evaluations.map((e: { decision: boolean }) => e.decision);
  const receiptsOf = (r: Sent) =>
    r.body.evaluations.map((e: { context: { receipt?: { body: { decision: string } } } }) =>
      e.context.receipt === undefined ? 'no receipt' : e.context.receipt.body.decision,
    );
  const rollbackItem = (s: Seeded, run_id: string, approval_id: string) => ({
    ...doorReads(s, run_id).authzen.body,
    action: { name: 'execute_rollback' },
    resource: { type: 'deployment', id: 'production/api' },
    context: { input: ROLLBACK_INPUT, run_id, idempotency_key: `rollback-${uniqueName('k')}`, approval_id },
  });

  it("AuthZEN's batch, a quarantined contract: denied under every evaluation semantic", async () => {
    const s = await seedTenant('st');
    const run = await createRun(s);
    await snapshot(s);
    await call('POST', `/v1/contracts/${s.read_contract_sha256}/quarantine`, { key: s.admin.api_key });
    const item = doorReads(s, run).authzen.body;
    for (const [semantic, expected] of [
      [undefined, [false, false]],
      ['execute_all', [false, false]],
      ['deny_on_first_deny', [false]],
      ['permit_on_first_permit', [false, false]],
    ] as const) {
      const r = await staleBatch(s, [item, item], semantic);
      expect(r.trips.stale).toBeGreaterThanOrEqual(1);
      expect([semantic, r.status, decisions(r)]).toEqual([semantic, 200, expected]);
      expect(receiptsOf(r)).toEqual(expected.map(() => 'denied'));
    }
  });

  it("AuthZEN's batch, a revoked grant: every evaluation denied", async () => {
    const s = await seedTenant('st');
    const run = await createRun(s);
    await snapshot(s);
    expect((await call('POST', `/v1/grants/${s.grant_id}/revoke`, { key: s.admin.api_key })).status).toBe(
      200,
    );
    const item = doorReads(s, run).authzen.body;
    const r = await staleBatch(s, [item, item], 'permit_on_first_permit');
    expect(r.trips.stale).toBeGreaterThanOrEqual(1);
    expect([r.status, decisions(r), receiptsOf(r)]).toEqual([200, [false, false], ['denied', 'denied']]);
  });

  it("AuthZEN's batch, a spent run budget: denied; within a batch, one call per budgeted call", async () => {
    const s = await seedTenant('st');
    const spent = await createRun(s, { max_calls: 1 });
    const fresh = await createRun(s, { max_calls: 1 });
    await snapshot(s);
    expect(
      (await call('POST', '/v1/authorize', { key: s.agent.api_key, body: readBody(s, spent) })).status,
    ).toBe(200);
    const r = await staleBatch(s, [doorReads(s, spent).authzen.body], 'permit_on_first_permit');
    // One item of a batch of one is still a batch (`evaluations` present and non-empty).
    expect(r.trips.stale).toBeGreaterThanOrEqual(1);
    expect([r.status, decisions(r)]).toEqual([200, [false]]);
    expect(r.body.evaluations[0].context.violations).toContain('run_call_budget_spent');
    // A run the replica shows unspent, spent by the batch's own first evaluation.
    const item = doorReads(s, fresh).authzen.body;
    const b = await staleBatch(s, [item, item, item]);
    expect([b.status, decisions(b), receiptsOf(b)]).toEqual([
      200,
      [true, false, false],
      ['authorized', 'denied', 'denied'],
    ]);
    const runRow = await call('GET', `/v1/runs/${fresh}`, { key: s.agent.api_key });
    expect(runRow.body.calls_used).toBe(1);
  });

  it("AuthZEN's batch, a consumed approval: never used twice", async () => {
    const { s, run, approval_id } = await consumedAfterSnapshot();
    const r = await staleBatch(s, [rollbackItem(s, run, approval_id), rollbackItem(s, run, approval_id)]);
    expect(r.trips.stale).toBeGreaterThanOrEqual(1);
    expect([r.status, decisions(r), receiptsOf(r)]).toEqual([200, [false, false], ['denied', 'denied']]);
    expect(r.body.evaluations[0].context.violations).toEqual(['approval_unusable']);
  });

  it("AuthZEN's batch, an approval the replica shows approved: consumed once, by one evaluation", async () => {
    const s = await seedTenant('st');
    const run = await createRun(s);
    const approval_id = await approvedApproval(s);
    await snapshot(s);
    const r = await staleBatch(s, [rollbackItem(s, run, approval_id), rollbackItem(s, run, approval_id)]);
    expect([r.status, decisions(r), receiptsOf(r)]).toEqual([200, [true, false], ['authorized', 'denied']]);
    expect(r.body.evaluations[1].context.violations).toEqual(['approval_unusable']);
  });

  it("AuthZEN's batch, a changed policy: decided under the policy in force", async () => {
    const s = await seedTenant('st');
    const run = await createRun(s);
    await snapshot(s);
    const put = await call('PUT', '/v1/policy', {
      key: s.admin.api_key,
      body: { ...DEMO_POLICY, approval_required_effects: ['external_write', 'irreversible', 'read_only'] },
    });
    expect(put.status).toBe(200);
    const item = doorReads(s, run).authzen.body;
    const r = await staleBatch(s, [item, item]);
    expect(r.trips.stale).toBeGreaterThanOrEqual(1);
    expect([r.status, decisions(r)]).toEqual([200, [false, false]]);
    for (const e of r.body.evaluations)
      expect(e.context.receipt.body.policy_sha256).toBe(put.body.policy_sha256);
  });

  it("AuthZEN's batch, a tool pinned after the replica read: the binding is re-read at the primary", async () => {
    const { s, run, tool_name, tool_contract_sha256 } = await pinnedAfterSnapshot();
    const item = {
      ...doorReads(s, run).authzen.body,
      action: { name: tool_name },
      context: { input: ROLLBACK_INPUT, run_id: run, idempotency_key: `rollback-${uniqueName('k')}` },
    };
    const r = await staleBatch(s, [item, item]);
    // Unknown at the stale replica, found at the primary: decided and receipted (no grant covers
    // it), never refused as an unknown tool.
    expect(r.trips.stale).toBeGreaterThanOrEqual(1);
    expect([r.status, decisions(r), receiptsOf(r)]).toEqual([200, [false, false], ['denied', 'denied']]);
    expect(r.body.evaluations[0].context.receipt.body.tool_contract_sha256).toBe(tool_contract_sha256);
  });

  it('a revoked approver', async () => {
    const s = await seedTenant('st');
    const run = await createRun(s);
    const approval_id = await approvedApproval(s);
    await snapshot(s);
    await call('POST', `/v1/principals/${s.approver.principal_id}/revoke`, { key: s.admin.api_key });
    const r = await stale(s, authorizeBody(s, run, { approval_id }));
    expect(r.trips.stale).toBe(1);
    expect(r.status).toBe(403);
    expect(r.body.violations).toEqual(['approval_unusable']);
  });

  it('a changed policy: the decision is taken under the policy in force', async () => {
    const s = await seedTenant('st');
    const run = await createRun(s);
    await snapshot(s);
    const put = await call('PUT', '/v1/policy', {
      key: s.admin.api_key,
      body: { ...DEMO_POLICY, approval_required_effects: ['external_write', 'irreversible', 'read_only'] },
    });
    expect(put.status).toBe(200);
    const r = await stale(s, readBody(s, run));
    expect(r.trips.stale).toBe(1);
    expect(r.status).toBe(403);
    expect(r.body.receipt.body.policy_sha256).toBe(put.body.policy_sha256);
  });

  it('what the replica has not seen yet is read at the primary: a new key, run and approval', async () => {
    const s = await seedTenant('st');
    await snapshot(s);
    // Created after the snapshot: the replica knows none of them.
    const run = await createRun(s);
    const approval_id = await approvedApproval(s);
    const agent = await call('POST', '/v1/principals', {
      key: s.admin.api_key,
      body: { name: uniqueName('agent'), roles: ['agent'] },
    });
    expect(agent.status).toBe(201);
    const r = await stale(s, authorizeBody(s, run, { approval_id }));
    expect(r.trips.stale).toBe(1);
    expect(r.status).toBe(200);
    // A key created a moment ago authenticates (its lookup falls back to the primary).
    const k = await send('POST', '/v1/authorize', agent.body.api_key, readBody(s, run), { stale: true });
    expect(k.status).toBe(403); // its own run is another principal's: run_unknown, a stored denial
    expect(k.body.violations).toContain('run_unknown');
  });
});

/**
 * Bookmarks across shards: a D1 bookmark is a position in one database. A client may hold one of
 * shard A (another tenant's response, or its own tenant's before a move) and send it on a request
 * that reads shard B. The harness serves a session started from a bookmark B never issued like an
 * unconstrained one, from B's stale snapshot, as D1 gives no freshness for it; the Worker must
 * never start B's session from it, and reads at B's primary instead.
 */
describe('a bookmark from another shard never makes a stale read', { timeout: SLOW_MS }, () => {
  beforeAll(async () => {
    for (const n of allShards(env)) {
      await applyD1Migrations(staleReplicaOf(n), env.TEST_MIGRATIONS);
      await dropTriggers(staleReplicaOf(n));
    }
  });

  /** Two tenants on two different shards (placement alternates to the emptier shard). */
  async function onTwoShards(): Promise<[Seeded, Seeded]> {
    const a = await seedTenant('xa');
    for (let i = 0; i < 6; i++) {
      const b = await seedTenant('xb');
      if (shardOf(b) !== shardOf(a)) return [a, b];
    }
    throw new Error('no tenant landed on the other shard');
  }

  it('falls back to the primary for a foreign or an unqualified bookmark; its own shard reads near', async () => {
    const [a, b] = await onTwoShards();
    // A's bookmark, as a client of both tenants (or of A before a move to B's shard) holds it.
    const fromA = await send('GET', '/v1/policy', a.admin.api_key);
    const aHeader = fromA.headers.get('writ-d1-bookmark') ?? '';
    expect(aHeader).toMatch(BOOKMARK);
    expect(aHeader.startsWith(`${shardOf(a)}:`)).toBe(true);
    const aBare = aHeader.slice(aHeader.indexOf(':') + 1);

    // B's replica lags: it has not seen the run created next.
    await snapshotDatabase(tenantD1(b), staleReplicaOf(shardOf(b)));
    const created = await send(
      'POST',
      '/v1/runs',
      b.agent.api_key,
      { max_calls: 1, max_external_writes: 0, max_duration_ms: 60_000 },
      { stale: true },
    );
    expect(created.status).toBe(201);
    const run = created.body.run_id as string;
    const bHeader = created.headers.get('writ-d1-bookmark') ?? '';
    expect(bHeader.startsWith(`${shardOf(b)}:`)).toBe(true);

    const read = (bookmark: string | null) =>
      send('GET', `/v1/runs/${run}`, b.agent.api_key, undefined, {
        stale: true,
        ...(bookmark === null ? {} : { headers: { 'writ-d1-bookmark': bookmark } }),
      });
    // The control: no bookmark is an unconstrained session, and the lagging replica misses the run.
    const unconstrained = await read(null);
    expect(unconstrained.trips.stale).toBeGreaterThan(0);
    expect(unconstrained.status).toBe(404);
    // Shard A's bookmark, qualified (or bare, as before bookmarks named their shard): B's session
    // starts at the primary, the run is found, nothing comes from the stale snapshot.
    for (const bookmark of [aHeader, aBare]) {
      const r = await read(bookmark);
      expect([bookmark, r.status, r.trips.stale]).toEqual([bookmark, 200, 0]);
      expect(r.trips.primary).toBeGreaterThan(0);
    }
    // B's own bookmark (alone, or beside A's) starts B's session from it: fresh, near the caller.
    for (const bookmark of [bHeader, [aHeader, bHeader].sort().join(',')]) {
      const r = await read(bookmark);
      expect([bookmark, r.status, r.trips.stale, r.trips.primary]).toEqual([bookmark, 200, 0, 0]);
    }
  });
});
