/**
 * Tenant isolation matrix: for every endpoint that names an object, and every object kind, a
 * caller of tenant A naming tenant B's object gets exactly the answer it gets for an object that
 * does not exist (404 with the same body), or, where the object is evidence inside an
 * authorization (run, approval), a denial that treats it as missing. Afterwards, nothing of
 * tenant B has changed.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { ROLLBACK_CONTRACT, type Seeded } from '../../../scripts/seed.js';
import { DEMO_POLICY } from '../../../scripts/seed.js';
import {
  approvedApproval,
  authorize,
  authorizeBody,
  call,
  createRun,
  type Reply,
  ROLLBACK_INPUT,
  seedTenant,
} from './harness.js';

interface TenantObjects {
  readonly s: Seeded;
  readonly run: string;
  readonly approval: string;
  readonly pendingApproval: string;
  readonly receipt: string;
  readonly privateContract: string;
  readonly operation: string;
}

async function populate(): Promise<TenantObjects> {
  const s = await seedTenant('iso');
  const run = await createRun(s);
  const approval = await approvedApproval(s);
  const used = await approvedApproval(s);
  const r = await authorize(s, authorizeBody(s, run, { approval_id: used }));
  expect(r.status).toBe(200);
  const pending = await call('POST', '/v1/approval-requests', {
    key: s.agent.api_key,
    body: { tool_contract_sha256: s.rollback_contract_sha256, input: ROLLBACK_INPUT },
  });
  const priv = await call('POST', '/v1/contracts', {
    key: s.admin.api_key,
    body: { ...ROLLBACK_CONTRACT, contract_release: `private ${s.tenant_id}` },
  });
  const claim = await call('POST', '/v1/executions/claim', {
    key: s.executor.api_key,
    body: { authorization_receipt_sha256: r.body.receipt.sha256 },
  });
  expect(claim.status).toBe(200);
  return {
    s,
    run,
    approval,
    pendingApproval: pending.body.approval_id,
    receipt: r.body.receipt.sha256,
    privateContract: priv.body.tool_contract_sha256,
    operation: claim.body.operation_id,
  };
}

let A: TenantObjects;
let B: TenantObjects;

beforeAll(async () => {
  [A, B] = await Promise.all([populate(), populate()]);
}, 60_000);

type Role = 'admin' | 'agent' | 'approver' | 'executor';
const keyOf = (t: TenantObjects, role: Role) => t.s[role].api_key;

interface Case {
  readonly name: string;
  readonly method: 'GET' | 'POST';
  /** Path naming tenant B's object, and the same path naming an object that does not exist. */
  readonly path: (b: TenantObjects) => string;
  readonly missing: string;
  readonly roles: readonly Role[];
  readonly body?: (b: TenantObjects, a: TenantObjects) => unknown;
}

const NO_SHA = '9'.repeat(64);

