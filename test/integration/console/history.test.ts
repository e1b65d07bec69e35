/**
 * The console's history (issue 14): each decided approval with the receipts it led to
 * (authorized, executed, verified or indeterminate, reconciled), newest decision first, keyset
 * pages both ways and a bounded count, through the approvals service and the console route. The
 * operation and receipts are joined in the tenant's store, only the tenant's own.
 */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import type { Seeded } from '../../../scripts/seed.js';
import type { Role } from '../../../src/core/identity/identity.js';
import { operationsPort, tenantStore } from '../../../src/platform/bindings.js';
import { approvalHistory } from '../../../src/services/approvals.js';
import type { TenantContext } from '../../../src/services/context.js';
import { ServiceError } from '../../../src/services/errors.js';
import { encodeCursor } from '../../../src/services/pagination.js';
import {
  type Authorized,
  authorizedRollback,
  claim,
  observe,
  reconcile,
  report,
} from '../executions/helpers.js';
import {
  ROLLBACK_INPUT,
  call,
  consoleAs,
  seedTenant,
  shardOf,
  tenantD1,
  tenantRef,
} from '../platform/harness.js';

function ctx(s: Seeded, roles: Role[] = ['approver'], principal_id = s.approver.principal_id): TenantContext {
  return {
    caller: { principal_id, tenant_id: s.tenant_id, roles, executor_release: null },
    store: tenantStore(env, tenantRef(s)),
    operations: operationsPort(env, shardOf(s)),
    shard: shardOf(s),
    now: Date.now(),
    log: () => {},
  };
}

/** A tenant with the four histories: executed and verified, reconciled, denied, approved unused. */
async function histories(s: Seeded) {
  // 1. Approved, authorized, executed: the executor reports a verified success.
  const ok = await authorizedRollback(s);
  const c1 = await claim(s, ok.sha256);
  expect(c1.status).toBe(200);
  const r1 = await report(s, c1.body.operation_id, c1.body.fencing_token, observe(ok.receipt, 'succeeded'));
  expect(r1.body.status).toBe('verified_succeeded');
  // 2. Approved, authorized, indeterminate, then reconciled by a tenant admin (the demo owner).
  const unsure = await authorizedRollback(s, { ...ROLLBACK_INPUT, to_version: 'v40' });
  const c2 = await claim(s, unsure.sha256);
  const r2 = await report(
    s,
    c2.body.operation_id,
    c2.body.fencing_token,
    observe(unsure.receipt, 'indeterminate'),
  );
  expect(r2.body.status).toBe('indeterminate');
  const pendingRecon = await approvalHistory(ctx(s), {});
  const before = pendingRecon.items.find((i) => i.approval_id === unsure.receipt.body.approval_id);
  expect(before?.led_to).toMatchObject({
    operation: { status: 'reconciliation_required' },
    execution: { sha256: r2.body.execution_receipt.sha256, outcome: 'indeterminate' },
    reconciliation: null,
  });
  const rec = await reconcile(s, c2.body.operation_id, observe(unsure.receipt, 'succeeded'), s.admin.api_key);
  expect(rec.status).toBe(201);
  // 3. Denied: it led to nothing.
  const req = await call('POST', '/v1/approval-requests', {
    key: s.agent.api_key,
    body: {
      tool_contract_sha256: s.rollback_contract_sha256,
      input: { ...ROLLBACK_INPUT, to_version: 'v39' },
    },
  });
  const denied = req.body.approval_id as string;
  expect(
    (
      await call('POST', `/v1/approval-requests/${denied}/deny`, {
        key: s.approver.api_key,
        body: { reason: 'no' },
      })
    ).status,
  ).toBe(200);
  return {
    ok,
    okExecution: r1.body.execution_receipt.sha256 as string,
    unsure,
    unsureExecution: r2.body.execution_receipt.sha256 as string,
    reconciliation: rec.body.reconciliation_receipt.sha256 as string,
    denied,
  };
}

const approvalOf = (a: Authorized) => a.receipt.body.approval_id as string;

