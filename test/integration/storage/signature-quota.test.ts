/**
 * Issue 11 (migrations/0010): a receipt's signature row counts toward the tenant's stored bytes
 * (envelope bytes + 200, docs/storage.md "Quotas") and is refused by its receipt kind's tier, in
 * the receipt's own batch: a receipt that fits under the tier while its signature does not is
 * `429 quota_exceeded` with neither row written. Execution signatures are counted, never refused.
 */
import { describe, expect, it } from 'vitest';
import type { Seeded } from '../../../scripts/seed.js';
import {
  READ_INPUT,
  authorize,
  authorizeBody,
  call,
  createRun,
  seedTenant,
  setQuotas,
  tenantD1,
} from '../platform/harness.js';
import { claim, observe, report, authorizedRollback } from '../executions/helpers.js';
import { executed, postObservation, rawOutput } from './observation-helpers.js';

async function storedBytes(s: Seeded): Promise<number> {
  const u = await call('GET', '/v1/usage', { key: s.admin.api_key });
  expect(u.status).toBe(200);
  return u.body.stored_bytes.used as number;
}

/** What the usage triggers count for one receipt row and for its signature row, read from D1. */
async function rowSizes(s: Seeded, sha256: string): Promise<{ receipt: number; signature: number }> {
  const d1 = tenantD1(s);
  const r = await d1
    .prepare(
      `SELECT length(CAST(receipt AS BLOB)) + coalesce(length(CAST(evidence AS BLOB)), 0)
         + coalesce(evidence_bytes, 0) + 200 AS n FROM receipts WHERE tenant_id = ? AND sha256 = ?`,
    )
    .bind(s.tenant_id, sha256)
    .first<{ n: number }>();
  const g = await d1
    .prepare(
      'SELECT length(CAST(envelope AS BLOB)) + 200 AS n FROM receipt_signatures WHERE tenant_id = ? AND receipt_sha256 = ?',
    )
    .bind(s.tenant_id, sha256)
    .first<{ n: number }>();
  if (r === null || g === null) throw new Error(`receipt ${sha256} or its signature is not stored`);
  return { receipt: r.n, signature: g.n };
}

async function rowCount(s: Seeded, table: 'receipts' | 'receipt_signatures'): Promise<number> {
  const row = await tenantD1(s)
    .prepare(`SELECT count(*) AS n FROM ${table} WHERE tenant_id = ?`)
    .bind(s.tenant_id)
    .first<{ n: number }>();
  return row?.n ?? 0;
}

/** The smallest quota whose `tier` percent (as the trigger computes it) is exactly `limit`. */
function quotaWithTierAt(limit: number, tier: number): number {
  const q = Math.ceil((limit * 100) / tier);
  expect(Math.floor((q * tier) / 100)).toBe(limit);
  return q;
}

