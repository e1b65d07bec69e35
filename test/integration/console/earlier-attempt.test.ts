/**
 * "An earlier unresolved attempt of the same operation is shown beside the request" (issue 14):
 * an approval request may carry the idempotency key the agent will authorize with; the
 * single-request view (JSON and console page) shows an unresolved operation of the same tool and
 * key, which may already have had its effect.
 */
import { describe, expect, it } from 'vitest';
import { type Seeded } from '../../../scripts/seed.js';
import { authorizedRollback, claim, observe, report } from '../executions/helpers.js';
import { ROLLBACK_INPUT, call, consoleAs, seedTenant, shardOf } from '../platform/harness.js';

async function requestWithKey(s: Seeded, idempotency_key?: string, input: unknown = ROLLBACK_INPUT) {
  return call('POST', '/v1/approval-requests', {
    key: s.agent.api_key,
    body: {
      tool_contract_sha256: s.rollback_contract_sha256,
      input,
      ...(idempotency_key === undefined ? {} : { idempotency_key }),
    },
  });
}

/** The console page of one request, as a signed-in approver sees it. */
async function consolePage(s: Seeded, id: string): Promise<string> {
  const get = await consoleAs(s.approver.api_key);
  return (await get(`/console/approvals/${id}`)).text;
}

describe('earlier unresolved attempt beside an approval request', () => {
  it('shows an unresolved operation of the same tool and key, in JSON and on the page', async () => {
    const s = await seedTenant('earlier');
    const a = await authorizedRollback(s);
    const c = await claim(s, a.sha256);
    expect(c.status).toBe(200);
    const op = c.body.operation_id as string;
    const ind = await report(s, op, c.body.fencing_token, observe(a.receipt, 'indeterminate'));
    expect(ind.body.operation.status).toBe('reconciliation_required');

    // The agent retries the same operation (same key) and asks approval again.
    const r = await requestWithKey(s, a.idempotency_key);
    expect(r.status).toBe(201);
    expect(r.body.idempotency_key).toBe(a.idempotency_key);
    const id = r.body.approval_id as string;
    const view = await call('GET', `/v1/approval-requests/${id}`, { key: s.approver.api_key });
    expect(view.body.earlier_attempt).toMatchObject({
      operation_id: op,
      status: 'reconciliation_required',
      tool_contract_sha256: s.rollback_contract_sha256,
      input_sha256: a.receipt.body.input_sha256,
    });
    // Lists leave it out (a page would cost one index read per row).
    const list = await call('GET', '/v1/approval-requests', { key: s.approver.api_key });
    const item = list.body.items.find((i: { approval_id: string }) => i.approval_id === id);
    expect(item.idempotency_key).toBe(a.idempotency_key);
    expect(item).not.toHaveProperty('earlier_attempt');

    const page = await consolePage(s, id);
    expect(page).toContain('Earlier unresolved attempt of this operation');
    expect(page).toContain(op);
    expect(page).toContain('reconciliation_required');
    expect(page).toContain('(the same input as this request)');

    // Once the earlier attempt is reconciled, nothing is shown.
    const rec = await call('POST', '/v1/reconciliations', {
      key: s.admin.api_key,
      body: { operation_id: op, observation: observe(a.receipt, 'succeeded') },
    });
    expect(rec.status).toBe(201);
    const after = await call('GET', `/v1/approval-requests/${id}`, { key: s.approver.api_key });
    expect(after.body.earlier_attempt).toBeNull();
    expect(await consolePage(s, id)).not.toContain('Earlier unresolved attempt');
  });

  it('a request without a key, or with an unused one, shows none; a malformed key is refused', async () => {
    const s = await seedTenant('earlier');
    const none = await requestWithKey(s);
    expect(none.status).toBe(201);
    expect(none.body.idempotency_key).toBeNull();
    const v1 = await call('GET', `/v1/approval-requests/${none.body.approval_id}`, {
      key: s.approver.api_key,
    });
    expect(v1.body.earlier_attempt).toBeNull();
    const fresh = await requestWithKey(s, 'rollback-never-used-0001');
    const v2 = await call('GET', `/v1/approval-requests/${fresh.body.approval_id}`, {
      key: s.approver.api_key,
    });
    expect(v2.body.earlier_attempt).toBeNull();
    const bad = await requestWithKey(s, 'no spaces allowed');
    expect(bad.status).toBe(400);
    expect(bad.body.error.issues[0].path).toBe('idempotency_key');
  });
});

