/**
 * Exports taken before a later migration added a column to a moved table
 * (src/services/tenant-moves.ts `MIGRATED_COLUMNS`): a row lacking exactly such a column is
 * filled as the migration filled it (a default, NULL, or migrations/0009's back-fill from the
 * file's own receipts) and yields the rows of the full export; any other missing column, and a
 * back-fill that cannot be done faithfully, still refuse the whole import.
 */
import { env } from 'cloudflare:workers';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalize } from '../../../src/core/canonical/canonical.js';
import { tenantMovePort } from '../../../src/platform/bindings.js';
import type { TenantMovePort, TenantRow } from '../../../src/services/ports.js';
import { MIGRATED_COLUMNS, importTenant, rowsToWrite } from '../../../src/services/tenant-moves.js';
import { type Row, asExported, asStoredBefore0004, operation, reconciliation, toText } from './older-rows.js';
import {
  READ_INPUT,
  approvedApproval,
  authorize,
  countedStoredBytes,
  createRun,
  exportTenant,
  seedTenant,
  shardD1,
  shardOf,
} from './harness.js';

const noLog = () => undefined;
const parse = (text: string) =>
  text
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as { table: string; row: Row });

/**
 * A real tenant's export (receipts, signatures, an approval, runs), shaped as a database from
 * before 0004 holds it after migrating: every receipt wrapped (encoding 1), the 0004/0007 columns
 * at what those migrations wrote, plus reconciled operations whose `reconciliation_receipt_sha256`
 * is what 0009's back-fill computes (the first reconciliation receipt by time, then digest).
 */
async function fullExport(prefix: string) {
  const s = await seedTenant(prefix);
  const r = await authorize(s, {
    tool_contract_sha256: s.read_contract_sha256,
    input: READ_INPUT,
    run_id: await createRun(s),
  });
  expect(r.status).toBe(200);
  await approvedApproval(s);
  const e = await exportTenant(s.tenant_id, true);
  expect(e.status).toBe(200);
  const parsed = parse(e.text);
  for (const { row } of parsed.filter((x) => x.table === 'receipts')) expect(row.evidence_sha256).toBeNull();
  const rows = parsed.map(asStoredBefore0004);
  expect(rows.some((x) => x.table === 'approvals')).toBe(true);
  // Two reconciliations of op-1 (the earlier one settles it), none of op-3; op-2 is not reconciled.
  // Operation ids are unique across tenants (the tests import several tenants onto one shard).
  const op = (n: number) => `${prefix}-op-${n}`;
  const late = reconciliation(s, op(1), 2_000, 1);
  const early = reconciliation(s, op(1), 1_000, 2);
  const other = reconciliation(s, op(2), 500, 3);
  const lastReceipt = rows.map((x) => x.table).lastIndexOf('receipts');
  rows.splice(lastReceipt + 1, 0, ...[late, early, other].map((row) => ({ table: 'receipts', row })));
  rows.push(
    { table: 'operations', row: operation(s, op(1), 'reconciled_succeeded', early.sha256 as string) },
    { table: 'operations', row: operation(s, op(2), 'executed_succeeded', null) },
    { table: 'operations', row: operation(s, op(3), 'reconciled_no_effect', null) },
  );
  return { s, rows, text: toText(rows), op };
}

/** The file without `columns` (each `table.column`) in any row. */
function without(rows: readonly { table: string; row: Row }[], columns: readonly string[]): string {
  return toText(
    rows.map(({ table, row }) => ({
      table,
      row: Object.fromEntries(Object.entries(row).filter(([c]) => !columns.includes(`${table}.${c}`))),
    })),
  );
}

const port = () => tenantMovePort(env);
const verified = (text: string): Promise<TenantRow[]> => rowsToWrite(port(), text);

