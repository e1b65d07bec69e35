/**
 * Receipt rows shared by the tenant store and the idempotency object's index mirror. Receipts
 * are append-only (a trigger refuses update and delete) and stored under the issuing tenant, so
 * another tenant's receipt is not found.
 *
 * Every receipt is written with its signature envelope (issue 11, `receipt_signatures`) in the
 * same batch: the statements below sign before they are built, so a receipt that cannot be signed
 * is never written (the signer throws, and no statement reaches D1).
 */
import { and, asc, eq, gt, sql } from 'drizzle-orm';
import { canonicalize, digestOf } from '../core/canonical/canonical.js';
import type { SignableReceipt, SignatureEnvelope } from '../core/receipts/signing.js';
import type { AuthorizationReceiptBody, ToolApproval, ToolInvocation } from '../core/model.js';
import type { NewReceipt, SignatureRow, StoredReceipt } from '../services/ports.js';
import type { Db } from './client.js';
import { parseStoredJson, toCanonicalText } from './documents.js';
import { receipts, receiptSignatures } from './schema.js';

/**
 * Signs one receipt at its issue time, or throws (a missing or unusable key ring): the caller
 * then writes nothing. Deterministic (Ed25519): the same receipt, key and time give the same
 * envelope, so a retried write (the idempotency object's mirror) produces the same row.
 */
export type ReceiptSigner = (
  receipt: SignableReceipt,
  issued_at_unix_ms: number,
) => Promise<SignatureEnvelope>;

export type TenantReceipt = NewReceipt & {
  readonly tenant_id: string;
  /** Observation receipts only: the indexed id columns (see `receipts.observation_claim`). */
  readonly observation?: {
    readonly observation_id: string;
    readonly raw_sha256: string;
    readonly claim: string | null;
  };
};

/**
 * Insert statements for `db.batch([...])`, so a receipt is written in the same transaction as the
 * state change it records. Re-inserting identical content is a no-op (same digest, same bytes).
 * Per receipt: the receipt insert first (its result is the caller's "stored or not"), then its
 * signature row, inserted only if the receipt row exists after the first statement (a receipt
 * refused by a unique index, such as an observation id another receipt holds, gets no signature
 * row and so never reaches the log), and only once per receipt.
 */
export async function insertReceiptStatements(
  db: Db,
  sign: ReceiptSigner,
  ...items: readonly TenantReceipt[]
) {
  // Sign everything before building any statement: a signer failure leaves nothing to run.
  const signed = await Promise.all(
    items.map(async (r) => ({
      r,
      envelope: await sign(
        { sha256: r.receipt.sha256, body: r.receipt.body as SignableReceipt['body'] },
        r.created_at_unix_ms,
      ),
    })),
  );
  return signed.flatMap(({ r, envelope }) => [
    insertReceiptStatement(db, r),
    insertSignatureStatement(db, r, envelope),
  ]);
}

function insertSignatureStatement(db: Db, r: TenantReceipt, envelope: SignatureEnvelope) {
  // A signature that names another receipt, tenant or time would be a log leaf for nothing stored.
  if (
    envelope.receipt_sha256 !== r.receipt.sha256 ||
    envelope.tenant_id !== r.tenant_id ||
    envelope.issued_at_unix_ms !== r.created_at_unix_ms
  ) {
    throw new Error(`signature of receipt ${r.receipt.sha256} does not match it`);
  }
  // Columns in table order (`seq` NULL: the next AUTOINCREMENT value). The WHERE clause also
  // keeps SQLite from reading ON CONFLICT as part of the SELECT.
  return db
    .insert(receiptSignatures)
    .select(
      sql`SELECT NULL, ${r.tenant_id}, ${r.receipt.sha256}, ${canonicalize(envelope)}, ${r.created_at_unix_ms}
        WHERE EXISTS (SELECT 1 FROM ${receipts} WHERE ${receipts.tenant_id} = ${r.tenant_id} AND ${receipts.sha256} = ${r.receipt.sha256})`,
    )
    .onConflictDoNothing();
}