describe('signature rows in the stored-bytes quota', { timeout: 60_000 }, () => {
  it('each receipt adds its signature row to stored bytes (authorization and observation)', async () => {
    const s = await seedTenant('sig-bytes');
    const run = await createRun(s, { max_calls: 5 });
    const before = await storedBytes(s);
    const a = await authorize(
      s,
      authorizeBody(s, run, { tool_contract_sha256: s.read_contract_sha256, input: READ_INPUT }),
    );
    expect(a.status).toBe(200);
    const sizes = await rowSizes(s, a.body.receipt.sha256 as string);
    expect(sizes.signature).toBeGreaterThan(200);
    // The authorization also counts its run call; the difference is exactly the two rows.
    expect((await storedBytes(s)) - before).toBe(sizes.receipt + sizes.signature);
  });

  it('at the 90% tier: an observation whose receipt fits but whose signature does not is refused, nothing written', async () => {
    const s = await seedTenant('sig-tier');
    const e = await executed(s);
    // Measure one observation: its receipt row and its signature row.
    const first = await postObservation(s, { ...rawOutput(s, e), observation_id: 'obs-sig-a' });
    expect(first.status).toBe(201);
    const one = await rowSizes(s, first.body.receipt.sha256 as string);

    const used = await storedBytes(s);
    const receipts = await rowCount(s, 'receipts');
    const signatures = await rowCount(s, 'receipt_signatures');
    // Room for the receipt row (same size: same-length id, same payload) but not its signature.
    const short = quotaWithTierAt(used + one.receipt + one.signature - 1, 90);
    expect((await setQuotas(s.tenant_id, { max_stored_bytes: short })).status).toBe(200);
    const refused = await postObservation(s, { ...rawOutput(s, e), observation_id: 'obs-sig-b' });
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe('quota_exceeded');
    expect(await rowCount(s, 'receipts')).toBe(receipts);
    expect(await rowCount(s, 'receipt_signatures')).toBe(signatures);
    expect(await storedBytes(s)).toBe(used);

    // Exactly at 90% with both rows: stored, and usage grows by both.
    const exact = quotaWithTierAt(used + one.receipt + one.signature, 90);
    expect((await setQuotas(s.tenant_id, { max_stored_bytes: exact })).status).toBe(200);
    const stored = await postObservation(s, { ...rawOutput(s, e), observation_id: 'obs-sig-b' });
    expect(stored.status).toBe(201);
    const two = await rowSizes(s, stored.body.receipt.sha256 as string);
    expect(two).toEqual(one);
    expect(await storedBytes(s)).toBe(used + one.receipt + one.signature);
    expect(await rowCount(s, 'receipt_signatures')).toBe(signatures + 1);
  });

  // Issue 10: new signature rows are positional arrays (src/db/signature-rows.ts); migration 0016
  // reads their kind from `$[4]`, an object row's from `$.receipt_kind`, as 0010 did.
  it('an authorization signature has the 100% tier, not 90%, also in its positional form', async () => {
    const s = await seedTenant('sig-auth-tier');
    const run = await createRun(s, { max_calls: 5 });
    const body = () =>
      authorizeBody(s, run, { tool_contract_sha256: s.read_contract_sha256, input: READ_INPUT });
    const first = await authorize(s, body());
    expect(first.status).toBe(200);
    const one = await rowSizes(s, first.body.receipt.sha256 as string);
    const used = await storedBytes(s);
    // Room for both rows (and a few bytes of slack for another id), but past the 90% tier.
    const limit = used + one.receipt + one.signature + 16;
    expect(used + one.receipt + one.signature).toBeGreaterThan(Math.floor((limit * 90) / 100));
    expect((await setQuotas(s.tenant_id, { max_stored_bytes: limit })).status).toBe(200);
    const second = await authorize(s, body());
    expect(second.status).toBe(200);
    expect(await rowSizes(s, second.body.receipt.sha256 as string)).toEqual(one);
    // One byte short of both rows at 100%: refused, neither row written.
    const now = await storedBytes(s);
    const signatures = await rowCount(s, 'receipt_signatures');
    expect(
      (await setQuotas(s.tenant_id, { max_stored_bytes: now + one.receipt + one.signature - 1 })).status,
    ).toBe(200);
    const third = await authorize(s, body());
    expect(third.status).toBe(429);
    expect(await rowCount(s, 'receipt_signatures')).toBe(signatures);
    expect(await storedBytes(s)).toBe(now);
  });

  it('an execution signature is counted and never refused, also in its positional form', async () => {
    const s = await seedTenant('sig-exec');
    const a = await authorizedRollback(s);
    const c = await claim(s, a.sha256);
    // Already at the whole quota: the execution receipt and its signature still go in.
    expect((await setQuotas(s.tenant_id, { max_stored_bytes: await storedBytes(s) })).status).toBe(200);
    const signatures = await rowCount(s, 'receipt_signatures');
    const r = await report(s, c.body.operation_id, c.body.fencing_token, observe(a.receipt, 'succeeded'));
    expect(r.status).toBe(200);
    expect(await rowCount(s, 'receipt_signatures')).toBe(signatures + 1);
    const sha = r.body.execution_receipt.sha256 as string;
    const stored = await tenantD1(s)
      .prepare('SELECT envelope FROM receipt_signatures WHERE tenant_id = ? AND receipt_sha256 = ?')
      .bind(s.tenant_id, sha)
      .first<{ envelope: string }>();
    expect(stored?.envelope.startsWith('[')).toBe(true);
  });

  it('reads the kind of either form, and treats any other text as no exempt kind (fail closed)', async () => {
    const s = await seedTenant('sig-forms');
    // Over the 90% tier: only execution and reconciliation signatures are let in.
    expect((await setQuotas(s.tenant_id, { max_stored_bytes: await storedBytes(s) })).status).toBe(200);
    const insert = (envelope: string) =>
      tenantD1(s)
        .prepare(
          'INSERT INTO receipt_signatures (tenant_id, receipt_sha256, envelope, created_at_unix_ms) VALUES (?, ?, ?, 0)',
        )
        .bind(s.tenant_id, crypto.randomUUID(), envelope)
        .run()
        .then(
          () => 'stored',
          (e: unknown) => (/quota_exceeded:stored_bytes/.test(String(e)) ? 'refused' : `error: ${String(e)}`),
        );
    const sig = 'A'.repeat(86) + '==';
    const positional = (version: number, kind: string) =>
      JSON.stringify([version, 1, 'writ.test', '0123456789abcdef', kind, sig, 'AAAAAAAAAAAA']);
    expect(await insert(positional(1, 'execution'))).toBe('stored');
    expect(await insert(positional(1, 'reconciliation'))).toBe('stored');
    expect(await insert('{"receipt_kind":"execution"}')).toBe('stored');
    expect(await insert(positional(1, 'observation'))).toBe('refused');
    expect(await insert(positional(1, 'authorization'))).toBe('refused');
    expect(await insert('{"receipt_kind":"observation"}')).toBe('refused');
    // A layout no writer wrote: its "kind" is not read, so nothing exempts it.
    expect(await insert(positional(2, 'execution'))).toBe('refused');
    expect(await insert(JSON.stringify([1, 'execution']))).toBe('refused');
    expect(await insert('"execution"')).toBe('refused');
    // Not JSON at all: SQLite's json_extract raises, the insert fails either way.
    expect(await insert('[1,')).not.toBe('stored');
  });
});
