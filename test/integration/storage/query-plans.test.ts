/**
 * Issue 9, "lookups that grow with history": every query a request path runs uses an index or a
 * primary key. Each store method on a request path is called against real D1 with a query log,
 * and `EXPLAIN QUERY PLAN` of every logged statement must show no full-table `SCAN`.
 */
import { env } from 'cloudflare:workers';
import { drizzle } from 'drizzle-orm/d1';
import { describe, expect, it } from 'vitest';
import { type AuthorizeRequest, decideAuthorization } from '../../../src/core/authorization/decide.js';
import { apiKeyDigest } from '../../../src/core/identity/identity.js';
import { newId } from '../../../src/db/ids.js';
import { d1PlatformStore } from '../../../src/db/platform-store.js';
import * as schema from '../../../src/db/schema.js';
import { d1TenantStore } from '../../../src/db/tenant-store.js';
import { receiptHooks } from '../../../src/platform/bindings.js';
import {
  approvedApproval,
  authorize,
  authorizeBody,
  createRun,
  READ_INPUT,
  seedTenant,
  tenantD1,
  tenantRef,
} from '../platform/harness.js';

interface Logged {
  readonly sql: string;
  readonly params: unknown[];
  step: string;
}

/** The D1 binding, recording every statement drizzle prepares (batches included) with its parameters. */
function loggingDb(log: Logged[], d1: D1Database) {
  const recording = new Proxy(d1, {
    get(target, p) {
      if (p === 'prepare') {
        return (sql: string) => {
          const statement = target.prepare(sql);
          return new Proxy(statement, {
            get(st, q) {
              if (q === 'bind') {
                return (...params: unknown[]) => {
                  log.push({ sql, params, step: '' });
                  return st.bind(...params);
                };
              }
              const v: unknown = Reflect.get(st, q, st);
              return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(st) : v;
            },
          });
        };
      }
      const v: unknown = Reflect.get(target, p, target);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return drizzle(recording, { schema });
}

async function plan(q: Logged): Promise<string[]> {
  const r = await env.DB.prepare(`EXPLAIN QUERY PLAN ${q.sql}`)
    .bind(...q.params)
    .all<{ detail: string }>();
  return r.results.map((x) => x.detail);
}

describe('query plans of request paths', { timeout: 60_000 }, () => {
  it('use an index or primary key for every query, never a full-table scan', async () => {
    const s = await seedTenant('plans');
    const run = await createRun(s);
    const approval_id = await approvedApproval(s);
    const ok = await authorize(s, authorizeBody(s, run, { approval_id }));
    expect(ok.status).toBe(200);
    const receipt_sha = ok.body.receipt.sha256 as string;
    const grant_sha = ok.body.receipt.body.grant_sha256 as string;

    const log: Logged[] = [];
    const db = loggingDb(log, tenantD1(s));
    const store = d1TenantStore(db, s.tenant_id, receiptHooks(env, tenantRef(s)));
    const platform = d1PlatformStore(db);
    const now = Date.now();
    const covered: Record<string, number> = {};
    const step = async (name: string, f: () => Promise<unknown>) => {
      const before = log.length;
      await f();
      covered[name] = log.length - before;
      for (const q of log.slice(before)) q.step = name;
    };

    await step('authentication by key digest', () =>
      platform.principalByKeyDigest(apiKeyDigest(s.agent.api_key)),
    );
    await step('tenant name lookup', () => platform.tenantNameTaken(s.tenant_name));
    const body: AuthorizeRequest = {
      tool_contract_sha256: s.read_contract_sha256,
      input: READ_INPUT,
      run_id: run,
    };
    const state = await store.loadAuthorizationState(s.agent.principal_id, body);
    await step('loadAuthorizationState', () => store.loadAuthorizationState(s.agent.principal_id, body));
    await step('loadAuthorizationState (named grant and approval)', () =>
      store.loadAuthorizationState(s.agent.principal_id, { ...body, grant_id: s.grant_id, approval_id }),
    );
    const decided = decideAuthorization(body, state, { invocation_id: newId('invocation') }, now);
    if (!decided.ok) throw new Error(decided.error.message);
    await step('commitAuthorization (guards, run charge)', () =>
      store.commitAuthorization(decided.value, s.agent.principal_id, now),
    );
    // POST /v1/authorize: key and state in one batch, keyed by subqueries on the key digest.
    await step('authorizationByKey', () => platform.authorizationByKey(apiKeyDigest(s.agent.api_key), body));
    await step('authorizationByKey (named grant and approval)', () =>
      platform.authorizationByKey(apiKeyDigest(s.agent.api_key), {
        ...body,
        grant_id: s.grant_id,
        approval_id,
      }),
    );
    // The doors (issue 12): the same batch with the tool name's pins in place of one contract.
    const { tool_contract_sha256: _, ...unbound } = body;
    await step('namedToolAuthorizationByKey', () =>
      platform.namedToolAuthorizationByKey(apiKeyDigest(s.agent.api_key), 'get_deployment', unbound),
    );
    await step('contractsForTool', () => store.contractsForTool('get_deployment'));
    const again = decideAuthorization(body, state, { invocation_id: newId('invocation') }, now);
    if (!again.ok) throw new Error(again.error.message);
    await step('commitAuthorization (freshness guard)', () =>
      store.commitAuthorization(again.value, s.agent.principal_id, now, { request: body, state }),
    );
    // Named grant and approval (here a denial: the approval is for another contract).
    const named: AuthorizeRequest = { ...body, grant_id: s.grant_id, approval_id };
    const namedState = await store.loadAuthorizationState(s.agent.principal_id, named);
    const namedDecision = decideAuthorization(named, namedState, { invocation_id: newId('invocation') }, now);
    if (!namedDecision.ok) throw new Error(namedDecision.error.message);
    await step('commitAuthorization (freshness guard, named grant and approval)', () =>
      store.commitAuthorization(namedDecision.value, s.agent.principal_id, now, {
        request: named,
        state: namedState,
      }),
    );
    await step('loadDispatchState', () =>
      store.loadDispatchState({
        tool_contract_sha256: s.rollback_contract_sha256,
        policy_sha256: s.policy_sha256,
        grant_sha256: grant_sha,
        idempotency_key: null,
        approval_id,
        principal_id: s.agent.principal_id,
      }),
    );
    await step('getReceipt', () => store.getReceipt(receipt_sha));
    await step('grantByDigest', () => store.grantByDigest(grant_sha));
    await step('getOperation', () => store.getOperation('op-unknown'));
    await step('listOperations', () => store.listOperations({ status: undefined, after: null, limit: 10 }));
    await step('listOperations by state', () =>
      store.listOperations({ status: 'claimed', after: null, limit: 10 }),
    );
    await step('listOperations after a cursor', () =>
      store.listOperations({
        status: undefined,
        after: { updated_at_unix_ms: now, operation_id: 'f'.repeat(64) },
        limit: 10,
      }),
    );
    await step('listOperations by state after a cursor', () =>
      store.listOperations({
        status: 'settled',
        after: { updated_at_unix_ms: now, operation_id: 'f'.repeat(64) },
        limit: 10,
      }),
    );
    await step('listApprovals', () => store.listApprovals({ status: 'pending', after: null, limit: 10 }));
    await step('getApproval', () => store.getApproval(approval_id));
    // The console's history (issue 14): a page with its operations and execution receipts joined,
    // either way from a cursor, and the capped count (migrations/0009).
    const history = { status: undefined, from: null, limit: 26, count_cap: 10_000 } as const;
    await step('approvalHistory', () => store.approvalHistory(history));
    await step('approvalHistory of one outcome', () =>
      store.approvalHistory({ ...history, status: 'consumed' }),
    );
    await step('approvalHistory older than a cursor', () =>
      store.approvalHistory({
        ...history,
        from: { direction: 'older', decided_at_unix_ms: now, approval_id: 'apr-z' },
      }),
    );
    await step('approvalHistory of one outcome, newer than a cursor', () =>
      store.approvalHistory({
        ...history,
        status: 'denied',
        from: { direction: 'newer', decided_at_unix_ms: 0, approval_id: 'apr-0' },
      }),
    );
    // The approval view's open attempts of the same input, and GET /v1/metrics' counts.
    await step('openOperationsOfInput', () =>
      store.openOperationsOfInput('execute_rollback', 'a'.repeat(64), 6),
    );
    await step('securityCounts', () =>
      store.securityCounts({
        from: now - 86_400_000,
        to: now + 1,
        now,
        expired_before: now - 86_400_000,
        scan_cap: 100_000,
        denial_sample: 1_000,
      }),
    );
    await step('getRun', () => store.getRun(run));
    await step('getGrant', () => store.getGrant(s.grant_id));
    await step('getPrincipal', () => store.getPrincipal(s.agent.principal_id));
    await step('getContract', () => store.getContract(s.rollback_contract_sha256));
    await step('currentPolicy', () => store.currentPolicy());
    await step('policyByDigest', () => store.policyByDigest(s.policy_sha256));
    await step('observationRecords', () => store.observationRecords('observation', 'obs-1', 'a'.repeat(64)));
    await step('usage', () => store.usage(now));
    await step('countOpenRuns', () => store.countOpenRuns(s.agent.principal_id, now));
    await step('insertRun (conditional on the open-run count)', () =>
      store.insertRun(
        {
          run_id: newId('run'),
          principal_id: s.agent.principal_id,
          run_envelope_sha256: 'b'.repeat(64),
          envelope: '{}',
          max_calls: 1,
          max_external_writes: 0,
          deadline_unix_ms: now + 60_000,
          created_at_unix_ms: now,
        },
        32,
      ),
    );
    // Retention (issue 10): the scheduled run, not a request, but it must not scan a tenant's history.
    await step('expiredReceipts', () => store.expiredReceipts(now + 2 * 86_400_000, 10));
    await step('retentionWindows', () => platform.retentionWindows(s.tenant_id, 10));

    const scans: string[] = [];
    const indexesUsed = new Map<string, Set<string>>();
    const plans = new Map<string, string[]>();
    for (const q of log) {
      if (q.step === '') continue;
      for (const detail of await plan(q)) {
        plans.set(q.step, [...(plans.get(q.step) ?? []), detail]);
        const used = indexesUsed.get(q.step) ?? new Set<string>();
        for (const m of detail.matchAll(/USING (?:COVERING )?INDEX (\w+)/g)) used.add(m[1] ?? '');
        indexesUsed.set(q.step, used);
        // `SCAN <table>` without an index is a full-table scan; a covering-index scan says so.
        // (`SCAN capped` reads the history count's subquery: at most `count_cap + 1` rows, LIMIT;
        // the metrics' counts read theirs, `SCAN <name>` of a CO-ROUTINE, bounded alike.)
        const cappedSubquery =
          /^SCAN capped$/.test(detail) ||
          (q.step === 'securityCounts' &&
            /^SCAN (walked|authorizations|requested|decided|open_ops|overdue|quarantined)$/.test(detail));
        if (
          /^SCAN /.test(detail) &&
          !/USING (COVERING )?INDEX|CONSTANT ROW/.test(detail) &&
          !cappedSubquery
        ) {
          scans.push(`${q.step}: ${detail}`);
        }
        // An index searched on the tenant alone walks the tenant's whole history, unless it is
        // the page order itself (read `limit` rows, newest first: `operations_recent`).
        // (`tenants`, `tenant_quotas`, `tenant_imports` and `tenant_imports_unrecorded` are keyed
        // by the tenant: one row.)
        const tenantKeyed =
          /sqlite_autoindex_(tenants|tenant_quotas|tenant_imports|tenant_imports_unrecorded)_1/.test(detail);
        const pageOrder = /USING INDEX operations_recent /.test(detail);
        if (/\(tenant_id=\?\)$/.test(detail) && !tenantKeyed && !pageOrder) {
          scans.push(`${q.step}: ${detail}`);
        }
        // A sort of every matching row grows with history as a scan does. ("FOR LAST TERM OF
        // ORDER BY" sorts only rows tied on the indexed terms before it, in index order: bounded.)
        // (The metrics group their capped subqueries, at most `scan_cap + 1` rows each.)
        const boundedSort = q.step === 'securityCounts' && /^USE TEMP B-TREE FOR GROUP BY$/.test(detail);
        if (/USE TEMP B-TREE/.test(detail) && !/FOR LAST TERM OF ORDER BY/.test(detail) && !boundedSort) {
          scans.push(`${q.step}: ${detail}`);
        }
      }
    }
    // The lookups that used to grow with history go through their own indexes.
    const expectIndex = (step: string, index: string) =>
      expect([step, indexesUsed.get(step)?.has(index) ?? false]).toEqual([step, true]);
    expectIndex('observationRecords', 'receipts_observation_claim');
    expectIndex('observationRecords', 'receipts_observation_raw');
    expectIndex('loadAuthorizationState', 'grants_live');
    expectIndex('authorizationByKey', 'grants_live');
    expectIndex('loadDispatchState', 'grants_digest');
    expectIndex('grantByDigest', 'grants_digest');
    expectIndex('usage', 'runs_open');
    expectIndex('countOpenRuns', 'runs_principal_open');
    expectIndex('listOperations', 'operations_recent');
    expectIndex('listOperations by state', 'operations_state_recent');
    expectIndex('insertRun (conditional on the open-run count)', 'runs_principal_open');
    // The history's count walks an index from the tenant's first decided row: only a LIMIT
    // (`count_cap + 1`, bound as a parameter) keeps it bounded, so every such count must carry one.
    const counts = log.filter((q) => q.step.startsWith('approvalHistory') && /count\(/.test(q.sql));
    expect(counts.length).toBe(4);
    for (const q of counts) {
      expect(q.sql).toMatch(/limit \?\) "capped"$/);
      expect(q.params.at(-1)).toBe(10_001);
    }
    // The metrics: every count through its index, and every walk bounded by a LIMIT.
    for (const index of [
      'receipts_created',
      'receipts_kind',
      'approvals_status',
      'approvals_decided',
      'operations_state_recent',
      'operations_deadline',
      'contracts_quarantined',
    ])
      expectIndex('securityCounts', index);
    // An approval's same-input attempts seek the input's open rows (migrations/0017), in index
    // order: not a walk of every open operation of the tenant, and no sort (the check above).
    expectIndex('openOperationsOfInput', 'operations_open_input');
    expect(
      plans.get('openOperationsOfInput')?.some((d) => /\(tenant_id=\? AND input_sha256=\?\)/.test(d)),
    ).toBe(true);
    const metricsQueries = log.filter((q) => q.step === 'securityCounts');
    expect(metricsQueries.length).toBe(7);
    for (const q of metricsQueries) expect(q.sql).toMatch(/ limit \?\) "\w+"| limit \?$/);
    expectIndex('approvalHistory', 'approvals_decided');
    expectIndex('approvalHistory', 'operations_authorization');
    expectIndex('approvalHistory of one outcome', 'approvals_status_decided');
    expectIndex('approvalHistory older than a cursor', 'approvals_decided');
    expectIndex('approvalHistory of one outcome, newer than a cursor', 'approvals_status_decided');
    // A door binds a tool name to its pins through an index already in the order it reads them
    // (migration 0012): no search over the tenant's contracts, no sort.
    expectIndex('namedToolAuthorizationByKey', 'contracts_tool_name');
    expectIndex('contractsForTool', 'contracts_tool_name');
    expect(scans).toEqual([]);
    // Every step ran at least one query.
    for (const [name, n] of Object.entries(covered)) expect([name, n > 0]).toEqual([name, true]);
  });
});
