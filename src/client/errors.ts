/**
 * What a failed call looks like to a client user: one error class carrying the wire error
 * (`code`, `message`, `issues`, `request_id`) and the HTTP status, never the request's headers.
 *
 * Never: includes the API key, the Authorization header or a request body in a message, a
 * property or a serialization (an error is often logged whole; keys must not follow it).
 */

export interface WireIssue {
  readonly path: string;
  readonly message: string;
}

export class WritApiError extends Error {
  override readonly name = 'WritApiError';
  /** HTTP status (0 when no response arrived or it could not be read). */
  readonly status: number;
  /** The wire code (`conflict`, `rate_limited`, `in_progress`, ...), or `malformed_response`. */
  readonly code: string;
  readonly issues: readonly WireIssue[];
  readonly requestId: string | null;
  /** `Retry-After` in seconds when the answer had one. */
  readonly retryAfterSeconds: number | null;
  /** The whole wire error object (some codes add fields, e.g. the operation an `in_progress` names). */
  readonly details: Readonly<Record<string, unknown>>;

  constructor(init: {
    readonly operation: string;
    readonly status: number;
    readonly code: string;
    readonly message: string;
    readonly issues?: readonly WireIssue[];
    readonly requestId?: string | null;
    readonly retryAfterSeconds?: number | null;
    readonly details?: Readonly<Record<string, unknown>>;
  }) {
    super(`${init.operation} answered ${init.status} ${init.code}: ${init.message}`);
    this.status = init.status;
    this.code = init.code;
    this.issues = init.issues ?? [];
    this.requestId = init.requestId ?? null;
    this.retryAfterSeconds = init.retryAfterSeconds ?? null;
    this.details = init.details ?? {};
  }
}

/** A helper gave up: bounded attempts ran out while the answer stayed retryable or undecided. */
export class WritGaveUpError extends Error {
  override readonly name = 'WritGaveUpError';
  constructor(
    message: string,
    readonly attempts: number,
    readonly last: WritApiError | null,
  ) {
    super(message);
  }
}

function isIssue(v: unknown): v is WireIssue {
  return (
    typeof v === 'object' &&
    v !== null &&
    typeof (v as { path?: unknown }).path === 'string' &&
    typeof (v as { message?: unknown }).message === 'string'
  );
}

/** `Retry-After` as whole seconds (the API sends delta-seconds); null when absent or not a number. */
export function retryAfterSeconds(headers: Headers): number | null {
  const v = headers.get('retry-after');
  if (v === null || !/^[0-9]{1,6}$/.test(v.trim())) return null;
  return Number(v.trim());
}

/** The typed error for a non-2xx answer whose body is (or should be) the wire error shape. */
export function apiError(operation: string, response: Response, body: unknown): WritApiError {
  const e = typeof body === 'object' && body !== null ? (body as { error?: unknown }).error : undefined;
  const wire = typeof e === 'object' && e !== null ? (e as Record<string, unknown>) : null;
  const retry = retryAfterSeconds(response.headers);
  if (wire === null) {
    return new WritApiError({
      operation,
      status: response.status,
      code: 'malformed_response',
      message: 'the answer is not a Writ error',
      requestId: response.headers.get('x-request-id'),
      retryAfterSeconds: retry,
    });
  }
  const issues = Array.isArray(wire.issues) ? wire.issues.filter(isIssue) : [];
  return new WritApiError({
    operation,
    status: response.status,
    code: typeof wire.code === 'string' ? wire.code : 'malformed_response',
    message: typeof wire.message === 'string' ? wire.message : 'no message',
    issues,
    requestId: typeof wire.request_id === 'string' ? wire.request_id : response.headers.get('x-request-id'),
    retryAfterSeconds: retry,
    details: wire,
  });
}
