/**
 * Typed "cannot evaluate" errors of the core. These are not denials: a denial is a receipt.
 * Each reason maps to exactly one HTTP status and wire code in `src/http/errors.ts`.
 */
import type { z } from 'zod';
import type { JsonDecodeError } from './canonical/json.js';

export type CoreErrorReason =
  | 'malformed_json'
  | 'invalid_request'
  | 'invalid_contract'
  | 'invalid_grant'
  | 'invalid_invocation'
  | 'invalid_observation'
  | 'invalid_policy'
  | 'invalid_receipt'
  | 'canonicalization_failed'
  // Stored state a request names does not exist (for the caller's tenant).
  | 'not_found'
  // A target named beside the input is not the one the contract derives from it.
  | 'target_mismatch';

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

/**
 * Flatten zod issues into stable, sorted field issues. User input is quoted, never echoed whole:
 * zod names offending keys in paths and messages ("unrecognized key: ..."), so both are clipped
 * and their control characters and lone surrogates escaped (`safeText`).
 */
export function fromZodError(reason: CoreErrorReason, prefix: string, e: z.ZodError): CoreError {
  const issues = e.issues
    .map((i) => ({
      path: safeText(formatPath(prefix, i.path)),
      message: safeText(i.message.toLowerCase().replace(/\.$/, '')),
    }))
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

/** The longest path or message an issue carries, in UTF-16 units before escaping. */
export const MAX_ISSUE_TEXT = 200;

// C0 and C1 controls, DEL, line and paragraph separators, and unpaired surrogates.
const UNSAFE_CHARS =
  /[\u0000-\u001f\u007f-\u009f\u2028\u2029]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/**
 * Text derived from input, safe to return and to log: clipped to `MAX_ISSUE_TEXT` units (then
 * "…"), then every control character, separator and lone surrogate written as a `\uXXXX` escape.
 */
export function safeText(text: string): string {
  const clipped = text.length > MAX_ISSUE_TEXT ? `${text.slice(0, MAX_ISSUE_TEXT)}…` : text;
  return clipped.replace(UNSAFE_CHARS, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
