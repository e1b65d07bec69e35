/**
 * What crosses the `OperationsPort` (the idempotency Durable Object's RPC surface): requests are
 * strict schemas the object re-parses on arrival, results are plain structured-cloned data.
 * Shared by the service that calls the port and the object that answers it.
 */
import { z } from 'zod';
import {
  type ClaimRefusal,
  FencingToken,
  type OperationView,
  type ReconcileRefusal,
  type ReportRefusal,
} from '../core/execution/idempotency.js';
import { ReconciliationReceipt } from '../core/execution/reconciliation.js';
import { ExecutionReceipt, IdempotencyKey, ToolExecutionObservation } from '../core/model.js';
import { Count, Identifier, Sha256, UnixMs, strict } from '../core/schema.js';

const Duration = z.number().int().min(1).max(Number.MAX_SAFE_INTEGER);

export const ClaimRequest = strict({
  operation_id: Sha256,
  tenant_id: Identifier,
  tool_contract_sha256: Sha256,
  tool_name: Identifier,
  idempotency_key: IdempotencyKey.nullable(),
  input_sha256: Sha256,
  authorization_receipt_sha256: Sha256,
  principal_id: Identifier,
  lease_ms: Duration,
  reconciliation_owner: Identifier,
  reconciliation_window_ms: Duration,
  now: UnixMs,
});
export type ClaimRequest = z.infer<typeof ClaimRequest>;

export const ReportRequest = strict({
  tenant_id: Identifier,
  principal_id: Identifier,
  fencing_token: FencingToken,
  execution_receipt: ExecutionReceipt,
  observation: ToolExecutionObservation,
  now: UnixMs,
});
export type ReportRequest = z.infer<typeof ReportRequest>;

export const ReconcileRequest = strict({
  tenant_id: Identifier,
  principal_id: Identifier,
  reconciliation_receipt: ReconciliationReceipt,
  observation: ToolExecutionObservation,
  /**
   * The policy's clock skew the receipt was computed with: kept in the receipt's evidence (it is
   * the policy's of that moment, named nowhere else), so its offline bundle can recompute it.
   */
  max_clock_skew_ms: Count,
  now: UnixMs,
});
export type ReconcileRequest = z.infer<typeof ReconcileRequest>;

/** The operation as anyone but its owner may see it, with the receipts it links. */
export interface OperationSnapshot {
  readonly operation: OperationView;
  readonly execution_receipt: ExecutionReceipt | null;
  readonly reconciliation_receipt: ReconciliationReceipt | null;
}

export type ClaimResult =
  | {
      readonly outcome: 'proceed';
      readonly operation: OperationView;
      readonly fencing_token: string;
      readonly lease_expires_at_unix_ms: number;
    }
  | ({ readonly outcome: 'replay' } & OperationSnapshot)
  // `idempotency_key_reused` carries no operation: nothing about the other input leaves the object.
  | { readonly outcome: 'refused'; readonly reason: ClaimRefusal; readonly operation: OperationView | null };

export type ReportResult =
  | ({ readonly outcome: 'recorded' | 'replay' } & OperationSnapshot)
  | { readonly outcome: 'refused'; readonly reason: ReportRefusal };

export type ReconcileResult =
  | ({ readonly outcome: 'recorded' | 'replay' } & OperationSnapshot)
  | { readonly outcome: 'refused'; readonly reason: ReconcileRefusal };
