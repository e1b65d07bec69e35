/**
 * Typed "cannot evaluate" errors of the core. These are not denials: a denial is a receipt.
 * Each reason maps to exactly one HTTP status and wire code in `src/http/errors.ts`.
 */
import type { z } from 'zod';
import type { JsonDecodeError } from './canonical/json.js';
import { escapeText } from './text.js';

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
  // The decoder quotes keys it refuses ("duplicate key ..."): a key is attacker-chosen text.
  return coreError('malformed_json', safeText(e.message), [{ path: `@${e.offset}`, message: e.reason }]);
}

/**
 * Flatten zod issues into stable, sorted field issues. User input is quoted, never echoed whole:
 * zod names offending keys in paths and messages ("unrecognized key: ..."), so both are clipped
 * and their control characters and lone surrogates escaped (`safeText`); at most `MAX_ISSUES`
 * are kept, after sorting, so the first ones are stable (`boundIssues`).
 */
export function fromZodError(reason: CoreErrorReason, prefix: string, e: z.ZodError): CoreError {
  const issues = e.issues
    .map((i) => ({
      path: safeText(formatPath(prefix, i.path)),
      message: safeText(i.message.toLowerCase().replace(/\.$/, '')),
    }))
    .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : a.message < b.message ? -1 : 1));
  return coreError(reason, `${prefix || 'input'} is not valid`, boundIssues(issues));
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

/**
 * At most this many issues are returned, the last of them a marker counting the rest. Bounds an
 * error body: a request of thousands of bad fields would otherwise answer many times its size.
 */
export const MAX_ISSUES = 20;

/** The longest message an error carries, in UTF-16 units before escaping. */
export const MAX_MESSAGE_TEXT = 1000;

/**
 * Text derived from input, safe to return and to log: clipped to `max` units (then "…"), then
 * every control character, separator, lone surrogate, bidi control and invisible character
 * written as a `\uXXXX` escape (`escapeText`). The one function every quoted input goes through.
 */
export function safeText(text: string, max: number = MAX_ISSUE_TEXT): string {
  const clipped = text.length > max ? `${text.slice(0, max)}…` : text;
  return escapeText(clipped);
}

/** `"<text>"`, through `safeText`: how a message quotes input. */
export function quoted(text: string): string {
  return `"${safeText(text)}"`;
}

/** The longest text `safeText` returns for the default bound: each unit may become a 6-unit escape. */
const SAFE_ISSUE_TEXT = MAX_ISSUE_TEXT * 6 + 1;

/**
 * At most `MAX_ISSUES` issues: when there are more, the first `MAX_ISSUES - 1` and then
 * `{ path: "$", message: "… and N more issues" }`. Each path and message is escaped and bounded
 * (text that already went through `safeText` is unchanged). Idempotent, so a service and the
 * door may both apply it.
 */
export function boundIssues(issues: readonly FieldIssue[]): readonly FieldIssue[] {
  const over = issues.length > MAX_ISSUES;
  const kept = (over ? issues.slice(0, MAX_ISSUES - 1) : issues).map((i) => ({
    path: safeText(i.path, SAFE_ISSUE_TEXT),
    message: safeText(i.message, SAFE_ISSUE_TEXT),
  }));
  if (over) kept.push({ path: '$', message: `… and ${issues.length - (MAX_ISSUES - 1)} more issues` });
  return kept;
}
