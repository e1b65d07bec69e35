/**
 * The AuthZEN 1.0 door, black-box through the Worker, one test per protocol requirement of the
 * specification (openid/authzen api/authorization-api-1_0.md; section numbers as in
 * docs/authzen.md), and the same call through `/v1` and AuthZEN yielding the same decision,
 * receipt fields and effects.
 */
import { describe, expect, it } from 'vitest';
import type { Seeded } from '../../../scripts/seed.js';
import {
  type Reply,
  READ_INPUT,
  ROLLBACK_INPUT,
  approvedApproval,
  authorize,
  authorizeBody,
  call,
  createRun,
  seedTenant,
  uniqueName,
} from '../platform/harness.js';

function evaluation(s: Seeded, run_id: string, over: Record<string, unknown> = {}) {
  return {
    subject: { type: 'agent', id: s.agent.principal_id },
    action: { name: 'get_deployment' },
    resource: { type: 'deployment', id: 'production/api' },
    context: { input: READ_INPUT, run_id },
    ...over,
  };
}

function rollbackEvaluation(s: Seeded, run_id: string, context: Record<string, unknown> = {}) {
  return evaluation(s, run_id, {
    action: { name: 'execute_rollback' },
    context: { input: ROLLBACK_INPUT, run_id, idempotency_key: `rollback-${uniqueName('k')}`, ...context },
  });
}

const post = (s: Seeded, path: string, body: unknown, headers: Record<string, string> = {}) =>
  call('POST', path, { key: s.agent.api_key, body, headers });

async function run(s: Seeded, budgets = {}): Promise<string> {
  return createRun(s, budgets);
}

