/**
 * Rows of an older export for the tests of moving one (older-exports.test.ts,
 * move-interactions.test.ts): a stored reconciliation receipt (encoding 1) and an operation row,
 * as migrations/0009's back-fill reads them, and the file's text.
 */
import { canonicalize, digestOf } from '../../../src/core/canonical/canonical.js';
import type { Seeded } from '../../../scripts/seed.js';
import { movedEvidenceText } from '../../../src/db/evidence-encoding.js';
import { decodeReceipt } from '../../../src/db/receipts.js';

export type Row = Record<string, string | number | null>;

export const toText = (rows: readonly { table: string; row: Row }[]) =>
  rows.map((r) => `${canonicalize({ row: r.row, table: r.table })}\n`).join('');

/** A stored reconciliation receipt row (encoding 1, `{sha256, body}`) for `operation_id`. */
export function reconciliation(s: Seeded, operation_id: unknown, at: number, nonce: number): Row {
  const body = {
    kind: 'reconciliation',
    operation_id,
    tenant_id: s.tenant_id,
    principal_id: s.executor.principal_id,
    nonce,
  };
  const sha256 = digestOf(body);
  return {
    tenant_id: s.tenant_id,
    sha256,
    kind: 'reconciliation',
    receipt: canonicalize({ body, sha256 }),
    evidence: null,
    outcome: 'succeeded',
    principal_id: s.executor.principal_id,
    created_at_unix_ms: at,
    observation_id: null,
    observation_raw_sha256: null,
    observation_claim: null,
    receipt_encoding: 1,
    evidence_sha256: null,
    evidence_bytes: null,
  };
}

export function operation(s: Seeded, operation_id: string, state: string, settled: string | null): Row {
  return {
    operation_id,
    tenant_id: s.tenant_id,
    tool_contract_sha256: s.rollback_contract_sha256,
    idempotency_key: `key-${operation_id}`,
    input_sha256: '0'.repeat(64),
    state,
    authorization_receipt_sha256: 'a'.repeat(64),
    execution_receipt_sha256: null,
    reconciliation_owner: null,
    reconciliation_deadline_unix_ms: null,
    escalated_at_unix_ms: null,
    updated_at_unix_ms: 1_700_000_000_000,
    reconciliation_receipt_sha256: settled,
  };
}

/** The receipt `{sha256, body}` an exported receipts row holds, decoded as the reader decodes it. */
export function receiptOfRow(row: Readonly<Record<string, unknown>>) {
  return decodeReceipt({
    tenant_id: String(row.tenant_id),
    sha256: String(row.sha256),
    kind: String(row.kind),
    principal_id: row.principal_id as string | null,
    receipt: String(row.receipt),
    receipt_encoding: Number(row.receipt_encoding),
  });
}

/**
 * A stored receipts row with its evidence as an export carries it. An import stores authorization
 * evidence positionally again (src/db/evidence-encoding.ts): the row must hold an array, which
 * reads as the exported object; every other column is as stored.
 */
export function asExported(row: Row): Row {
  if (row.kind !== 'authorization' || typeof row.evidence !== 'string') return row;
  if (!row.evidence.startsWith('['))
    throw new Error(`authorization evidence not re-encoded: ${row.evidence}`);
  const body = () => receiptOfRow(row).body;
  return {
    ...row,
    evidence: movedEvidenceText({ kind: 'authorization', evidence: row.evidence, body }, 'object'),
  };
}

/**
 * A row of today's export as a database from before 0004 holds it after migrating: every receipt
 * wrapped (encoding 1), the 0004/0007 columns at what those migrations wrote.
 */
export function asStoredBefore0004({ table, row }: { table: string; row: Row }): { table: string; row: Row } {
  if (table === 'receipts') {
    return { table, row: { ...row, receipt: canonicalize(receiptOfRow(row)), receipt_encoding: 1 } };
  }
  if (table === 'approvals')
    return {
      table,
      row: {
        ...row,
        first_approved_by: null,
        first_approved_at_unix_ms: null,
        first_approval_lifetime_ms: null,
        idempotency_key: null,
      },
    };
  if (table === 'tenant_quotas') return { table, row: { ...row, receipt_retention_days: 90 } };
  return { table, row };
}