describe('an export taken before a migration added a column', () => {
  it('each allow-listed column removed yields the rows of the full export', async () => {
    const { rows, text } = await fullExport('older-each');
    const full = await verified(text);
    expect(MIGRATED_COLUMNS.length).toBe(9);
    for (const m of MIGRATED_COLUMNS) {
      const older = without(rows, [`${m.table}.${m.column}`]);
      expect(older).not.toBe(text);
      expect(await verified(older)).toEqual(full);
    }
  });

  it('all of them removed: imports, and the target holds the rows of the full export', async () => {
    const { s, rows } = await fullExport('older-all');
    const to = 1 - shardOf(s);
    const older = without(
      rows,
      MIGRATED_COLUMNS.map((m) => `${m.table}.${m.column}`),
    );
    const imported = await importTenant(port(), to, older, Date.now(), noLog);
    expect(imported.rows).toBe(rows.length);
    const stored = async (table: string, order: string) =>
      (
        await shardD1(to)
          .prepare(`SELECT * FROM ${table} WHERE tenant_id = ? ORDER BY ${order}`)
          .bind(s.tenant_id)
          .all<Row>()
      ).results;
    const expected = (table: string, key: string) =>
      rows
        .filter((r) => r.table === table)
        .map((r) => r.row)
        .sort((a, b) => String(a[key]).localeCompare(String(b[key])));
    expect((await stored('receipts', 'sha256')).map(asExported)).toEqual(expected('receipts', 'sha256'));
    expect(await stored('approvals', 'approval_id')).toEqual(expected('approvals', 'approval_id'));
    expect(await stored('operations', 'operation_id')).toEqual(expected('operations', 'operation_id'));
    // The quota row as exported, but for its usage counter: the target's triggers' count of the rows
    // it stores (import-stored-bytes.test.ts). This file's counter is the source's of rows it did not
    // hold in these forms (re-wrapped receipts, added reconciliations).
    const counted = await countedStoredBytes(to, s.tenant_id);
    expect(await stored('tenant_quotas', 'tenant_id')).toEqual(
      expected('tenant_quotas', 'tenant_id').map((q) => ({ ...q, stored_bytes: counted })),
    );
  });

  it('a resumed import still back-fills: the receipts it skips are read for 0009', async () => {
    const { s, rows } = await fullExport('older-resume');
    const to = 1 - shardOf(s);
    const older = without(rows, ['operations.reconciliation_receipt_sha256']);
    const firstOperation = rows.findIndex((r) => r.table === 'operations');
    expect(rows.slice(0, firstOperation).some((r) => r.row.kind === 'reconciliation')).toBe(true);
    // One row a chunk; the chunk of the first operation fails, so the retry resumes there and
    // skips every receipt, the reconciliations included.
    const real = port();
    let chunks = 0;
    const failing: TenantMovePort = {
      ...real,
      async importChunk(shard, staged, chunk, now) {
        chunks += 1;
        if (chunks === firstOperation + 1) throw new Error('injected failure at the first operation');
        return real.importChunk(shard, staged, chunk, now);
      },
    };
    await expect(importTenant(failing, to, older, Date.now(), noLog, { chunk_rows: 1 })).rejects.toThrow(
      /injected failure/,
    );
    const imported = await importTenant(real, to, older, Date.now(), noLog, { chunk_rows: 1 });
    expect(imported.rows).toBe(rows.length);
    const stored = (
      await shardD1(to)
        .prepare('SELECT * FROM operations WHERE tenant_id = ? ORDER BY operation_id')
        .bind(s.tenant_id)
        .all<Row>()
    ).results;
    const expected = rows
      .filter((r) => r.table === 'operations')
      .map((r) => r.row)
      .sort((a, b) => String(a.operation_id).localeCompare(String(b.operation_id)));
    expect(expected.some((r) => typeof r.reconciliation_receipt_sha256 === 'string')).toBe(true);
    expect(stored).toEqual(expected);
  });

  it('a compact receipt (after 0004, before 0009) is read as 0009 read it', async () => {
    const { s, rows, op } = await fullExport('older-compact');
    // op-1's settling receipt re-stored compact: the stored text is the body itself, less the
    // tenant and principal (0009 reads `$.operation_id` then).
    const compact = rows.map(({ table, row }) => {
      if (table !== 'receipts' || row.kind !== 'reconciliation') return { table, row };
      const { body } = JSON.parse(String(row.receipt)) as { body: Record<string, unknown> };
      const { tenant_id: _t, principal_id: _p, ...rest } = body;
      return { table, row: { ...row, receipt: canonicalize(rest), receipt_encoding: 2 } };
    });
    const full = await verified(toText(compact));
    const op1 = full.find((r) => r.table === 'operations' && r.row.operation_id === op(1));
    expect(op1?.row.reconciliation_receipt_sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(await verified(without(compact, ['operations.reconciliation_receipt_sha256']))).toEqual(full);
    expect(s.tenant_id).toBe(op1?.row.tenant_id);
  });
});

describe('an older export is still refused whole', () => {
  const refused = /^import refused, nothing written/;

  it('when a column not on the list is missing', async () => {
    const { rows } = await fullExport('older-missing');
    for (const column of ['receipts.kind', 'receipts.observation_id', 'operations.state', 'tenants.name'])
      await expect(verified(without(rows, [column]))).rejects.toThrow(/missing column/);
  });

  it('when rows of one table disagree on the columns they lack', async () => {
    const { rows } = await fullExport('older-mixed');
    let first = true;
    const mixed = rows.map(({ table, row }) => {
      if (table !== 'operations' || !first) return { table, row };
      first = false;
      const { reconciliation_receipt_sha256: _dropped, ...rest } = row;
      return { table, row: rest };
    });
    await expect(verified(toText(mixed))).rejects.toThrow(/differ in the columns they lack/);
  });

  it('when the back-fill cannot be computed as 0009 did', async () => {
    const { s, rows, op } = await fullExport('older-unfaithful');
    const stripped = parse(without(rows, ['operations.reconciliation_receipt_sha256']));
    // A receipt after the operations it would have settled: the back-fill would have missed it.
    const late = [...stripped, { table: 'receipts', row: reconciliation(s, op(3), 10, 4) }];
    await expect(verified(toText(late))).rejects.toThrow(refused);
    // A reconciliation naming a number: SQL would have compared it by text affinity.
    const numeric = [...stripped];
    numeric.splice(stripped.map((x) => x.table).lastIndexOf('receipts') + 1, 0, {
      table: 'receipts',
      row: reconciliation(s, 7, 10, 5),
    });
    await expect(verified(toText(numeric))).rejects.toThrow(/non-text operation/);
    // With the column present, the same receipt is only a receipt: nothing is back-filled.
    const present = [...rows];
    present.splice(rows.map((x) => x.table).lastIndexOf('receipts') + 1, 0, {
      table: 'receipts',
      row: reconciliation(s, 7, 10, 5),
    });
    expect(await verified(toText(present))).toHaveLength(rows.length + 1);
  });

  it('property: any set of columns removed is accepted exactly when every one is on the list', async () => {
    const { rows, text } = await fullExport('older-property');
    const full = await verified(text);
    const allowed = new Set(MIGRATED_COLUMNS.map((m) => `${m.table}.${m.column}`));
    const every = [...new Set(rows.flatMap((r) => Object.keys(r.row).map((c) => `${r.table}.${c}`)))].sort();
    const listed = every.filter((c) => allowed.has(c));
    const others = every.filter((c) => !allowed.has(c));
    expect(listed).toHaveLength(MIGRATED_COLUMNS.length);
    await fc.assert(
      fc.asyncProperty(fc.subarray(listed), fc.subarray(others, { maxLength: 2 }), async (fill, missing) => {
        const older = without(rows, [...fill, ...missing]);
        if (missing.length === 0) expect(await verified(older)).toEqual(full);
        else
          await expect(verified(older)).rejects.toThrow(/^import refused, nothing written: .*missing column/);
      }),
      { numRuns: 60 },
    );
  });
});