describe('access evaluation (§6, §10.1)', () => {
  it('A1: a permitted call is 200 application/json with decision true and the stored receipt', async () => {
    const s = await seedTenant('az');
    const r = await post(s, '/access/v1/evaluation', evaluation(s, await run(s)));
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^application\/json/);
    expect(r.body.decision).toBe(true);
    const stored = await call('GET', `/v1/receipts/${r.body.context.receipt_sha256}`, {
      key: s.agent.api_key,
    });
    expect(stored.status).toBe(200);
    expect(stored.body.outcome).toBe('authorized');
  });

  it('A2: a deny is 200 with decision false, the violations and the receipt digest, never 403', async () => {
    const s = await seedTenant('az');
    const r = await post(s, '/access/v1/evaluation', rollbackEvaluation(s, await run(s)));
    expect(r.status).toBe(200);
    expect(r.body.decision).toBe(false);
    expect(r.body.context.violations).toEqual(['approval_missing']);
    expect(r.body.context.receipt_sha256).toMatch(/^[0-9a-f]{64}$/);
    // A requestable denial: where to request the approval and what to retry with (ARAP shape).
    const ar = r.body.context.access_request;
    expect(ar.endpoint).toMatch(/\/v1\/approval-requests$/);
    expect(ar.evaluation_id).toBe(r.body.context.receipt_sha256);
    expect(Date.parse(ar.expires_at)).toBeGreaterThan(Date.parse(ar.evaluated_at));
    expect(ar.body.input).toEqual(ROLLBACK_INPUT);
  });

  it('A2: approval requested from the access_request, then re-evaluated with it, permits once', async () => {
    const s = await seedTenant('az');
    const runId = await run(s);
    const denied = await post(s, '/access/v1/evaluation', rollbackEvaluation(s, runId));
    const ar = denied.body.context.access_request;
    const req = await call('POST', new URL(ar.endpoint).pathname, { key: s.agent.api_key, body: ar.body });
    expect(req.status).toBe(201);
    const ok = await call('POST', `/v1/approval-requests/${req.body.approval_id}/approve`, {
      key: s.approver.api_key,
    });
    expect(ok.status).toBe(200);
    const ev = rollbackEvaluation(s, runId, { approval_id: req.body.approval_id });
    const first = await post(s, '/access/v1/evaluation', ev);
    expect(first.body.decision).toBe(true);
    const again = await post(s, '/access/v1/evaluation', ev);
    expect(again.body.decision).toBe(false);
    expect(again.body.context.violations).toContain('approval_unusable');
  });

  it('A3/A4: a missing subject, action, resource, subject.id, resource.type or action.name is 400', async () => {
    const s = await seedTenant('az');
    const base = evaluation(s, await run(s));
    const cases: Record<string, unknown>[] = [
      { ...base, subject: undefined },
      { ...base, action: undefined },
      { ...base, resource: undefined },
      { ...base, subject: { type: 'agent' } },
      { ...base, resource: { id: 'x' } },
      { ...base, action: { properties: {} } },
    ];
    for (const body of cases) {
      const r = await post(s, '/access/v1/evaluation', JSON.parse(JSON.stringify(body)));
      expect(r.status).toBe(400);
      expect(typeof r.body).toBe('string');
    }
  });

  it('A5: non-string type/id/name or non-object properties/context is 400', async () => {
    const s = await seedTenant('az');
    const base = evaluation(s, await run(s));
    for (const body of [
      { ...base, subject: { type: 1, id: 'x' } },
      { ...base, action: { name: ['x'] } },
      { ...base, resource: { type: 'deployment', id: 'x', properties: 'p' } },
      { ...base, context: [1] },
    ]) {
      expect((await post(s, '/access/v1/evaluation', body)).status).toBe(400);
    }
  });

  it('A6: unknown members are ignored at every level, with the same decision', async () => {
    const s = await seedTenant('az');
    const runId = await run(s);
    const plain = await post(s, '/access/v1/evaluation', evaluation(s, runId));
    const extra = await post(s, '/access/v1/evaluation', {
      ...evaluation(s, runId),
      unknown_top: { nested: true },
      subject: { type: 'agent', id: s.agent.principal_id, extra: 1 },
      action: { name: 'get_deployment', also: 'x' },
      context: { input: READ_INPUT, run_id: runId, gateway_hint: 'ignored' },
    });
    expect(plain.body.decision).toBe(true);
    expect(extra.status).toBe(200);
    expect(extra.body.decision).toBe(true);
  });

  it('strict JSON still holds: duplicate keys are 400 even though unknown fields are ignored', async () => {
    const s = await seedTenant('az');
    const r = await call('POST', '/access/v1/evaluation', {
      key: s.agent.api_key,
      raw: '{"subject":{"type":"agent","id":"a"},"subject":{"type":"agent","id":"b"},"action":{"name":"x"},"resource":{"type":"d","id":"1"}}',
    });
    expect(r.status).toBe(400);
  });

  it('A7: a body that is not a JSON object is 400', async () => {
    const s = await seedTenant('az');
    for (const raw of ['[]', '"x"', '1']) {
      expect((await call('POST', '/access/v1/evaluation', { key: s.agent.api_key, raw })).status).toBe(400);
    }
  });

  it('A8: a body without application/json content type is refused (415, documented)', async () => {
    const s = await seedTenant('az');
    const r = await call('POST', '/access/v1/evaluation', {
      key: s.agent.api_key,
      raw: JSON.stringify(evaluation(s, 'run-x')),
      headers: { 'content-type': 'text/plain' },
    });
    expect(r.status).toBe(415);
  });

  it('A9: no or an invalid key is 401 with WWW-Authenticate; a caller without the agent role is 403', async () => {
    const s = await seedTenant('az');
    const none = await call('POST', '/access/v1/evaluation', { body: evaluation(s, 'run-x') });
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toMatch(/^Bearer /);
    const approver = await call('POST', '/access/v1/evaluation', {
      key: s.approver.api_key,
      body: evaluation(s, 'run-x'),
    });
    expect(approver.status).toBe(403);
  });

  it('A10: an inbound X-Request-ID is echoed on 200, 4xx and 401; Writ keeps its own id beside it', async () => {
    const s = await seedTenant('az');
    const ok = await post(s, '/access/v1/evaluation', evaluation(s, await run(s)), {
      'x-request-id': 'pep-123',
    });
    expect(ok.headers.get('x-request-id')).toBe('pep-123');
    expect(ok.headers.get('writ-request-id')).toMatch(/^req/);
    const bad = await post(s, '/access/v1/evaluation', {}, { 'x-request-id': 'pep-456' });
    expect(bad.status).toBe(400);
    expect(bad.headers.get('x-request-id')).toBe('pep-456');
    const unauth = await call('POST', '/access/v1/evaluation', {
      body: {},
      headers: { 'x-request-id': 'pep-789' },
    });
    expect(unauth.headers.get('x-request-id')).toBe('pep-789');
  });

  it('A11: without X-Request-ID the answer still carries an id; /v1 never echoes', async () => {
    const s = await seedTenant('az');
    const r = await post(s, '/access/v1/evaluation', evaluation(s, await run(s)));
    expect(r.headers.get('x-request-id')).toMatch(/^req/);
    const v1 = await call('GET', '/v1/policy', {
      key: s.agent.api_key,
      headers: { 'x-request-id': 'pep-1' },
    });
    expect(v1.headers.get('x-request-id')).not.toBe('pep-1');
  });

  it('A13: null-valued optional members are accepted', async () => {
    const s = await seedTenant('az');
    const r = await post(s, '/access/v1/evaluation', {
      ...evaluation(s, await run(s)),
      subject: { type: 'agent', id: s.agent.principal_id, properties: null },
    });
    expect(r.body.decision).toBe(true);
  });

  it('a different subject is decision false with a stored receipt, never a 403', async () => {
    const s = await seedTenant('az');
    const r = await post(s, '/access/v1/evaluation', {
      ...evaluation(s, await run(s)),
      subject: { type: 'agent', id: s.executor.principal_id },
    });
    expect(r.status).toBe(200);
    expect(r.body.decision).toBe(false);
    expect(r.body.context.violations).toEqual(['named_principal_mismatch']);
    expect(r.body.context.receipt.body.principal_id).toBe(s.agent.principal_id);
  });

  it('resource properties must be the target the input names; a wrong type denies', async () => {
    const s = await seedTenant('az');
    const runId = await run(s);
    const wrong = await post(s, '/access/v1/evaluation', {
      ...evaluation(s, runId),
      resource: {
        type: 'deployment',
        id: 'production/api',
        properties: { service: 'api', environment: 'staging' },
      },
    });
    expect(wrong.body).toMatchObject({
      decision: false,
      context: { error: { status: 400, code: 'target_mismatch' } },
    });
    const type = await post(s, '/access/v1/evaluation', {
      ...evaluation(s, runId),
      resource: { type: 'database', id: 'x' },
    });
    expect(type.body.decision).toBe(false);
    const same = await post(s, '/access/v1/evaluation', {
      ...evaluation(s, runId),
      resource: {
        type: 'deployment',
        id: 'production/api',
        properties: { service: 'api', environment: 'production' },
      },
    });
    expect(same.body.decision).toBe(true);
  });

  it('resource.id must name the target the input names: a PEP asking about X is never permitted Y', async () => {
    const s = await seedTenant('az');
    const runId = await run(s);
    // The PEP asks about production/web; the input names production/api, which the agent may read.
    for (const id of ['production/web', 'api/production', 'production%2Fapi', 'x']) {
      const other = await post(s, '/access/v1/evaluation', {
        ...evaluation(s, runId),
        resource: { type: 'deployment', id },
      });
      expect(other.status).toBe(200);
      expect(other.body).toMatchObject({
        decision: false,
        context: {
          error: {
            status: 400,
            code: 'target_mismatch',
            message: 'resource id does not name the target the input names',
          },
        },
      });
      // Nothing was decided about either resource: no receipt.
      expect(other.body.context.receipt_sha256).toBeUndefined();
    }
    // ... and the run was not charged for them.
    const charged = await call('GET', `/v1/runs/${runId}`, { key: s.agent.api_key });
    expect(charged.body.calls_used).toBe(0);
    // Its own id, or an empty one (no claim about which resource), is decided on the input.
    for (const id of ['production/api', '']) {
      const r = await post(s, '/access/v1/evaluation', {
        ...evaluation(s, runId),
        resource: { type: 'deployment', id },
      });
      expect(r.body.decision).toBe(true);
      expect(r.body.context.receipt.body.target).toEqual({
        type: 'deployment',
        attributes: { environment: 'production', service: 'api' },
      });
    }
    // The batch holds each item to its own id (the per-item path, `authorizeNamedTool`).
    const batch = await post(s, '/access/v1/evaluations', {
      subject: { type: 'agent', id: s.agent.principal_id },
      action: { name: 'get_deployment' },
      context: { input: READ_INPUT, run_id: runId },
      evaluations: [
        { resource: { type: 'deployment', id: 'production/api' } },
        { resource: { type: 'deployment', id: 'staging/api' } },
      ],
    });
    expect(batch.body.evaluations.map((e: { decision: boolean }) => e.decision)).toEqual([true, false]);
    expect(batch.body.evaluations[1].context.error.code).toBe('target_mismatch');
  });

  it('an unmapped tool is decision false with an error, never true', async () => {
    const s = await seedTenant('az');
    const r = await post(s, '/access/v1/evaluation', {
      ...evaluation(s, await run(s)),
      action: { name: 'delete_everything' },
    });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ decision: false, context: { error: { status: 404, code: 'not_found' } } });
  });
});

