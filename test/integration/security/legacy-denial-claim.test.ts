/**
 * Issue 9 finding: claiming a (version 1) denial receipt whose body named another tenant answered
 * 500 ("stored authorization receipt does not verify"). A denial is never treated as corruption:
 * the claim refuses it as a denial (403 `authorization_denied`).
 */
import { describe, expect, it } from 'vitest';
import { authorizeToolCall } from '../../../src/core/authorization/authorize.js';
import { canonicalize, canonicalBytes, digestOf, sha256Hex } from '../../../src/core/canonical/canonical.js';
import type { ToolContract, ToolGrant, ToolInvocation } from '../../../src/core/model.js';
import { ROLLBACK_INPUT, call, seedTenant, d1Of } from '../platform/harness.js';

async function storeV1(tenant_id: string, receipt: { sha256: string; body: object }) {
  await (
    await d1Of(tenant_id)
  )
    .prepare(
      'INSERT INTO receipts (tenant_id, sha256, kind, receipt, evidence, outcome, principal_id, created_at_unix_ms) VALUES (?, ?, ?, ?, NULL, ?, NULL, ?)',
    )
    .bind(tenant_id, receipt.sha256, 'authorization', canonicalize(receipt), 'denied', Date.now())
    .run();
}

describe('a stored version 1 denial that named another tenant', () => {
  it('is refused at claim as a denial (403), not reported as corruption', async () => {
    const s = await seedTenant('legacy');
    const contract = (
      await call('GET', `/v1/contracts/${s.rollback_contract_sha256}`, { key: s.admin.api_key })
    ).body.contract as ToolContract;
    const grant = (await call('GET', `/v1/grants/${s.grant_id}`, { key: s.admin.api_key })).body
      .grant as ToolGrant;
    const bytes = canonicalBytes(ROLLBACK_INPUT);
    const invocation: ToolInvocation = {
      invocation_id: 'inv-legacy-0001',
      run_envelope_sha256: digestOf(['legacy-run']),
      // What version 1 did: the tenant a body named went into the invocation.
      tenant_id: 'ten-someoneelse',
      principal_id: s.agent.principal_id,
      policy_sha256: s.policy_sha256,
      tool_contract_sha256: s.rollback_contract_sha256,
      input_sha256: sha256Hex(bytes),
      input_bytes: bytes.byteLength,
      target: { type: 'deployment', attributes: { environment: 'production', service: 'api' } },
      requested_at_unix_ms: Date.now(),
      idempotency_key: 'legacy-key-0001',
      approval: null,
    };
    const r = authorizeToolCall(contract, grant, invocation, Date.now());
    if (!r.ok) throw new Error(r.error.message);
    expect(r.value.body.receipt_version).toBe(1);
    expect(r.value.body.decision).toBe('denied');
    await storeV1(s.tenant_id, r.value);
    const claim = await call('POST', '/v1/executions/claim', {
      key: s.executor.api_key,
      body: { authorization_receipt_sha256: r.value.sha256 },
    });
    expect(claim.status).toBe(403);
    expect(claim.body.error.code).toBe('authorization_denied');
  });
});