const cases: Case[] = [
  {
    name: 'principal: read',
    method: 'GET',
    path: (b) => `/v1/principals/${b.s.agent.principal_id}`,
    missing: '/v1/principals/prn-missing',
    roles: ['admin'],
  },
  {
    name: 'principal: revoke',
    method: 'POST',
    path: (b) => `/v1/principals/${b.s.agent.principal_id}/revoke`,
    missing: '/v1/principals/prn-missing/revoke',
    roles: ['admin'],
  },
  {
    name: 'contract: read',
    method: 'GET',
    path: (b) => `/v1/contracts/${b.privateContract}`,
    missing: `/v1/contracts/${NO_SHA}`,
    roles: ['admin', 'agent', 'approver', 'executor'],
  },
  {
    name: 'contract: quarantine',
    method: 'POST',
    path: (b) => `/v1/contracts/${b.privateContract}/quarantine`,
    missing: `/v1/contracts/${NO_SHA}/quarantine`,
    roles: ['admin'],
  },
  {
    name: 'grant: read',
    method: 'GET',
    path: (b) => `/v1/grants/${b.s.grant_id}`,
    missing: '/v1/grants/grt-missing',
    roles: ['admin'],
  },
  {
    name: 'grant: revoke',
    method: 'POST',
    path: (b) => `/v1/grants/${b.s.grant_id}/revoke`,
    missing: '/v1/grants/grt-missing/revoke',
    roles: ['admin'],
  },
  {
    name: 'approval: read',
    method: 'GET',
    path: (b) => `/v1/approval-requests/${b.pendingApproval}`,
    missing: '/v1/approval-requests/apr-missing',
    roles: ['admin', 'approver', 'agent'],
  },
  {
    name: 'approval: approve',
    method: 'POST',
    path: (b) => `/v1/approval-requests/${b.pendingApproval}/approve`,
    missing: '/v1/approval-requests/apr-missing/approve',
    roles: ['approver'],
  },
  {
    name: 'approval: deny',
    method: 'POST',
    path: (b) => `/v1/approval-requests/${b.pendingApproval}/deny`,
    missing: '/v1/approval-requests/apr-missing/deny',
    roles: ['approver'],
  },
  {
    name: 'run: read',
    method: 'GET',
    path: (b) => `/v1/runs/${b.run}`,
    missing: '/v1/runs/run-missing',
    roles: ['admin', 'agent'],
  },
  {
    name: 'receipt: read',
    method: 'GET',
    path: (b) => `/v1/receipts/${b.receipt}`,
    missing: `/v1/receipts/${NO_SHA}`,
    roles: ['admin', 'agent', 'approver', 'executor'],
  },
  {
    name: 'operation: read',
    method: 'GET',
    path: (b) => `/v1/operations/${b.operation}`,
    missing: `/v1/operations/${NO_SHA}`,
    roles: ['admin', 'executor'],
  },
  {
    name: 'receipt: claim for execution',
    method: 'POST',
    path: () => '/v1/executions/claim',
    missing: '/v1/executions/claim',
    roles: ['executor'],
    body: (b) => ({ authorization_receipt_sha256: b.receipt }),
  },
  {
    name: 'contract: approval request',
    method: 'POST',
    path: () => '/v1/approval-requests',
    missing: '/v1/approval-requests',
    roles: ['agent'],
    body: (b) => ({ tool_contract_sha256: b.privateContract, input: ROLLBACK_INPUT }),
  },
  {
    name: 'contract: authorize',
    method: 'POST',
    path: () => '/v1/authorize',
    missing: '/v1/authorize',
    roles: ['agent'],
    body: (b, a) => authorizeBody(a.s, a.run, { tool_contract_sha256: b.privateContract }),
  },
  {
    name: 'grant: authorize naming grant_id',
    method: 'POST',
    path: () => '/v1/authorize',
    missing: '/v1/authorize',
    roles: ['agent'],
    body: (b, a) => authorizeBody(a.s, a.run, { grant_id: b.s.grant_id }),
  },
  {
    name: 'principal: grant to',
    method: 'POST',
    path: () => '/v1/grants',
    missing: '/v1/grants',
    roles: ['admin'],
    body: (b) => ({
      principal_id: b.s.agent.principal_id,
      allowed_tools: ['get_deployment'],
      allowed_effects: ['read_only'],
      capabilities: [],
      expires_at_unix_ms: Date.now() + 60_000,
    }),
  },
];

/** The same request with B's identifiers replaced by ones that exist nowhere. */
function missingBody(c: Case, a: TenantObjects): unknown {
  const body = c.body?.(B, a);
  if (body === undefined) return undefined;
  const text = JSON.stringify(body)
    .replaceAll(B.receipt, NO_SHA)
    .replaceAll(B.privateContract, NO_SHA)
    .replaceAll(B.s.grant_id, 'grt-missing')
    .replaceAll(B.s.agent.principal_id, 'prn-missing');
  return JSON.parse(text);
}

function comparable(r: Reply) {
  return { status: r.status, code: r.body?.error?.code, message: r.body?.error?.message };
}