describe('access evaluations (§7)', () => {
  const batchOf = (s: Seeded, runId: string, decisions: boolean[]) => ({
    subject: { type: 'agent', id: s.agent.principal_id },
    resource: { type: 'deployment', id: 'production/api' },
    context: { input: READ_INPUT, run_id: runId },
    evaluations: decisions.map((d) => ({ action: { name: d ? 'get_deployment' : 'unmapped_tool' } })),
  });

  it('B1/B3/B6/B12: three items, defaults applied, all executed, in order, no top-level decision', async () => {
    const s = await seedTenant('az');
    const r = await post(s, '/access/v1/evaluations', batchOf(s, await run(s), [true, false, true]));
    expect(r.status).toBe(200);
    expect(r.body.decision).toBeUndefined();
    expect(r.body.evaluations.map((e: { decision: boolean }) => e.decision)).toEqual([true, false, true]);
  });

  it('B2: an absent or empty evaluations array is a single evaluation', async () => {
    const s = await seedTenant('az');
    const runId = await run(s);
    for (const evaluations of [undefined, []]) {
      const r = await post(s, '/access/v1/evaluations', { ...evaluation(s, runId), evaluations });
      expect(r.body).toMatchObject({ decision: true });
      expect(r.body.evaluations).toBeUndefined();
    }
  });

  it('B4: an item key replaces the top-level key whole', async () => {
    const s = await seedTenant('az');
    const runId = await run(s);
    const r = await post(s, '/access/v1/evaluations', {
      ...evaluation(s, runId),
      evaluations: [{ context: { input: READ_INPUT } }, {}],
    });
    // The first item's context has no run_id: the top-level one is not merged in.
    expect(r.body.evaluations[0]).toMatchObject({ decision: false, context: { error: { status: 400 } } });
    expect(r.body.evaluations[1].decision).toBe(true);
  });

  it('B5: an item missing subject, action or resource with no top-level default is 400', async () => {
    const s = await seedTenant('az');
    const r = await post(s, '/access/v1/evaluations', {
      subject: { type: 'agent', id: s.agent.principal_id },
      evaluations: [{ action: { name: 'get_deployment' } }],
    });
    expect(r.status).toBe(400);
  });

  it('B7: deny_on_first_deny stops after the first deny', async () => {
    const s = await seedTenant('az');
    const r = await post(s, '/access/v1/evaluations', {
      ...batchOf(s, await run(s), [true, false, true]),
      options: { evaluations_semantic: 'deny_on_first_deny' },
    });
    expect(r.body.evaluations.map((e: { decision: boolean }) => e.decision)).toEqual([true, false]);
  });

  it('B8: permit_on_first_permit stops after the first permit', async () => {
    const s = await seedTenant('az');
    const r = await post(s, '/access/v1/evaluations', {
      ...batchOf(s, await run(s), [false, true, true]),
      options: { evaluations_semantic: 'permit_on_first_permit' },
    });
    expect(r.body.evaluations.map((e: { decision: boolean }) => e.decision)).toEqual([false, true]);
  });

  it('B9/B10: unknown options are ignored; an unknown semantic is 400', async () => {
    const s = await seedTenant('az');
    const runId = await run(s);
    const ok = await post(s, '/access/v1/evaluations', {
      ...batchOf(s, runId, [true]),
      options: { another_option: 'value' },
    });
    expect(ok.body.evaluations).toHaveLength(1);
    const bad = await post(s, '/access/v1/evaluations', {
      ...batchOf(s, runId, [true]),
      options: { evaluations_semantic: 'majority' },
    });
    expect(bad.status).toBe(400);
  });

  it('B11: a per-item failure is that item decision false with context.error; the rest still run', async () => {
    const s = await seedTenant('az');
    const r = await post(s, '/access/v1/evaluations', batchOf(s, await run(s), [false, true]));
    expect(r.body.evaluations[0]).toMatchObject({
      decision: false,
      context: { error: { code: 'not_found' } },
    });
    expect(r.body.evaluations[1].decision).toBe(true);
  });

  it('a batch larger than the bound is 400', async () => {
    const s = await seedTenant('az');
    const r = await post(
      s,
      '/access/v1/evaluations',
      batchOf(
        s,
        'run-x',
        Array.from({ length: 65 }, () => true),
      ),
    );
    expect(r.status).toBe(400);
  });
});

