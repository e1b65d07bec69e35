/**
 * A stored approval request as the `ToolApproval` an authorization binds.
 *
 * Guarantees: only a decided-and-approved request (approved, or approved then consumed) with its
 * approver and expiry set becomes a `ToolApproval`; anything else is null, so a pending or denied
 * request can never be presented as an approval. A request approved by two approvers (an
 * `irreversible` effect, issue 14) binds both: the first as `first_approver_principal_id`.
 * Never: invents an approver, an expiry or an effect.
 */
import type { ToolApproval, ToolEffect } from '../model.js';

export interface StoredApprovalFields {
  readonly approval_id: string;
  readonly tenant_id: string;
  readonly policy_sha256: string;
  readonly tool_contract_sha256: string;
  readonly input_sha256: string;
  readonly effect: string;
  readonly status: 'pending' | 'approved' | 'denied' | 'consumed';
  readonly decided_by: string | null;
  readonly expires_at_unix_ms: number | null;
  /** The first of two approvers (migration 0007); absent or null for a single approval. */
  readonly first_approved_by?: string | null;
}

export function toToolApproval(a: StoredApprovalFields): ToolApproval | null {
  if (
    (a.status !== 'approved' && a.status !== 'consumed') ||
    a.decided_by === null ||
    a.expires_at_unix_ms === null
  ) {
    return null;
  }
  return {
    approval_id: a.approval_id,
    approver_principal_id: a.decided_by,
    tenant_id: a.tenant_id,
    policy_sha256: a.policy_sha256,
    tool_contract_sha256: a.tool_contract_sha256,
    input_sha256: a.input_sha256,
    // Stored from a validated contract's effect when the request was made.
    effect: a.effect as ToolEffect,
    expires_at_unix_ms: a.expires_at_unix_ms,
    ...(a.first_approved_by === undefined || a.first_approved_by === null
      ? {}
      : { first_approver_principal_id: a.first_approved_by }),
  };
}
