/**
 * `irreversible` effects need a second, distinct approver (issue 14): the first approval is
 * recorded and the request stays pending; a second approver who is neither the requester nor the
 * first approver completes it, and the approval binds both. Enforced by the approvals service
 * (so by the JSON API and the console alike), by triggers in the same write
 * (migrations/0007_console.sql), and by the authorization entry point.
 */
import { describe, expect, it } from 'vitest';
import { type Reply, call, createRun, ROLLBACK_INPUT, tenantD1, uniqueName } from '../platform/harness.js';
import { type Purge, purgeTenant } from './purge.js';

async function request(p: Purge, key = p.s.agent.api_key): Promise<string> {
  const r = await call('POST', '/v1/approval-requests', {
    key,
    body: { tool_contract_sha256: p.contract, input: ROLLBACK_INPUT },
  });
  expect(r.status).toBe(201);
  expect(r.body).toMatchObject({ approvals_required: 2, first_approved_by: null });
  return r.body.approval_id as string;
}

function approve(id: string, key: string, expires_in_ms?: number): Promise<Reply> {
  return call('POST', `/v1/approval-requests/${id}/approve`, {
    key,
    ...(expires_in_ms === undefined ? {} : { body: { expires_in_ms } }),
  });
}

async function authorizeWith(p: Purge, approval_id: string): Promise<Reply> {
  const run = await createRun(p.s);
  return call('POST', '/v1/authorize', {
    key: p.s.agent.api_key,
    body: {
      tool_contract_sha256: p.contract,
      input: ROLLBACK_INPUT,
      idempotency_key: `purge-${uniqueName('k')}`,
      run_id: run,
      grant_id: p.grant_id,
      approval_id,
    },
  });
}

/** The approval's row, read on the shard holding the tenant. */
async function row(p: Purge, id: string) {
  return tenantD1(p.s)
    .prepare(
      'SELECT status, decided_by, first_approved_by, first_approval_lifetime_ms, expires_at_unix_ms, decided_at_unix_ms FROM approvals WHERE approval_id = ?',
    )
    .bind(id)
    .first<{
      status: string;
      decided_by: string | null;
      first_approved_by: string | null;
      first_approval_lifetime_ms: number | null;
      expires_at_unix_ms: number | null;
      decided_at_unix_ms: number | null;
    }>();
}