describe('action search (§8.6)', () => {
  it('S1/S2: lists the tools the caller may call on the resource, actions only', async () => {
    const s = await seedTenant('az');
    const r = await post(s, '/access/v1/search/action', {
      subject: { type: 'agent', id: s.agent.principal_id },
      resource: {
        type: 'deployment',
        id: 'ignored',
        properties: { service: 'api', environment: 'production' },
      },
    });
    expect(r.status).toBe(200);
    expect(r.body.results.map((a: { name: string }) => a.name)).toEqual([
      'execute_rollback',
      'get_deployment',
    ]);
    const rollback = r.body.results[0];
    expect(rollback.properties).toMatchObject({ effect: 'external_write', approval_required: true });
    const elsewhere = await post(s, '/access/v1/search/action', {
      subject: { type: 'agent', id: s.agent.principal_id },
      resource: {
        type: 'deployment',
        id: 'x',
        properties: { service: 'billing', environment: 'production' },
      },
    });
    expect(elsewhere.body.results).toEqual([]);
  });

  it('another subject gets no results, not a 403', async () => {
    const s = await seedTenant('az');
    const r = await post(s, '/access/v1/search/action', {
      subject: { type: 'agent', id: s.approver.principal_id },
      resource: { type: 'deployment', id: 'x' },
    });
    expect(r.status).toBe(200);
    expect(r.body.results).toEqual([]);
  });

  it('searching changes nothing: no receipt, no budget spent', async () => {
    const s = await seedTenant('az');
    const runId = await run(s);
    await post(s, '/access/v1/search/action', {
      subject: { type: 'agent', id: s.agent.principal_id },
      resource: { type: 'deployment', id: 'x' },
    });
    const r = await call('GET', `/v1/runs/${runId}`, { key: s.agent.api_key });
    expect(r.body.calls_used).toBe(0);
  });
});

