/**
 * Typed "cannot evaluate" errors of the core. These are not denials: a denial is a receipt.
 * Each reason maps to exactly one HTTP status and wire code in `src/http/errors.ts`.
 */
import type { z } from 'zod';
import type { JsonDecodeError } from './json.js';

export type CoreErrorReason =
  | 'malformed_json'
  | 'invalid_request'
  | 'invalid_contract'
  | 'invalid_grant'
  | 'invalid_invocation'
  | 'invalid_observation'
  | 'invalid_policy'
  | 'invalid_receipt'
  | 'canonicalization_failed';

export interface FieldIssue {
  /** JSON path of the offending field, e.g. `grant.capabilities[0].resources`. */
  readonly path: string;
  readonly message: string;
}

export interface CoreError {
  readonly reason: CoreErrorReason;
  readonly message: string;
  readonly issues: readonly FieldIssue[];
}

export function coreError(
  reason: CoreErrorReason,
  message: string,
  issues: readonly FieldIssue[] = [],
): CoreError {
  return { reason, message, issues };
}

export function fromJsonError(e: JsonDecodeError): CoreError {
  return coreError('malformed_json', e.message, [{ path: `@${e.offset}`, message: e.reason }]);
}

/** Flatten zod issues into stable, sorted field issues (user input is quoted, never echoed whole). */
export function fromZodError(reason: CoreErrorReason, prefix: string, e: z.ZodError): CoreError {
  const issues = e.issues
    .map((i) => ({ path: formatPath(prefix, i.path), message: i.message.toLowerCase().replace(/\.$/, '') }))
    .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : a.message < b.message ? -1 : 1));
  return coreError(reason, `${prefix || 'input'} is not valid`, issues);
}

function formatPath(prefix: string, path: readonly PropertyKey[]): string {
  let out = prefix;
  for (const p of path) {
    if (typeof p === 'number') out += `[${p}]`;
    else out += out ? `.${String(p)}` : String(p);
  }
  return out || '$';
}
