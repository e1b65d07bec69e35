/**
 * The typed failures of every service, whatever door called it. A door maps each reason to its
 * own wire form exactly once (HTTP: `src/http/errors.ts`); a denial is never one of these: it is
 * a receipt.
 *
 * Guarantees: every reason is a closed union member, so a door's mapping is exhaustive at
 * compile time; a message never quotes raw input unescaped (quoted input goes through
 * `safeText`).
 */
import type { CoreError, CoreErrorReason, FieldIssue } from '../core/errors.js';
import type { Result } from '../core/result.js';

/** Failures that are not core "cannot evaluate" errors. */
export type ServiceErrorReason =
  | 'unauthenticated'
  | 'forbidden_role'
  | 'self_approval'
  | 'tenant_mismatch'
  | 'principal_mismatch'
  | 'method_not_allowed'
  | 'conflict'
  | 'contract_quarantined'
  | 'payload_too_large'
  | 'unsupported_media_type'
  // Per-principal write limit (src/http/rate-limit.ts); carries `Retry-After`.
  | 'rate_limited'
  // Execution dispatch and the idempotency state machine.
  | 'authorization_denied'
  | 'authorization_expired'
  | 'authorization_revoked'
  | 'executor_mismatch'
  | 'in_progress'
  | 'reconciliation_required'
  | 'stale_fencing_token'
  | 'not_reconcilable'
  | 'idempotency_key_reused'
  | 'reconciliation_rejected'
  | 'not_reconciliation_owner'
  | 'self_reconciliation'
  // A tenant's storage quota (docs/storage.md, "Quotas").
  | 'quota_exceeded'
  // The principal holds the policy's maximum of open runs.
  | 'run_limit_reached'
  // Issue 11: no usable receipt key ring (WRIT_RECEIPT_KEYS), so no receipt is issued (503).
  | 'signing_unavailable'
  // A receipt not yet in its tenant's log after an on-demand drain (503, Retry-After).
  | 'log_pending'
  // A receipt whose replay inputs are not kept in a form a bundle can carry (409).
  | 'bundle_unavailable'
  | 'internal';

export type ErrorReason = CoreErrorReason | ServiceErrorReason;

export class ServiceError extends Error {
  override readonly name = 'ServiceError';
  constructor(
    readonly reason: ErrorReason,
    message: string,
    readonly issues: readonly FieldIssue[] = [],
    /** Seconds for a `Retry-After` answer (e.g. `in_progress`), or null. */
    readonly retryAfterSeconds: number | null = null,
  ) {
    super(message);
  }
}

export function fromCoreError(e: CoreError): ServiceError {
  return new ServiceError(e.reason, e.message, e.issues);
}

/** Anything missing or owned by another tenant: existence never leaks across tenants. */
export function notFound(kind: string): ServiceError {
  return new ServiceError('not_found', `${kind} not found`);
}

/** The value of a core `Result`, or its error as a `ServiceError`. */
export function unwrap<T>(r: Result<T, CoreError>): T {
  if (!r.ok) throw fromCoreError(r.error);
  return r.value;
}

/** The longest message an internal error's log line carries. */
export const LOGGED_MESSAGE_MAX = 1_000;

/**
 * An unexpected error as a log line may carry it: its name and message, never the values a query
 * was bound to. drizzle's `DrizzleQueryError` message ends with `params: <every bound value>`
 * (an approval's raw input, an idempotency key, a key digest, ...): that part is cut, and the
 * driver's own message (D1's, e.g. a constraint or trigger name) is kept instead. Bounded to
 * `LOGGED_MESSAGE_MAX` characters.
 */
export function errorForLog(e: Error): { error: string; message: string } {
  const withoutParams = (m: string) => {
    const at = m.indexOf('\nparams: ');
    return at < 0 ? m : m.slice(0, at);
  };
  let message = withoutParams(e.message);
  if (message !== e.message && e.cause instanceof Error)
    message += ` (cause: ${withoutParams(e.cause.message)})`;
  if (message.length > LOGGED_MESSAGE_MAX) message = `${message.slice(0, LOGGED_MESSAGE_MAX)}…`;
  return { error: e.name, message };
}