describe('open attempts of the same input under any key beside an approval request', () => {
  const OTHER_INPUT = { ...ROLLBACK_INPUT, to_version: 'v40' };

  async function view(s: Seeded, id: string) {
    const v = await call('GET', `/v1/approval-requests/${id}`, { key: s.approver.api_key });
    expect(v.status).toBe(200);
    return v.body;
  }

  it('finds a retry under a new key or no key, leaves out the same-key one and other inputs', async () => {
    const s = await seedTenant('sameinput');
    const a = await authorizedRollback(s);
    const c = await claim(s, a.sha256);
    expect(c.status).toBe(200);
    const op = c.body.operation_id as string;
    // Claimed, not reported: in flight.
    const noKey = await requestWithKey(s);
    expect(noKey.status).toBe(201);
    const pending = await view(s, noKey.body.approval_id);
    expect(pending.earlier_attempt).toBeNull();
    expect(pending.same_input_attempts).toMatchObject([
      { operation_id: op, status: 'pending', idempotency_key: a.idempotency_key },
    ]);

    const ind = await report(s, op, c.body.fencing_token, observe(a.receipt, 'indeterminate'));
    expect(ind.body.operation.status).toBe('reconciliation_required');
    const unresolved = await view(s, noKey.body.approval_id);
    expect(unresolved.same_input_attempts).toHaveLength(1);
    expect(unresolved.same_input_attempts[0]).toMatchObject({
      operation_id: op,
      status: 'reconciliation_required',
      tool_contract_sha256: s.rollback_contract_sha256,
      idempotency_key: a.idempotency_key,
      escalated_at_unix_ms: null,
    });
    expect(unresolved.same_input_attempts[0].reconciliation_deadline_unix_ms).toEqual(expect.any(Number));

    // A new key: the earlier attempt is not found by key, it is by input.
    const newKey = await requestWithKey(s, 'rollback-retry-new-key-0001');
    const byInput = await view(s, newKey.body.approval_id);
    expect(byInput.earlier_attempt).toBeNull();
    expect(byInput.same_input_attempts.map((o: { operation_id: string }) => o.operation_id)).toEqual([op]);
    const page = await consolePage(s, newKey.body.approval_id);
    expect(page).toContain('Open attempts of this exact call');
    expect(page).toContain(op);
    expect(page).toContain(a.idempotency_key);
    expect(page).toContain('besides any earlier attempt of this request’s key shown above');

    // The same key: shown once, as `earlier_attempt`.
    const sameKey = await requestWithKey(s, a.idempotency_key);
    const byKey = await view(s, sameKey.body.approval_id);
    expect(byKey.earlier_attempt).toMatchObject({ operation_id: op });
    expect(byKey.same_input_attempts).toEqual([]);
    expect(await consolePage(s, sameKey.body.approval_id)).not.toContain('Open attempts of this exact call');

    // Another input of the same tool: nothing.
    const other = await requestWithKey(s, undefined, OTHER_INPUT);
    expect(other.status).toBe(201);
    expect((await view(s, other.body.approval_id)).same_input_attempts).toEqual([]);

    // The requesting agent reads its own request without other principals' operations and keys.
    const own = await call('GET', `/v1/approval-requests/${newKey.body.approval_id}`, {
      key: s.agent.api_key,
    });
    expect(own.status).toBe(200);
    expect(own.body).not.toHaveProperty('same_input_attempts');
    // A tenant admin sees them as the approver does.
    const admin = await call('GET', `/v1/approval-requests/${newKey.body.approval_id}`, {
      key: s.admin.api_key,
    });
    expect(admin.body.same_input_attempts.map((o: { operation_id: string }) => o.operation_id)).toEqual([op]);

    // Lists leave the field out.
    const list = await call('GET', '/v1/approval-requests', { key: s.approver.api_key });
    const item = list.body.items.find(
      (i: { approval_id: string }) => i.approval_id === newKey.body.approval_id,
    );
    expect(item).not.toHaveProperty('same_input_attempts');

    // Reconciled: no longer open, nothing shown.
    const rec = await call('POST', '/v1/reconciliations', {
      key: s.admin.api_key,
      body: { operation_id: op, observation: observe(a.receipt, 'succeeded') },
    });
    expect(rec.status).toBe(201);
    expect((await view(s, newKey.body.approval_id)).same_input_attempts).toEqual([]);
    expect(await consolePage(s, newKey.body.approval_id)).not.toContain('Open attempts of this exact call');
  });

  it("never shows another tenant's operation of the same input", async () => {
    // Both tenants on one shard (two shards: one of the next two seeds shares the first's), so
    // only the tenant condition tells their operations apart: the contract is the same content,
    // hence the same digest, in both.
    const s = await seedTenant('sameinput');
    let other = await seedTenant('sameinput');
    if (shardOf(other) !== shardOf(s)) other = await seedTenant('sameinput');
    expect(shardOf(other)).toBe(shardOf(s));
    expect(other.rollback_contract_sha256).toBe(s.rollback_contract_sha256);
    const a = await authorizedRollback(other);
    const c = await claim(other, a.sha256);
    expect(c.status).toBe(200);
    const ind = await report(
      other,
      c.body.operation_id,
      c.body.fencing_token,
      observe(a.receipt, 'indeterminate'),
    );
    expect(ind.body.operation.status).toBe('reconciliation_required');
    // The other tenant sees its own.
    const theirs = await call('POST', '/v1/approval-requests', {
      key: other.agent.api_key,
      body: { tool_contract_sha256: other.rollback_contract_sha256, input: ROLLBACK_INPUT },
    });
    expect((await view(other, theirs.body.approval_id)).same_input_attempts).toHaveLength(1);
    // This tenant, same contract content and input: nothing.
    const mine = await requestWithKey(s);
    expect((await view(s, mine.body.approval_id)).same_input_attempts).toEqual([]);
  });

  it('shows at most five, newest first', async () => {
    const s = await seedTenant('sameinput');
    const ops: string[] = [];
    for (let i = 0; i < 6; i++) {
      const a = await authorizedRollback(s);
      const c = await claim(s, a.sha256);
      expect(c.status).toBe(200);
      ops.push(c.body.operation_id as string);
    }
    const r = await requestWithKey(s);
    const shown = (await view(s, r.body.approval_id)).same_input_attempts as {
      operation_id: string;
      updated_at_unix_ms: number;
    }[];
    expect(shown).toHaveLength(5);
    for (let i = 1; i < shown.length; i++) {
      expect(shown[i - 1]!.updated_at_unix_ms).toBeGreaterThanOrEqual(shown[i]!.updated_at_unix_ms);
    }
    expect(new Set(shown.map((o) => o.operation_id)).size).toBe(5);
    for (const o of shown) expect(ops).toContain(o.operation_id);
  });
});
