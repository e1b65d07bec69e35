/**
 * The D1 mirror of the idempotency Durable Objects: the `operations` index and the receipts an
 * operation recorded. The object is the source of truth and calls `mirrorOperation` after every
 * change (and again from its alarm when that write failed), so the index converges.
 *
 * Guarantees: an index row never moves backwards (writes may land out of order, versions do not);
 * receipts are append-only and re-inserting identical content is a no-op.
 */
import { and, eq, inArray, sql } from 'drizzle-orm';
import type { Operation } from '../core/execution/idempotency.js';
import type { Db } from './client.js';
import { insertReceiptStatements, type ReceiptSigner, type TenantReceipt } from './receipts.js';
import { operations, receiptArchiveEntries, receiptSignatures, receipts as receiptRows } from './schema.js';

/**
 * A single-use operation has no client key; its `operations.idempotency_key` is
 * `single-use/<receipt digest>` so the unique (tenant, contract, key) index still holds one row per
 * operation. `/` never occurs in a client key (`IdempotencyKey`), so the two cannot collide.
 */
export const SINGLE_USE_INDEX_PREFIX = 'single-use/';

export function operationIndexKey(
  op: Pick<Operation, 'idempotency_key' | 'authorization_receipt_sha256'>,
): string {
  return op.idempotency_key ?? `${SINGLE_USE_INDEX_PREFIX}${op.authorization_receipt_sha256}`;
}

/** Upsert that never moves the row backwards: D1 writes may land out of order, versions do not. */
function upsertOperationStatement(db: Db, op: Operation) {
  const row = {
    operation_id: op.operation_id,
    tenant_id: op.tenant_id,
    tool_contract_sha256: op.tool_contract_sha256,
    idempotency_key: operationIndexKey(op),
    input_sha256: op.input_sha256,
    state: op.status,
    authorization_receipt_sha256: op.authorization_receipt_sha256,
    execution_receipt_sha256: op.execution_receipt_sha256,
    reconciliation_owner: op.reconciliation_owner,
    reconciliation_deadline_unix_ms: op.reconciliation_deadline_unix_ms,
    escalated_at_unix_ms: op.escalated_at_unix_ms,
    updated_at_unix_ms: op.updated_at_unix_ms,
    reconciliation_receipt_sha256: op.reconciliation_receipt_sha256,
  };
  return db
    .insert(operations)
    .values(row)
    .onConflictDoUpdate({
      target: operations.operation_id,
      set: {
        state: row.state,
        execution_receipt_sha256: row.execution_receipt_sha256,
        reconciliation_owner: row.reconciliation_owner,
        reconciliation_deadline_unix_ms: row.reconciliation_deadline_unix_ms,
        escalated_at_unix_ms: row.escalated_at_unix_ms,
        updated_at_unix_ms: row.updated_at_unix_ms,
        reconciliation_receipt_sha256: row.reconciliation_receipt_sha256,
      },
      setWhere: sql`${operations.tenant_id} = ${row.tenant_id} AND ${operations.updated_at_unix_ms} < excluded.updated_at_unix_ms`,
    });
}

/**
 * Mirror one operation and its receipts (signed, issue 11) in one batch. Throws when D1 fails or
 * a receipt D1 does not hold yet cannot be signed (the object retries from its alarm).
 *
 * Every receipt is signed again (deterministic: the same row) and re-inserted as a no-op, so the
 * usual mirror is one D1 round trip. When that signing fails, a receipt D1 already holds (its row,
 * its signature row, or its archive entry) was mirrored by an earlier change and is left out, then
 * the rest are signed. After a key rotation the active key cannot sign a receipt dated before its
 * window (nor should it: the receipt keeps the signature it was issued with), and a receipt stored
 * before receipts were signed (migration 0005) predates every key's window: re-signing either
 * would fail every later mirror of the operation (its reconciliation never reaching D1). Such a
 * pre-signature receipt stays as it was stored, unsigned and outside the log. That costs one more
 * read, only then.
 */
export async function mirrorOperation(
  db: Db,
  sign: ReceiptSigner,
  op: Operation,
  receipts: readonly TenantReceipt[],
): Promise<void> {
  let inserts;
  try {
    inserts = await insertReceiptStatements(db, sign, ...receipts);
  } catch {
    // Nothing was written: signing happens before any statement is built. A receipt that is still
    // unsigned and cannot be signed now fails again here, and the object retries.
    const fresh = await unstoredReceipts(db, op.tenant_id, receipts);
    inserts = await insertReceiptStatements(db, sign, ...fresh);
  }
  await db.batch([upsertOperationStatement(db, op), ...inserts]);
}

/**
 * The receipts D1 holds nothing of: no receipt row, no signature row (by the unique (tenant,
 * receipt) index) and no archive entry (retention moved the row to R2). One round trip.
 */
async function unstoredReceipts(
  db: Db,
  tenant_id: string,
  receipts: readonly TenantReceipt[],
): Promise<readonly TenantReceipt[]> {
  if (receipts.length === 0) return receipts;
  const wanted = receipts.map((r) => r.receipt.sha256);
  const [rows, signed, archived] = await db.batch([
    db
      .select({ sha256: receiptRows.sha256 })
      .from(receiptRows)
      .where(and(eq(receiptRows.tenant_id, tenant_id), inArray(receiptRows.sha256, wanted))),
    db
      .select({ sha256: receiptSignatures.receipt_sha256 })
      .from(receiptSignatures)
      .where(
        and(eq(receiptSignatures.tenant_id, tenant_id), inArray(receiptSignatures.receipt_sha256, wanted)),
      ),
    db
      .select({ sha256: receiptArchiveEntries.sha256 })
      .from(receiptArchiveEntries)
      .where(
        and(eq(receiptArchiveEntries.tenant_id, tenant_id), inArray(receiptArchiveEntries.sha256, wanted)),
      ),
  ]);
  const have = new Set([...rows, ...signed, ...archived].map((r) => r.sha256));
  return receipts.filter((r) => !have.has(r.receipt.sha256));
}
