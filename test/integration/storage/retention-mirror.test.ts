/**
 * Review 7: an archived receipt must stay archived. The idempotency object mirrors its
 * operation's receipts into D1 after every change (docs/idempotency.md); an operation reconciled
 * after its execution receipt was archived must not bring that receipt back into D1 (counted
 * twice against the quota), and retention must not then fail for the whole shard trying to
 * archive it a second time.
 */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { runRetention } from '../../../src/platform/bindings.js';
import { setQuotas, tenantD1 } from '../platform/harness.js';
import {
  authorizedRollback,
  call,
  claim,
  observe,
  reconcile,
  report,
  seedTenant,
} from '../executions/helpers.js';

const SLOW_MS = 60_000;
const DAY_MS = 86_400_000;

describe('retention and the operation mirror', { timeout: SLOW_MS }, () => {
  it('a reconciliation after archiving neither resurrects the archived execution receipt nor blocks retention', async () => {
    const s = await seedTenant('retention-mirror');
    const a = await authorizedRollback(s);
    const c = await claim(s, a.sha256);
    const id = c.body.operation_id as string;
    const ind = await report(s, id, c.body.fencing_token, observe(a.receipt, 'indeterminate'));
    expect(ind.status).toBe(200);
    const execution = ind.body.execution_receipt.sha256 as string;

    expect((await setQuotas(s.tenant_id, { receipt_retention_days: 1 })).status).toBe(200);
    await runRetention(env, Date.now() + 2 * DAY_MS);
    const live = async (sha: string) =>
      (
        await tenantD1(s)
          .prepare('SELECT count(*) AS n FROM receipts WHERE tenant_id = ? AND sha256 = ?')
          .bind(s.tenant_id, sha)
          .first<{ n: number }>()
      )?.n ?? -1;
    expect(await live(execution)).toBe(0);
    const bytes = async () =>
      (
        await tenantD1(s)
          .prepare('SELECT stored_bytes FROM tenant_quotas WHERE tenant_id = ?')
          .bind(s.tenant_id)
          .first<{ stored_bytes: number }>()
      )?.stored_bytes ?? -1;
    const before = await bytes();

    // A human reconciles the operation later; the object mirrors it (and its receipts) into D1.
    const rec = await reconcile(s, id, observe(a.receipt, 'succeeded'), s.admin.api_key);
    expect(rec.status).toBe(201);
    const reconciliation = rec.body.reconciliation_receipt.sha256 as string;
    expect(await live(reconciliation)).toBe(1);
    // The archived execution receipt stays archived (one copy, counted once) and still reads.
    expect(await live(execution)).toBe(0);
    const got = await call('GET', `/v1/receipts/${execution}`, { key: s.admin.api_key });
    expect(got.status).toBe(200);
    const reconciliationRow = await tenantD1(s)
      .prepare(
        `SELECT length(CAST(receipt AS BLOB)) + coalesce(length(CAST(evidence AS BLOB)), 0) + coalesce(evidence_bytes, 0) + 200 AS n
         FROM receipts WHERE tenant_id = ? AND sha256 = ?`,
      )
      .bind(s.tenant_id, reconciliation)
      .first<{ n: number }>();
    const signature = await tenantD1(s)
      .prepare(
        'SELECT sum(length(CAST(envelope AS BLOB)) + 200) AS n FROM receipt_signatures WHERE tenant_id = ? AND receipt_sha256 = ?',
      )
      .bind(s.tenant_id, reconciliation)
      .first<{ n: number }>();
    expect(await bytes()).toBe(before + (reconciliationRow?.n ?? 0) + (signature?.n ?? 0));

    // Retention keeps working for this shard.
    await expect(runRetention(env, Date.now() + 4 * DAY_MS)).resolves.toMatchObject({
      more: false,
      failed: 0,
    });
    expect(await live(reconciliation)).toBe(0);
  });
});

describe('retention over a receipt already archived', { timeout: SLOW_MS }, () => {
  it('archives a row that is back in D1 (written before the guard) without failing the run', async () => {
    const s = await seedTenant('retention-again');
    const a = await authorizedRollback(s);
    const db = tenantD1(s);
    const saved = await db
      .prepare('SELECT * FROM receipts WHERE tenant_id = ? AND sha256 = ?')
      .bind(s.tenant_id, a.sha256)
      .first<Record<string, unknown>>();
    expect(saved).not.toBeNull();
    expect((await setQuotas(s.tenant_id, { receipt_retention_days: 1 })).status).toBe(200);
    await runRetention(env, Date.now() + 2 * DAY_MS);
    // The row as an earlier mirror brought it back (before inserts checked for an archive entry).
    const columns = Object.keys(saved ?? {});
    await db
      .prepare(`INSERT INTO receipts (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`)
      .bind(...columns.map((c) => saved?.[c] ?? null))
      .run();

    await expect(runRetention(env, Date.now() + 4 * DAY_MS)).resolves.toMatchObject({
      more: false,
      failed: 0,
    });
    const left = await db
      .prepare('SELECT count(*) AS n FROM receipts WHERE tenant_id = ?')
      .bind(s.tenant_id)
      .first<{ n: number }>();
    expect(left?.n).toBe(0);
    const got = await call('GET', `/v1/receipts/${a.sha256}`, { key: s.admin.api_key });
    expect(got.status).toBe(200);
    expect(got.body.replay).toEqual({ ok: true, differences: [] });
  });
});
