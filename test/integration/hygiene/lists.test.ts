/**
 * Issue 9, finding 4: every list is cursor-paginated (`limit` 1-100, opaque strict `cursor`,
 * `next_cursor`); pending approval requests expire by the policy's `approval_request_ttl_ms`
 * (a status derived at read, enforced at approve and deny).
 */
import { describe, expect, it } from 'vitest';
import type { Seeded } from '../../../scripts/seed.js';
import { DEMO_POLICY } from '../../../scripts/seed.js';
import { POLICY_V1_DEFAULTS } from '../../../src/core/policy.js';
import { approve, deny, getApproval, listApprovals } from '../../../src/services/approvals.js';
import { listOperations } from '../../../src/services/executions.js';
import { encodeCursor } from '../../../src/services/pagination.js';
import { call, d1Of, ROLLBACK_INPUT, seedTenant, type Json, contextAt } from '../platform/harness.js';

async function requestApproval(s: Seeded, n = 0): Promise<Json> {
  const r = await call('POST', '/v1/approval-requests', {
    key: s.agent.api_key,
    body: {
      tool_contract_sha256: s.rollback_contract_sha256,
      input: { ...ROLLBACK_INPUT, to_version: `v${n}` },
    },
  });
  expect(r.status).toBe(201);
  return r.body;
}

const ids = (items: readonly { approval_id: string }[]) => items.map((i) => i.approval_id);

describe('GET /v1/approval-requests is cursor-paginated', () => {
  it('pages of `limit` in creation order, each request once, next_cursor null at the end', async () => {
    const s = await seedTenant('pg');
    const made: { approval_id: string; created_at_unix_ms: number }[] = [];
    for (let i = 0; i < 5; i++) made.push(await requestApproval(s, i));
    // Requests made in the same millisecond are ordered by id.
    made.sort(
      (x, y) => x.created_at_unix_ms - y.created_at_unix_ms || (x.approval_id < y.approval_id ? -1 : 1),
    );
    const seen: string[] = [];
    let cursor: string | null = null;
    const sizes: number[] = [];
    do {
      const q: string = cursor === null ? '' : `&cursor=${cursor}`;
      const r = await call('GET', `/v1/approval-requests?limit=2${q}`, { key: s.approver.api_key });
      expect(r.status).toBe(200);
      sizes.push(r.body.items.length);
      seen.push(...ids(r.body.items));
      cursor = r.body.next_cursor;
    } while (cursor !== null);
    expect(sizes).toEqual([2, 2, 1]);
    expect(seen).toEqual(ids(made));
  });

  it('refuses forged, altered, foreign and out-of-range cursors and limits', async () => {
    const s = await seedTenant('pg');
    for (let i = 0; i < 2; i++) await requestApproval(s, i);
    const first = await call('GET', '/v1/approval-requests?limit=1', { key: s.approver.api_key });
    const good = first.body.next_cursor as string;
    expect(good).toMatch(/^[A-Za-z0-9_-]+$/);
    const bad = [
      'not-a-cursor',
      `${good}=`,
      `${good}A`,
      encodeCursor(['approvals', 'approved', 0, 'x']), // issued for another status
      encodeCursor(['operations', '', 0, 'x']), // another list's cursor
      encodeCursor(['approvals', 'pending', -1, 'x']),
      encodeCursor(['approvals', 'pending', 0, 'x', 'extra']),
      'x'.repeat(600),
    ];
    for (const c of bad) {
      const r = await call('GET', `/v1/approval-requests?cursor=${encodeURIComponent(c)}`, {
        key: s.approver.api_key,
      });
      expect(r.status, c).toBe(400);
      expect(r.body.error.code).toBe('invalid_request');
      expect(r.body.error.issues[0].path).toMatch(/cursor/);
    }
    for (const limit of ['0', '101', '-1', '1.5', 'ten']) {
      const r = await call('GET', `/v1/approval-requests?limit=${limit}`, { key: s.approver.api_key });
      expect(r.status, limit).toBe(400);
    }
  });

  it("another tenant's cursor is only a position: it never shows the other tenant's rows", async () => {
    const a = await seedTenant('pga');
    const b = await seedTenant('pgb');
    const aIds = [(await requestApproval(a, 1)).approval_id, (await requestApproval(a, 2)).approval_id];
    const bId = (await requestApproval(b, 1)).approval_id;
    const aPage = await call('GET', '/v1/approval-requests?limit=1', { key: a.approver.api_key });
    // Positioned before everything: B gets its own rows, and only those.
    const early = encodeCursor(['approvals', 'pending', 0, '0']);
    for (const c of [aPage.body.next_cursor as string, early]) {
      const r = await call('GET', `/v1/approval-requests?cursor=${c}`, { key: b.approver.api_key });
      expect(r.status).toBe(200);
      for (const id of ids(r.body.items)) expect(aIds).not.toContain(id);
    }
    const r = await call('GET', `/v1/approval-requests?cursor=${early}`, { key: b.approver.api_key });
    expect(ids(r.body.items)).toEqual([bId]);
  });
});