describe('metadata (§9)', () => {
  it('M1/M3/M4: the configuration names the endpoints this PDP serves, and only those', async () => {
    const r = await call('GET', '/.well-known/authzen-configuration');
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^application\/json/);
    expect(r.body).toEqual({
      policy_decision_point: 'https://writ.test',
      access_evaluation_endpoint: 'https://writ.test/access/v1/evaluation',
      access_evaluations_endpoint: 'https://writ.test/access/v1/evaluations',
      search_action_endpoint: 'https://writ.test/access/v1/search/action',
    });
  });

  it('M2: a per-tenant PDP identifier is the URL the well-known suffix was inserted into', async () => {
    const s = await seedTenant('az');
    const r = await call('GET', `/.well-known/authzen-configuration/t/${s.tenant_id}`);
    expect(r.body.policy_decision_point).toBe(`https://writ.test/t/${s.tenant_id}`);
    const ev = await call('POST', new URL(r.body.access_evaluation_endpoint).pathname, {
      key: s.agent.api_key,
      body: evaluation(s, await run(s)),
    });
    expect(ev.body.decision).toBe(true);
  });

  it('a tenant-scoped endpoint refuses another tenant’s key', async () => {
    const a = await seedTenant('az');
    const b = await seedTenant('az');
    const r = await call('POST', `/t/${a.tenant_id}/access/v1/evaluation`, {
      key: b.agent.api_key,
      body: evaluation(b, await run(b)),
    });
    expect(r.status).toBe(403);
  });
});

