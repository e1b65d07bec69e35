/**
 * "An earlier unresolved attempt of the same operation is shown beside the request" (issue 14):
 * an approval request may carry the idempotency key the agent will authorize with; the
 * single-request view (JSON and console page) shows an unresolved operation of the same tool and
 * key, which may already have had its effect.
 */
import { describe, expect, it } from 'vitest';
import { type Seeded } from '../../../scripts/seed.js';
import { authorizedRollback, claim, observe, report } from '../executions/helpers.js';
import { ROLLBACK_INPUT, call, consoleAs, seedTenant } from '../platform/harness.js';

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