describe('pending approval requests expire by policy', () => {
  it('at the default TTL: shown expired, left out of pending, listed as expired, not decidable', async () => {
    const s = await seedTenant('ex');
    const req = await requestApproval(s);
    const ttl = POLICY_V1_DEFAULTS.approval_request_ttl_ms;
    const created = req.created_at_unix_ms as number;
    expect(req.request_expires_at_unix_ms).toBe(created + ttl);
    const approver = (now: number) => contextAt(s, s.approver.principal_id, ['approver'], now);

    expect((await getApproval(approver(created + ttl - 1), req.approval_id)).status).toBe('pending');
    expect((await getApproval(approver(created + ttl), req.approval_id)).status).toBe('expired');
    const pending = await listApprovals(approver(created + ttl), { status: 'pending' });
    expect(ids(pending.items)).not.toContain(req.approval_id);
    const expired = await listApprovals(approver(created + ttl), { status: 'expired' });
    expect(ids(expired.items)).toEqual([req.approval_id]);
    expect(expired.items[0]?.status).toBe('expired');

    for (const decide of [
      () => approve(approver(created + ttl), req.approval_id, {}),
      () => deny(approver(created + ttl), req.approval_id, {}),
    ]) {
      await expect(decide()).rejects.toMatchObject({
        reason: 'conflict',
        message: expect.stringContaining('expired'),
      });
    }
    // Nothing was written: still pending (and decidable) one millisecond earlier.
    const ok = await approve(approver(created + ttl - 1), req.approval_id, {});
    expect(ok.status).toBe('approved');
    expect(ok.request_expires_at_unix_ms).toBeNull();
  });

  it("the policy's approval_request_ttl_ms decides", async () => {
    const s = await seedTenant('ex');
    const put = await call('PUT', '/v1/policy', {
      key: s.admin.api_key,
      body: { ...DEMO_POLICY, approval_request_ttl_ms: 60_000 },
    });
    expect(put.status).toBe(200);
    const req = await requestApproval(s);
    const created = req.created_at_unix_ms as number;
    expect(req.request_expires_at_unix_ms).toBe(created + 60_000);
    const approver = (now: number) => contextAt(s, s.approver.principal_id, ['approver'], now);
    await expect(approve(approver(created + 60_000), req.approval_id, {})).rejects.toMatchObject({
      reason: 'conflict',
    });
    expect((await approve(approver(created + 59_999), req.approval_id, {})).status).toBe('approved');
  });
});

describe('GET /v1/operations is cursor-paginated', () => {
  it('newest first across ties, each operation once, scoped to the tenant', async () => {
    const s = await seedTenant('op');
    const other = await seedTenant('op');
    const insert = async (tenant_id: string, id: string, updated: number) =>
      (await d1Of(tenant_id))
        .prepare(
          `INSERT INTO operations (operation_id, tenant_id, tool_contract_sha256, idempotency_key, input_sha256,
           state, authorization_receipt_sha256, updated_at_unix_ms) VALUES (?, ?, ?, ?, ?, 'succeeded', ?, ?)`,
        )
        .bind(id, tenant_id, 'a'.repeat(64), `key-${id}`, 'b'.repeat(64), 'c'.repeat(64), updated)
        .run();
    const mine = ['op-1', 'op-2', 'op-3', 'op-4', 'op-5'].map((x) => `${x}-${s.tenant_id}`);
    // Two pairs share an update time: the id breaks the tie.
    const times = [1000, 2000, 2000, 3000, 3000];
    for (const [i, id] of mine.entries()) await insert(s.tenant_id, id, times[i] as number);
    await insert(other.tenant_id, `op-x-${other.tenant_id}`, 2500);
    const ctx = contextAt(s, s.admin.principal_id, ['tenant_admin'], Date.now());
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let pages = 0; pages < 10; pages++) {
      const r = await listOperations(ctx, { limit: 2, ...(cursor === undefined ? {} : { cursor }) });
      seen.push(...r.operations.map((o) => o.operation_id));
      if (r.next_cursor === null) break;
      cursor = r.next_cursor;
    }
    expect(seen).toEqual([mine[4], mine[3], mine[2], mine[1], mine[0]]);
    const http = await call('GET', '/v1/operations?limit=101', { key: s.admin.api_key });
    expect(http.status).toBe(400);
    const forged = await call(
      'GET',
      `/v1/operations?cursor=${encodeCursor(['operations', 'failed', 0, 'x'])}`,
      {
        key: s.admin.api_key,
      },
    );
    expect(forged.status).toBe(400);
  });
});
