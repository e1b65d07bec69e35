/**
 * The executor's check (`verifyAuthorizationReceipt`, src/verify) accepts the authorization receipts
 * the service issues, through `POST /v1/authorize` and the MCP door: each is signed at its
 * evaluation time, with a deadline within the policy limit, as the check requires of every receipt
 * (a signature dated otherwise could be a retired key's backdated one, docs/receipts.md).
 */
import { describe, expect, it } from 'vitest';
import { parsePublicKeySet } from '../../../src/core/receipts/keys.js';
import { DEMO_EXECUTOR_RELEASE } from '../../../scripts/seed.js';
import { verifyAuthorizationReceipt } from '../../../src/verify/authorization.js';
import {
  type Json,
  ROLLBACK_INPUT,
  authorizedRollback,
  call,
  mcpAuthorizedRollback,
  seedTenant,
} from './helpers.js';

async function executorVerdict(key: string, receipt: Json) {
  const ks = await call('GET', '/.well-known/writ-keys');
  expect(ks.status).toBe(200);
  const keys = parsePublicKeySet(ks.body);
  if (!keys.ok) throw new Error(keys.error.message);
  const b = await call('GET', `/v1/receipts/${receipt.sha256 as string}/bundle`, { key });
  expect(b.status).toBe(200);
  const v = verifyAuthorizationReceipt(receipt, {
    keys: keys.value,
    audience: { executor_release: DEMO_EXECUTOR_RELEASE },
    now: Date.now(),
    signature: b.body.signature,
    input: { ...ROLLBACK_INPUT },
  });
  expect(b.body.signature.issued_at_unix_ms).toBe(receipt.body.evaluated_at_unix_ms);
  return v;
}

describe('service-issued authorization receipts pass the executor check', () => {
  it('POST /v1/authorize', async () => {
    const s = await seedTenant('executor-verify');
    const a = await authorizedRollback(s);
    const v = await executorVerdict(s.executor.api_key, a.receipt);
    expect(v.ok ? 'ok' : v.reason).toBe('ok');
  });

  it('the MCP door', async () => {
    const s = await seedTenant('executor-verify-mcp');
    const receipt = await mcpAuthorizedRollback(s);
    const v = await executorVerdict(s.executor.api_key, receipt);
    expect(v.ok ? 'ok' : v.reason).toBe('ok');
  });
});
