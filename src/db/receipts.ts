/**
 * Receipt rows shared by the tenant store and the idempotency object's index mirror. Receipts
 * are append-only (a trigger refuses update and delete) and stored under the issuing tenant, so
 * another tenant's receipt is not found.
 */
import { and, eq } from 'drizzle-orm';
import { digestOf } from '../core/canonical/canonical.js';
import type { AuthorizationReceiptBody, ToolApproval, ToolInvocation } from '../core/model.js';
import type { NewReceipt, StoredReceipt } from '../services/ports.js';
import type { Db } from './client.js';
import { parseStoredJson, toCanonicalText } from './documents.js';
import { receipts } from './schema.js';

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
 */
export function insertReceiptStatements(db: Db, ...items: readonly TenantReceipt[]) {
  return items.map((r) => {
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
  });
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