function insertReceiptStatement(db: Db, r: TenantReceipt) {
  // A receipt whose identity is not its body's digest would be unverifiable evidence.
  if (digestOf(r.receipt.body) !== r.receipt.sha256) {
    throw new Error(`receipt ${r.receipt.sha256} does not hash to its identity`);
  }
  return db
    .insert(receipts)
    .values({
      tenant_id: r.tenant_id,
      sha256: r.receipt.sha256,
      kind: r.kind,
      receipt: toCanonicalText({ sha256: r.receipt.sha256, body: r.receipt.body }),
      evidence: r.evidence === undefined || r.evidence === null ? null : toCanonicalText(r.evidence),
      outcome: r.outcome,
      principal_id: r.principal_id ?? null,
      created_at_unix_ms: r.created_at_unix_ms,
      observation_id: r.observation?.observation_id ?? null,
      observation_raw_sha256: r.observation?.raw_sha256 ?? null,
      observation_claim: r.observation?.claim ?? null,
    })
    .onConflictDoNothing();
}

/** The tenant's signature rows after `after_seq`, in `seq` order, at most `limit`. */
export async function signatureRowsAfter(
  db: Db,
  tenant_id: string,
  after_seq: number,
  limit: number,
): Promise<readonly SignatureRow[]> {
  return db
    .select({
      seq: receiptSignatures.seq,
      receipt_sha256: receiptSignatures.receipt_sha256,
      envelope: receiptSignatures.envelope,
    })
    .from(receiptSignatures)
    .where(and(eq(receiptSignatures.tenant_id, tenant_id), gt(receiptSignatures.seq, after_seq)))
    .orderBy(asc(receiptSignatures.seq))
    .limit(limit);
}

/** The signature row of the tenant's receipt with this digest, or null. */
export async function signatureRowOf(
  db: Db,
  tenant_id: string,
  sha256: string,
): Promise<SignatureRow | null> {
  const row = await db
    .select({
      seq: receiptSignatures.seq,
      receipt_sha256: receiptSignatures.receipt_sha256,
      envelope: receiptSignatures.envelope,
    })
    .from(receiptSignatures)
    .where(and(eq(receiptSignatures.tenant_id, tenant_id), eq(receiptSignatures.receipt_sha256, sha256)))
    .get();
  return row ?? null;
}

/** The tenant's receipt with this digest, or null (also for another tenant's receipt). */
export async function getReceiptRow(
  db: Db,
  tenant_id: string,
  sha256: string,
): Promise<StoredReceipt | null> {
  const row = await db
    .select()
    .from(receipts)
    .where(and(eq(receipts.tenant_id, tenant_id), eq(receipts.sha256, sha256)))
    .get();
  if (row === undefined) return null;
  const receipt = parseStoredJson('receipt', row.receipt) as StoredReceipt['receipt'];
  return {
    tenant_id: row.tenant_id,
    sha256: row.sha256,
    kind: row.kind,
    receipt,
    evidence: row.evidence === null ? null : parseStoredJson('receipt evidence', row.evidence),
    outcome: row.outcome,
    principal_id: row.principal_id,
    created_at_unix_ms: row.created_at_unix_ms,
  };
}

/**
 * The invocation an authorization receipt was computed from, rebuilt from the receipt body (which
 * carries every invocation field but the approval, of which it keeps the id) and the approval.
 * Sound by construction: the body binds `invocation_sha256`, so a rebuilt invocation is only ever
 * used when it hashes to that digest (checked on write, and by replay).
 */
export function invocationFromReceiptBody(
  body: AuthorizationReceiptBody,
  approval: ToolApproval | null,
): ToolInvocation {
  return {
    invocation_id: body.invocation_id,
    run_envelope_sha256: body.run_envelope_sha256,
    tenant_id: body.tenant_id,
    principal_id: body.principal_id,
    policy_sha256: body.policy_sha256,
    tool_contract_sha256: body.tool_contract_sha256,
    input_sha256: body.input_sha256,
    input_bytes: body.input_bytes,
    target: body.target,
    requested_at_unix_ms: body.requested_at_unix_ms,
    idempotency_key: body.idempotency_key,
    approval,
  };
}