describe('console history: decided approvals and the receipts they led to', () => {
  it('joins authorization, execution and reconciliation receipts through the service', async () => {
    const s = await seedTenant('hist');
    const h = await histories(s);
    const page = await approvalHistory(ctx(s), {});
    expect(page.total).toBe(3);
    expect(page.total_capped).toBe(false);
    const row = (id: string) => page.items.find((i) => i.approval_id === id);
    expect(row(approvalOf(h.ok))?.led_to).toEqual({
      authorization_receipt_sha256: h.ok.sha256,
      operation: expect.objectContaining({ status: 'succeeded' }),
      execution: { sha256: h.okExecution, outcome: 'verified_succeeded' },
      reconciliation: null,
    });
    expect(row(approvalOf(h.unsure))?.led_to).toEqual({
      authorization_receipt_sha256: h.unsure.sha256,
      operation: expect.objectContaining({ status: 'reconciled_succeeded' }),
      execution: { sha256: h.unsureExecution, outcome: 'indeterminate' },
      reconciliation: { sha256: h.reconciliation, resolution: 'verified_succeeded' },
    });
    expect(row(h.denied)?.led_to).toEqual({
      authorization_receipt_sha256: null,
      operation: null,
      execution: null,
      reconciliation: null,
    });
    // The operation index keeps the reconciliation receipt's digest (migrations/0009).
    const stored = await tenantD1(s)
      .prepare(
        'SELECT reconciliation_receipt_sha256 AS r FROM operations WHERE tenant_id = ? AND authorization_receipt_sha256 = ?',
      )
      .bind(s.tenant_id, h.unsure.sha256)
      .first<{ r: string }>();
    expect(stored?.r).toBe(h.reconciliation);
    // An operation reconciled before migration 0009 had no digest: the migration's back-fill finds
    // it from the stored reconciliation receipt, and leaves every other operation alone.
    const d1 = tenantD1(s);
    await d1
      .prepare('UPDATE operations SET reconciliation_receipt_sha256 = NULL WHERE tenant_id = ?')
      .bind(s.tenant_id)
      .run();
    const migration = env.TEST_MIGRATIONS.find((m) => m.name.startsWith('0009_'));
    const backfill = migration?.queries.find((q) => q.includes('UPDATE `operations`'));
    expect(backfill).toBeDefined();
    await d1.prepare(backfill as string).run();
    const filled = await d1
      .prepare(
        'SELECT authorization_receipt_sha256 AS a, reconciliation_receipt_sha256 AS r FROM operations WHERE tenant_id = ? ORDER BY a',
      )
      .bind(s.tenant_id)
      .all<{ a: string; r: string | null }>();
    expect(filled.results).toEqual(
      [
        { a: h.ok.sha256, r: null },
        { a: h.unsure.sha256, r: h.reconciliation },
      ].sort((x, y) => (x.a < y.a ? -1 : 1)),
    );

    // Newest decision first, ties by id, descending: a total order.
    const order = [...page.items].sort(
      (x, y) =>
        (y.decided_at_unix_ms ?? 0) - (x.decided_at_unix_ms ?? 0) || (y.approval_id < x.approval_id ? -1 : 1),
    );
    expect(page.items.map((i) => i.approval_id)).toEqual(order.map((i) => i.approval_id));
    // One outcome at a time, same order.
    const used = await approvalHistory(ctx(s), { status: 'consumed' });
    expect(used.total).toBe(2);
    expect(used.items.map((i) => i.approval_id)).toEqual(
      order.filter((i) => i.status === 'consumed').map((i) => i.approval_id),
    );
  });

  it('pages newest first by keyset both ways: next, previous, and back to the first', async () => {
    const s = await seedTenant('hist');
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const req = await call('POST', '/v1/approval-requests', {
        key: s.agent.api_key,
        body: {
          tool_contract_sha256: s.rollback_contract_sha256,
          input: { ...ROLLBACK_INPUT, to_version: `v${i}` },
        },
      });
      ids.push(req.body.approval_id as string);
      await call('POST', `/v1/approval-requests/${req.body.approval_id}/deny`, {
        key: s.approver.api_key,
        body: { reason: 'no' },
      });
    }
    const all = await approvalHistory(ctx(s), { limit: 5 });
    const expected = all.items.map((i) => i.approval_id);
    expect(new Set(expected)).toEqual(new Set(ids));
    expect([all.next_cursor, all.previous_cursor]).toEqual([null, null]);

    const p1 = await approvalHistory(ctx(s), { limit: 2 });
    expect(p1.items.map((i) => i.approval_id)).toEqual(expected.slice(0, 2));
    expect(p1.previous_cursor).toBeNull();
    const p2 = await approvalHistory(ctx(s), { limit: 2, cursor: p1.next_cursor ?? '' });
    expect(p2.items.map((i) => i.approval_id)).toEqual(expected.slice(2, 4));
    const p3 = await approvalHistory(ctx(s), { limit: 2, cursor: p2.next_cursor ?? '' });
    expect(p3.items.map((i) => i.approval_id)).toEqual(expected.slice(4));
    expect(p3.next_cursor).toBeNull();
    // Back: the previous page of p3 is p2, and p2's previous is the first page (no previous).
    const back2 = await approvalHistory(ctx(s), { limit: 2, cursor: p3.previous_cursor ?? '' });
    expect(back2.items.map((i) => i.approval_id)).toEqual(expected.slice(2, 4));
    expect(back2.next_cursor).not.toBeNull();
    const back1 = await approvalHistory(ctx(s), { limit: 2, cursor: back2.previous_cursor ?? '' });
    expect(back1.items.map((i) => i.approval_id)).toEqual(expected.slice(0, 2));
    expect(back1.previous_cursor).toBeNull();
    const fwd = await approvalHistory(ctx(s), { limit: 2, cursor: back1.next_cursor ?? '' });
    expect(fwd.items.map((i) => i.approval_id)).toEqual(expected.slice(2, 4));
  });

  it('refuses a foreign, forged or other-filter cursor, and callers without the role', async () => {
    const s = await seedTenant('hist');
    const refused = async (f: () => Promise<unknown>, reason: string) => {
      const e = await f().then(
        () => null,
        (x: unknown) => x,
      );
      expect(e).toBeInstanceOf(ServiceError);
      expect((e as ServiceError).reason).toBe(reason);
    };
    // A cursor of the pending list, of another filter, or of an unknown direction.
    await refused(
      () => approvalHistory(ctx(s), { cursor: encodeCursor(['approvals', 'denied', 1, 'apr-x']) }),
      'invalid_request',
    );
    await refused(
      () =>
        approvalHistory(ctx(s), {
          status: 'denied',
          cursor: encodeCursor(['history', 'consumed', 'older', 1, 'apr-x']),
        }),
      'invalid_request',
    );
    await refused(
      () => approvalHistory(ctx(s), { cursor: encodeCursor(['history', '', 'sideways', 1, 'apr-x']) }),
      'invalid_request',
    );
    await refused(() => approvalHistory(ctx(s, ['agent'], s.agent.principal_id), {}), 'forbidden_role');
    await refused(() => approvalHistory(ctx(s, ['executor'], s.executor.principal_id), {}), 'forbidden_role');
    // The route: an unknown filter and a forged cursor are a 400 page, never a list.
    const get = await consoleAs(s.approver.api_key);
    expect((await get('/console/history?status=pending')).status).toBe(400);
    expect((await get('/console/history?status=expired')).status).toBe(400);
    expect((await get('/console/history?cursor=bm90LWEtY3Vyc29y')).status).toBe(400);
    const other = encodeCursor(['history', 'denied', 'newer', 1, 'apr-x']);
    expect((await get(`/console/history?status=consumed&cursor=${other}`)).status).toBe(400);
    expect((await get(`/console/history?status=denied&cursor=${other}`)).status).toBe(200);
  });

  it('counts decided approvals through the store, bounded by the cap', async () => {
    const s = await seedTenant('hist');
    for (let i = 0; i < 3; i++) {
      const req = await call('POST', '/v1/approval-requests', {
        key: s.agent.api_key,
        body: {
          tool_contract_sha256: s.rollback_contract_sha256,
          input: { ...ROLLBACK_INPUT, to_version: `v${i}` },
        },
      });
      await call('POST', `/v1/approval-requests/${req.body.approval_id}/deny`, {
        key: s.approver.api_key,
        body: { reason: 'no' },
      });
    }
    // A pending request is not counted.
    await call('POST', '/v1/approval-requests', {
      key: s.agent.api_key,
      body: { tool_contract_sha256: s.rollback_contract_sha256, input: ROLLBACK_INPUT },
    });
    const store = tenantStore(env, tenantRef(s));
    const q = { status: undefined, from: null, limit: 1 } as const;
    expect((await store.approvalHistory({ ...q, count_cap: 10 })).total).toBe(3);
    // The count stops one past the cap (the service shows "more than").
    expect((await store.approvalHistory({ ...q, count_cap: 1 })).total).toBe(2);
    expect((await store.approvalHistory({ ...q, status: 'consumed', count_cap: 10 })).total).toBe(0);
  });

  it("never shows another tenant's operation or receipt, even one naming this tenant's receipt", async () => {
    const s = await seedTenant('hist');
    const other = await seedTenant('hist');
    // Authorized, not yet claimed: no operation of this tenant names its receipt.
    const a = await authorizedRollback(s);
    // Another tenant's operation and execution receipt, forged into this tenant's shard under the
    // same authorization digest: a join that forgot the tenant would show them.
    const foreignExec = 'e'.repeat(64);
    await tenantD1(s)
      .prepare(
        `INSERT INTO operations (operation_id, tenant_id, tool_contract_sha256, idempotency_key, input_sha256, state,
 authorization_receipt_sha256, execution_receipt_sha256, updated_at_unix_ms, reconciliation_receipt_sha256)
 VALUES (?, ?, ?, ?, ?, 'reconciled_succeeded', ?, ?, 1, ?)`,
      )
      .bind(
        'f'.repeat(64),
        other.tenant_id,
        s.rollback_contract_sha256,
        'foreign-key',
        'a'.repeat(64),
        a.sha256,
        foreignExec,
        'd'.repeat(64),
      )
      .run();
    const page = await approvalHistory(ctx(s), {});
    const row = page.items.find((i) => i.approval_id === approvalOf(a));
    expect(row?.led_to).toEqual({
      authorization_receipt_sha256: a.sha256,
      operation: null,
      execution: null,
      reconciliation: null,
    });
    const get = await consoleAs(s.approver.api_key);
    const html = (await get('/console/history')).text;
    expect(html).toContain('Not executed yet');
    expect(html).not.toContain(foreignExec.slice(0, 12));
    expect(html).not.toContain('d'.repeat(12));
    // And the other tenant's approver sees none of this tenant's history.
    const theirs = await approvalHistory(ctx(other, ['approver'], other.approver.principal_id), {});
    expect(theirs.items.map((i) => i.approval_id)).not.toContain(approvalOf(a));
    expect(theirs.total).toBe(0);
  });

  it('the page shows each outcome in plain words with receipt and bundle links', async () => {
    const s = await seedTenant('hist');
    const h = await histories(s);
    const get = await consoleAs(s.approver.api_key);
    const page = await get('/console/history');
    expect(page.status).toBe(200);
    const t = page.text;
    expect(t).toContain('3 decided approvals.');
    expect(t).toContain('Executed: success, verified');
    expect(t).toContain('Executed: outcome unknown (indeterminate)');
    expect(t).toContain('Reconciled: the effect happened (success, verified)');
    expect(t).toContain('Nothing: no call was authorized.');
    for (const sha of [h.ok.sha256, h.okExecution, h.unsure.sha256, h.unsureExecution, h.reconciliation]) {
      expect(t).toContain(`href="/console/receipts/${sha}"`);
      expect(t).toContain(`href="/console/receipts/${sha}/bundle" download`);
    }
    // Row headers and column headers; no script, inline style or handler.
    expect(t).toContain('<th scope="row">');
    expect(t).toContain('<th scope="col">What it led to</th>');
    expect(t).not.toMatch(/<script|\son[a-z]+=|\sstyle=/i);
    // The linked execution receipt and its bundle are served to the approver.
    expect((await get(`/console/receipts/${h.okExecution}`)).text).toContain('verified_succeeded');
    expect((await get(`/console/receipts/${h.reconciliation}/bundle`)).status).toBe(200);
    // One outcome per tab, with its own count.
    const used = await get('/console/history?status=consumed');
    expect(used.text).toContain('2 decided approvals (approved and used).');
    expect(used.text).not.toContain(h.denied);
    expect(used.text).toContain('href="/console/history?status=consumed" aria-current="page"');
  });
});