describe('second approver for irreversible effects', () => {
  it('the first approval leaves the request pending; a second, distinct approver completes it', async () => {
    const p = await purgeTenant();
    const id = await request(p);

    const first = await approve(id, p.s.approver.api_key, 600_000);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({
      status: 'pending',
      approvals_required: 2,
      first_approved_by: p.s.approver.principal_id,
      decided_by: null,
      approval: null,
    });
    expect(first.body.first_approved_at_unix_ms).toEqual(expect.any(Number));

    // The authorize path refuses the call while only one approval exists.
    const early = await authorizeWith(p, id);
    expect(early.status).toBe(403);
    expect(early.body.violations).toEqual(['approval_unusable']);

    const done = await approve(id, p.second.api_key, 300_000);
    expect(done.status).toBe(200);
    expect(done.body.status).toBe('approved');
    // The approval binds both approvers; it lives the shorter of the two chosen lifetimes.
    expect(done.body.approval).toMatchObject({
      approver_principal_id: p.second.principal_id,
      first_approver_principal_id: p.s.approver.principal_id,
      effect: 'irreversible',
    });
    const stored = await row(p, id);
    expect(stored?.first_approval_lifetime_ms).toBe(600_000);
    expect((stored?.expires_at_unix_ms ?? 0) - (stored?.decided_at_unix_ms ?? 0)).toBe(300_000);

    const z = await authorizeWith(p, id);
    expect(z.status).toBe(200);
    expect(z.body.receipt.body.decision).toBe('authorized');
    expect(z.body.receipt.body.approval_id).toBe(id);
  });

  it('the same approver twice is refused, and nothing changes', async () => {
    const p = await purgeTenant();
    const id = await request(p);
    expect((await approve(id, p.s.approver.api_key)).status).toBe(200);
    const again = await approve(id, p.s.approver.api_key);
    expect(again.status).toBe(403);
    expect(again.body.error.code).toBe('self_approval');
    expect(again.body.error.message).toContain('second, distinct approver');
    expect(await row(p, id)).toMatchObject({
      status: 'pending',
      decided_by: null,
      first_approved_by: p.s.approver.principal_id,
    });
    // The first approver may still deny (changing their mind is not a second review).
    const d = await call('POST', `/v1/approval-requests/${id}/deny`, {
      key: p.s.approver.api_key,
      body: { reason: 'second thoughts' },
    });
    expect(d.status).toBe(200);
    expect(d.body.status).toBe('denied');
    expect((await authorizeWith(p, id)).body.violations).toEqual(['approval_unusable']);
  });

  it('the requester is refused as first and as second approver', async () => {
    const p = await purgeTenant();
    const both = await call('POST', '/v1/principals', {
      key: p.s.admin.api_key,
      body: { name: 'both', roles: ['agent', 'approver'] },
    });
    const id = await request(p, both.body.api_key);
    const asFirst = await approve(id, both.body.api_key);
    expect(asFirst.status).toBe(403);
    expect(asFirst.body.error.code).toBe('self_approval');
    expect((await approve(id, p.s.approver.api_key)).status).toBe(200);
    const asSecond = await approve(id, both.body.api_key);
    expect(asSecond.status).toBe(403);
    expect(asSecond.body.error.code).toBe('self_approval');
    expect((await row(p, id))?.status).toBe('pending');
  });

  it('an effect that is not irreversible still needs one approver', async () => {
    const p = await purgeTenant();
    const r = await call('POST', '/v1/approval-requests', {
      key: p.s.agent.api_key,
      body: { tool_contract_sha256: p.s.rollback_contract_sha256, input: ROLLBACK_INPUT },
    });
    expect(r.body.approvals_required).toBe(1);
    const ok = await approve(r.body.approval_id, p.s.approver.api_key);
    expect(ok.body.status).toBe('approved');
    // A single approval is byte for byte what it always was: no first approver in it.
    expect(Object.keys(ok.body.approval)).not.toContain('first_approver_principal_id');
  });

  it('approvers racing leave one first approver and at most one completion, never the same person twice', async () => {
    const p = await purgeTenant();
    const third = await call('POST', '/v1/principals', {
      key: p.s.admin.api_key,
      body: { name: 'third-approver', roles: ['approver'] },
    });
    const keys = [p.s.approver.api_key, p.second.api_key, third.body.api_key as string];
    for (let round = 0; round < 4; round++) {
      const id = await request(p);
      // Each approver twice, all at once.
      const replies = await Promise.all([...keys, ...keys].map((k) => approve(id, k)));
      const statuses = replies.map((r) => r.status);
      expect(statuses.every((x) => x === 200 || x === 403 || x === 409)).toBe(true);
      const r = await row(p, id);
      expect(r?.first_approved_by).not.toBeNull();
      if (r?.status === 'approved') {
        expect(r.decided_by).not.toBe(r.first_approved_by);
        // One first approval and one completion succeeded; everything else was refused.
        expect(statuses.filter((x) => x === 200)).toHaveLength(2);
      } else {
        expect(r?.status).toBe('pending');
        expect(r?.decided_by).toBeNull();
        expect(statuses.filter((x) => x === 200)).toHaveLength(1);
      }
    }
  });

  it('the database refuses what the service would: the guard is in the same write', async () => {
    const p = await purgeTenant();
    const id = await request(p);
    const now = Date.now();
    // Approving an irreversible request with no first approval.
    await expect(
      tenantD1(p.s)
        .prepare(
          "UPDATE approvals SET status = 'approved', decided_by = ?, decided_at_unix_ms = ?, expires_at_unix_ms = ? WHERE approval_id = ?",
        )
        .bind(p.s.approver.principal_id, now, now + 60_000, id)
        .run(),
    ).rejects.toThrow(/approval_second_approver/);
    // The requester as first approver.
    await expect(
      tenantD1(p.s)
        .prepare('UPDATE approvals SET first_approved_by = ? WHERE approval_id = ?')
        .bind(p.s.agent.principal_id, id)
        .run(),
    ).rejects.toThrow(/approval_first_approval/);
    expect((await approve(id, p.s.approver.api_key)).status).toBe(200);
    // A first approval overwritten.
    await expect(
      tenantD1(p.s)
        .prepare('UPDATE approvals SET first_approved_by = ? WHERE approval_id = ?')
        .bind(p.second.principal_id, id)
        .run(),
    ).rejects.toThrow(/approval_first_approval/);
    // The first approver completing it.
    await expect(
      tenantD1(p.s)
        .prepare(
          "UPDATE approvals SET status = 'approved', decided_by = ?, decided_at_unix_ms = ?, expires_at_unix_ms = ? WHERE approval_id = ?",
        )
        .bind(p.s.approver.principal_id, now, now + 60_000, id)
        .run(),
    ).rejects.toThrow(/approval_second_approver/);
    // The key an approval was requested with never changes.
    await expect(
      tenantD1(p.s)
        .prepare("UPDATE approvals SET idempotency_key = 'another-key-1' WHERE approval_id = ?")
        .bind(id)
        .run(),
    ).rejects.toThrow(/approval_immutable/);
    // A first approval on a request that needs one approver.
    const single = await call('POST', '/v1/approval-requests', {
      key: p.s.agent.api_key,
      body: { tool_contract_sha256: p.s.rollback_contract_sha256, input: ROLLBACK_INPUT },
    });
    await expect(
      tenantD1(p.s)
        .prepare('UPDATE approvals SET first_approved_by = ? WHERE approval_id = ?')
        .bind(p.s.approver.principal_id, single.body.approval_id)
        .run(),
    ).rejects.toThrow(/approval_first_approval/);
    expect(await row(p, id)).toMatchObject({
      status: 'pending',
      first_approved_by: p.s.approver.principal_id,
    });
  });

  it('the authorize path refuses an irreversible approval of one approver, however it was stored', async () => {
    const p = await purgeTenant();
    const id = await request(p);
    const now = Date.now();
    // A writer that bypasses the service and the guard (the trigger is restored below).
    await tenantD1(p.s).prepare('DROP TRIGGER approvals_second_approver').run();
    try {
      await tenantD1(p.s)
        .prepare(
          "UPDATE approvals SET status = 'approved', decided_by = ?, decided_at_unix_ms = ?, expires_at_unix_ms = ? WHERE approval_id = ?",
        )
        .bind(p.s.approver.principal_id, now, now + 600_000, id)
        .run();
    } finally {
      await tenantD1(p.s)
        .prepare(
          "CREATE TRIGGER `approvals_second_approver` BEFORE UPDATE OF `status` ON `approvals` WHEN NEW.`status` = 'approved' AND NEW.`effect` = 'irreversible' AND (NEW.`first_approved_by` IS NULL OR NEW.`decided_by` IS NULL OR NEW.`decided_by` = NEW.`first_approved_by` OR NEW.`decided_by` = NEW.`requester_principal_id` OR NEW.`first_approved_by` = NEW.`requester_principal_id`) BEGIN SELECT RAISE(ABORT, 'approval_second_approver'); END",
        )
        .run();
    }
    const z = await authorizeWith(p, id);
    expect(z.status).toBe(403);
    expect(z.body.violations).toEqual(['approval_unusable']);
    expect(z.body.receipt.body.decision).toBe('denied');
    expect((await row(p, id))?.status).toBe('approved');
  });

  it('revoking the first approver voids the completed approval', async () => {
    const p = await purgeTenant();
    const id = await request(p);
    expect((await approve(id, p.s.approver.api_key)).status).toBe(200);
    expect((await approve(id, p.second.api_key)).status).toBe(200);
    const revoked = await call('POST', `/v1/principals/${p.s.approver.principal_id}/revoke`, {
      key: p.s.admin.api_key,
    });
    expect(revoked.status).toBe(200);
    const z = await authorizeWith(p, id);
    expect(z.status).toBe(403);
    expect(z.body.violations).toEqual(['approval_unusable']);
  });
});
