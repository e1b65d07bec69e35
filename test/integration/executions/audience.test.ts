/**
 * A version 2 authorization receipt may name one executor principal (`executor_principal_id`):
 * then only that principal may claim it, even though every executor of the contract's release
 * could otherwise. Writ issues `null` today (any executor of the release); the claim still
 * enforces a named audience, so a receipt stored with one (another issuer, a later policy
 * setting) is never claimable by a second executor of the same release.
 */
import { describe, expect, it } from 'vitest';
import { canonicalize, digestOf } from '../../../src/core/canonical/canonical.js';
import { d1Of } from '../platform/harness.js';
import { type Json, authorizedRollback, claim, secondExecutor, seedTenant } from './helpers.js';

/** The receipt re-issued under its own digest with `executor_principal_id` set, stored as issued. */
async function storedFor(tenant_id: string, receipt: Json, executor_principal_id: string): Promise<string> {
  const body: Record<string, unknown> = {
    ...(receipt.body as Record<string, unknown>),
    executor_principal_id,
  };
  expect(body.receipt_version).toBe(2);
  const sha256 = digestOf(body);
  await (
    await d1Of(tenant_id)
  )
    .prepare(
      'INSERT INTO receipts (tenant_id, sha256, kind, receipt, evidence, outcome, principal_id, created_at_unix_ms) VALUES (?, ?, ?, ?, NULL, ?, ?, ?)',
    )
    .bind(
      tenant_id,
      sha256,
      'authorization',
      canonicalize({ sha256, body }),
      'authorized',
      body.principal_id,
      body.evaluated_at_unix_ms,
    )
    .run();
  return sha256;
}

describe('an authorization receipt that names its executor principal', () => {
  it('is refused to another executor of the same release (403 executor_mismatch)', async () => {
    const s = await seedTenant('audience');
    const other = await secondExecutor(s);
    const a = await authorizedRollback(s);
    const sha = await storedFor(s.tenant_id, a.receipt, s.executor.principal_id);
    const r = await claim(s, sha, other.api_key);
    expect(r.status).toBe(403);
    expect(r.body.error.code).toBe('executor_mismatch');
  });

  it('is claimed by the principal it names', async () => {
    const s = await seedTenant('audience');
    const a = await authorizedRollback(s);
    const sha = await storedFor(s.tenant_id, a.receipt, s.executor.principal_id);
    const r = await claim(s, sha);
    expect(r.status).toBe(200);
    expect(r.body.operation.authorization_receipt_sha256).toBe(sha);
  });
});
