/**
 * Issue 9, the documented refusal order (docs/storage.md, "Quotas"): observations are refused
 * once an insert would take usage past 90% of a quota, authorizations only past 100%. The
 * triggers compare `usage + this row > quota * 90 / 100` in integer arithmetic, so the boundary
 * is `floor(quota * 90 / 100)`: an observation that lands exactly on it is stored, one byte (or
 * one receipt) more is `429 quota_exceeded` with nothing written.
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
import { executed, postObservation, rawOutput } from './observation-helpers.js';

async function usage(s: Seeded): Promise<{ bytes: number; today: number }> {
  const u = await call('GET', '/v1/usage', { key: s.admin.api_key });
  expect(u.status).toBe(200);
  return { bytes: u.body.stored_bytes.used as number, today: u.body.receipts_per_day.used as number };
}

/** The tenant's receipt rows, counted on the shard holding it. */
async function receiptCount(s: Seeded): Promise<number> {
  const row = await tenantD1(s)
    .prepare('SELECT count(*) AS n FROM receipts WHERE tenant_id = ?')
    .bind(s.tenant_id)
    .first<{ n: number }>();
  return row?.n ?? 0;
}

/** The smallest quota whose 90% tier (as the trigger computes it) is exactly `limit`. */
function quotaWithNinetyPercentAt(limit: number): number {
  const q = Math.ceil((limit * 100) / 90);
  // Integer arithmetic, as SQLite's `q * 90 / 100` on integers.
  expect(Math.floor((q * 90) / 100)).toBe(limit);
  return q;
}

/** Observations of one execution whose rows have the same size: same-length ids, same payload. */
const sameSize = (s: Seeded, e: Awaited<ReturnType<typeof executed>>, id: string) => ({
  ...rawOutput(s, e),
  observation_id: `obs-tier-${id}`,
});

describe('the 90% observation tier', { timeout: 60_000 }, () => {
  it('of stored bytes: an observation landing exactly on 90% is stored, one byte more is refused', async () => {
    const s = await seedTenant('tier-bytes');
    const e = await executed(s);
    // Measure one observation row (what the usage trigger adds for it).
    const before = await usage(s);
    expect((await postObservation(s, sameSize(s, e, 'a'))).status).toBe(201);
    const rowBytes = (await usage(s)).bytes - before.bytes;
    expect(rowBytes).toBeGreaterThan(200);

    const used = (await usage(s)).bytes;
    const receipts = await receiptCount(s);
    // One byte short of room under 90%: refused, nothing written, usage unchanged.
    expect(
      (await setQuotas(s.tenant_id, { max_stored_bytes: quotaWithNinetyPercentAt(used + rowBytes - 1) }))
        .status,
    ).toBe(200);
    const refused = await postObservation(s, sameSize(s, e, 'b'));
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe('quota_exceeded');
    expect(refused.headers.get('retry-after')).toBe('60');
    expect(await receiptCount(s)).toBe(receipts);
    expect((await usage(s)).bytes).toBe(used);

    // Exactly at 90% after the insert: stored.
    expect(
      (await setQuotas(s.tenant_id, { max_stored_bytes: quotaWithNinetyPercentAt(used + rowBytes) })).status,
    ).toBe(200);
    const stored = await postObservation(s, sameSize(s, e, 'b'));
    expect(stored.status).toBe(201);
    expect((await usage(s)).bytes).toBe(used + rowBytes);
    expect(await receiptCount(s)).toBe(receipts + 1);
    // And the next one, past 90%, is refused.
    expect((await postObservation(s, sameSize(s, e, 'c'))).status).toBe(429);
  });

  it('of receipts per day: refused past 90% while an authorization of an existing run is still stored', async () => {
    const s = await seedTenant('tier-daily');
    const run = await createRun(s, { max_calls: 5 });
    const e = await executed(s);
    const today = (await usage(s)).today;
    expect(today).toBeGreaterThan(0);
    // 90% of the daily quota is one more receipt than today's count.
    const max_receipts_per_day = quotaWithNinetyPercentAt(today + 1);
    expect(max_receipts_per_day).toBeGreaterThan(today + 1);
    expect((await setQuotas(s.tenant_id, { max_receipts_per_day })).status).toBe(200);

    // The receipt that reaches 90% exactly is stored.
    expect((await postObservation(s, rawOutput(s, e))).status).toBe(201);
    expect((await usage(s)).today).toBe(today + 1);
    // One more would pass 90%: refused, with Retry-After until the UTC day ends, nothing written.
    const receipts = await receiptCount(s);
    const refused = await postObservation(s, rawOutput(s, e));
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe('quota_exceeded');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await receiptCount(s)).toBe(receipts);
    // An authorization is refused only at 100%: the existing run still authorizes.
    const body = authorizeBody(s, run, { tool_contract_sha256: s.read_contract_sha256, input: READ_INPUT });
    expect((await authorize(s, body)).status).toBe(200);
    expect(await receiptCount(s)).toBe(receipts + 1);
  });
});
