/**
 * The one mapping from every error reason to an HTTP status and wire code, and the app's single
 * `onError`. Services and routes throw `ServiceError` (src/services/errors.ts).
 *
 * Wire shape: `{ "error": { "code", "message", "issues": [{ "path", "message" }], "request_id" } }`.
 * At most `MAX_ISSUES` issues (then one "… and N more issues" marker), every message and issue
 * escaped through `safeText`. An unexpected exception is always a 500 `internal` carrying the request id, never its message:
 * internal detail (SQL, stack) stays in the log.
 */
import type { Context } from 'hono';
import { HTTPException } from 'hono/http-exception';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { type FieldIssue, MAX_MESSAGE_TEXT, boundIssues, safeText } from '../core/errors.js';
import { type ErrorReason, ServiceError, errorForLog } from '../services/errors.js';
import type { AppEnv } from './env.js';

export interface WireError {
  readonly status: ContentfulStatusCode;
  readonly code: string;
}

/** Exhaustive: adding a reason without a mapping is a compile error. */
export function wireError(reason: ErrorReason): WireError {
  switch (reason) {
    case 'malformed_json':
    case 'invalid_request':
    case 'invalid_contract':
    case 'invalid_grant':
    case 'invalid_invocation':
    case 'invalid_observation':
    case 'invalid_policy':
    case 'invalid_receipt':
    case 'canonicalization_failed':
    case 'target_mismatch':
      return { status: 400, code: reason };
    case 'unauthenticated':
      return { status: 401, code: reason };
    case 'forbidden_role':
    case 'self_approval':
    case 'tenant_mismatch':
    case 'principal_mismatch':
    case 'authorization_denied':
    case 'authorization_expired':
    case 'authorization_revoked':
    case 'executor_mismatch':
    case 'not_reconciliation_owner':
    case 'self_reconciliation':
      return { status: 403, code: reason };
    case 'not_found':
      return { status: 404, code: reason };
    case 'method_not_allowed':
      return { status: 405, code: reason };
    case 'conflict':
    case 'contract_quarantined':
    case 'in_progress':
    case 'reconciliation_required':
    case 'stale_fencing_token':
    case 'not_reconcilable':
    case 'run_limit_reached': // a state to change (let a run end), not a rate to back off: 409
      return { status: 409, code: reason };
    case 'idempotency_key_reused':
    case 'reconciliation_rejected':
      return { status: 422, code: reason };
    case 'payload_too_large':
      return { status: 413, code: reason };
    case 'unsupported_media_type':
      return { status: 415, code: reason };
    case 'rate_limited':
    case 'quota_exceeded':
      return { status: 429, code: reason };
    case 'signing_unavailable': // the deployment lacks its receipt keys: retry once fixed, not a bug
    case 'log_pending':
      return { status: 503, code: reason };
    case 'bundle_unavailable':
      return { status: 409, code: reason };
    case 'internal':
      return { status: 500, code: reason };
  }
}

export function errorBody(
  reason: ErrorReason,
  message: string,
  issues: readonly FieldIssue[],
  requestId: string,
) {
  // The last line of defence: whatever a message or issue quotes, and however many issues a
  // request provoked, the body stays bounded and free of raw control, bidi and invisible text.
  return {
    error: {
      code: wireError(reason).code,
      message: safeText(message, MAX_MESSAGE_TEXT),
      issues: boundIssues(issues),
      request_id: requestId,
    },
  };
}

export function errorResponse(c: Context<AppEnv>, e: ServiceError): Response {
  const { status } = wireError(e.reason);
  if (e.retryAfterSeconds !== null) c.header('retry-after', String(e.retryAfterSeconds));
  return c.json(errorBody(e.reason, e.message, e.issues, c.var.requestId), status);
}

/** The app's only error handler. */
export function onError(e: Error, c: Context<AppEnv>): Response {
  if (e instanceof ServiceError) {
    c.set('log', { ...c.var.log, error: e.reason });
    return errorResponse(c, e);
  }
  if (e instanceof HTTPException) {
    const reason = httpExceptionReason(e.status);
    c.set('log', { ...c.var.log, error: reason });
    return errorResponse(c, new ServiceError(reason, reason === 'internal' ? 'internal error' : e.message));
  }
  // Only the error's name and message are logged: never a request body or raw arguments.
  console.error(JSON.stringify({ level: 'error', request_id: c.var.requestId, ...errorForLog(e) }));
  c.set('log', { ...c.var.log, error: 'internal' });
  return errorResponse(c, new ServiceError('internal', 'internal error; quote the request id'));
}

function httpExceptionReason(status: number): ErrorReason {
  switch (status) {
    case 400:
      return 'invalid_request';
    case 401:
      return 'unauthenticated';
    case 403:
      return 'forbidden_role';
    case 404:
      return 'not_found';
    case 405:
      return 'method_not_allowed';
    case 409:
      return 'conflict';
    case 413:
      return 'payload_too_large';
    case 415:
      return 'unsupported_media_type';
    case 429:
      return 'rate_limited';
    default:
      return 'internal';
  }
}