describe('one decision, many doors', () => {
  async function effectsAfter(s: Seeded, runId: string, approval_id: string, r: Reply) {
    const runRow = await call('GET', `/v1/runs/${runId}`, { key: s.agent.api_key });
    const approval = await call('GET', `/v1/approval-requests/${approval_id}`, { key: s.approver.api_key });
    return { receipt: r, run: runRow.body, approval: approval.body };
  }

  it('the same approved rollback through /v1 and AuthZEN: same decision, receipt fields and effects', async () => {
    const s = await seedTenant('az');
    const key = `rollback-${uniqueName('k')}`;
    // /v1
    const run1 = await run(s);
    const a1 = await approvedApproval(s);
    const v1 = await authorize(s, authorizeBody(s, run1, { approval_id: a1, idempotency_key: key }));
    // AuthZEN
    const run2 = await run(s);
    const a2 = await approvedApproval(s);
    const az = await post(
      s,
      '/access/v1/evaluation',
      rollbackEvaluation(s, run2, { approval_id: a2, idempotency_key: key }),
    );
    expect(v1.status).toBe(200);
    expect(az.body.decision).toBe(true);
    const r1 = v1.body.receipt.body;
    const r2 = az.body.context.receipt.body;
    const same = (b: Record<string, unknown>) => ({
      decision: b.decision,
      violations: b.violations,
      tool_contract_sha256: b.tool_contract_sha256,
      input_sha256: b.input_sha256,
      input_bytes: b.input_bytes,
      target: b.target,
      grant_sha256: b.grant_sha256,
      policy_sha256: b.policy_sha256,
      effect: b.effect,
      idempotency_key: b.idempotency_key,
      tenant_id: b.tenant_id,
      principal_id: b.principal_id,
      receipt_version: b.receipt_version,
    });
    expect(same(r2)).toEqual(same(r1));
    const e1 = await effectsAfter(s, run1, a1, v1);
    const e2 = await effectsAfter(s, run2, a2, az);
    expect([e1.run.calls_used, e1.run.writes_used]).toEqual([1, 1]);
    expect([e2.run.calls_used, e2.run.writes_used]).toEqual([1, 1]);
    expect(e1.approval.status).toBe('consumed');
    expect(e2.approval.status).toBe('consumed');
    expect(e2.approval.consumed_by_receipt_sha256).toBe(az.body.context.receipt_sha256);
  });
});
