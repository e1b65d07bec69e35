/**
 * Security: an agent must never use another principal's grant, even by naming both the grant
 * (`grant_id`) and its owner (`principal_id`) in the body: the body checks, never selects.
 */
import { describe, expect, it } from 'vitest';
import { call, READ_INPUT, seedTenant } from '../platform/harness.js';

describe('security: grant borrowing', () => {
  it('naming another principal as principal_id together with its grant_id is denied', async () => {
    const s = await seedTenant('sec-grant');
    // A second agent of the same tenant that holds no grant at all.
    const p = await call('POST', '/v1/principals', {
      key: s.admin.api_key,
      body: { name: 'borrower', roles: ['agent'] },
    });
    expect(p.status).toBe(201);
    const key = p.body.api_key as string;
    const run = await call('POST', '/v1/runs', {
      key,
      body: { max_calls: 2, max_external_writes: 0, max_duration_ms: 60_000 },
    });
    expect(run.status).toBe(201);
    const r = await call('POST', '/v1/authorize', {
      key,
      body: {
        tool_contract_sha256: s.read_contract_sha256,
        input: READ_INPUT,
        run_id: run.body.run_id,
        grant_id: s.grant_id,
        principal_id: s.agent.principal_id,
      },
    });
    expect(r.status).toBe(403);
    expect(r.body.decision).toBe('denied');
    expect(r.body.violations).toContain('principal_mismatch');
    // The receipt is not claimable either.
    const claim = await call('POST', '/v1/executions/claim', {
      key: s.executor.api_key,
      body: { authorization_receipt_sha256: r.body.receipt.sha256 },
    });
    expect(claim.status).toBe(403);
    expect(claim.body.error.code).toBe('authorization_denied');
  });
});