describe('tenant isolation matrix', () => {
  for (const c of cases) {
    for (const role of c.roles) {
      it(`${c.name} as ${role} of another tenant is indistinguishable from missing`, async () => {
        const key = keyOf(A, role);
        const body = c.body?.(B, A);
        const cross = await call(c.method, c.path(B), body === undefined ? { key } : { key, body });
        const mb = missingBody(c, A);
        const missing = await call(c.method, c.missing, mb === undefined ? { key } : { key, body: mb });
        expect(cross.status).toBe(404);
        expect(comparable(cross)).toEqual(comparable(missing));
      });
    }
  }

  it('another tenant’s run is run_unknown and its approval is unusable: a denial, nothing consumed', async () => {
    const runCross = await authorize(A.s, {
      tool_contract_sha256: A.s.read_contract_sha256,
      input: { service: 'api', environment: 'production' },
      run_id: B.run,
    });
    expect(runCross.status).toBe(403);
    expect(runCross.body.violations).toEqual(['run_unknown']);
    const approvalCross = await authorize(A.s, authorizeBody(A.s, A.run, { approval_id: B.approval }));
    expect(approvalCross.status).toBe(403);
    expect(approvalCross.body.violations).toEqual(['approval_unusable']);
  });

  it('lists show only the caller’s tenant', async () => {
    const list = await call('GET', '/v1/approval-requests', { key: keyOf(A, 'approver') });
    const ids = list.body.items.map((i: { approval_id: string }) => i.approval_id);
    expect(ids).toContain(A.pendingApproval);
    expect(ids).not.toContain(B.pendingApproval);
    const ops = await call('GET', '/v1/operations', { key: keyOf(A, 'admin') });
    expect(JSON.stringify(ops.body)).not.toContain(B.operation);
  });

  it('a tenant named in a body never selects it', async () => {
    const r = await call('POST', '/v1/principals', {
      key: keyOf(A, 'admin'),
      body: { name: 'x', roles: ['agent'], tenant_id: B.s.tenant_id },
    });
    expect(r.status).toBe(403);
    expect(r.body.error.code).toBe('tenant_mismatch');
    const run = await call('POST', '/v1/runs', {
      key: keyOf(A, 'agent'),
      body: { max_calls: 1, max_external_writes: 0, max_duration_ms: 1000, tenant_id: B.s.tenant_id },
    });
    expect(run.status).toBe(403);
  });

  it('a policy change in one tenant does not touch the other', async () => {
    const put = await call('PUT', '/v1/policy', {
      key: keyOf(A, 'admin'),
      body: { ...DEMO_POLICY, approval_max_lifetime_ms: 300_000 },
    });
    expect(put.status).toBe(200);
    const other = await call('GET', '/v1/policy', { key: keyOf(B, 'agent') });
    expect(other.body.policy_sha256).toBe(B.s.policy_sha256);
  });

  it('nothing of tenant B changed', async () => {
    const agent = await call('GET', `/v1/policy`, { key: keyOf(B, 'agent') });
    expect(agent.status).toBe(200);
    const grant = await call('GET', `/v1/grants/${B.s.grant_id}`, { key: keyOf(B, 'admin') });
    expect(grant.body.revoked_at_unix_ms).toBeNull();
    const contract = await call('GET', `/v1/contracts/${B.privateContract}`, { key: keyOf(B, 'admin') });
    expect(contract.body.quarantined).toBe(false);
    const approval = await call('GET', `/v1/approval-requests/${B.approval}`, { key: keyOf(B, 'approver') });
    expect(approval.body.status).toBe('approved');
    const pending = await call('GET', `/v1/approval-requests/${B.pendingApproval}`, {
      key: keyOf(B, 'approver'),
    });
    expect(pending.body.status).toBe('pending');
    const run = await call('GET', `/v1/runs/${B.run}`, { key: keyOf(B, 'agent') });
    expect(run.body.calls_used).toBe(1);
  });
});
