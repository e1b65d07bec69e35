/**
 * Receipt replay: recompute a stored receipt from its original inputs and report every
 * difference (spec ch. 11, "The reference verifies stored receipts by recomputing them").
 *
 * Guarantees: a stored receipt with any field changed, added or removed, or whose `sha256` does
 * not match its body, fails replay with the differing field names listed in sorted order. An
 * authorization receipt replays under the version written in its own stored body: version 1
 * without options, version 2 with the audience and dispatch window from its evidence (a version 2
 * receipt replayed without them fails, naming the audience fields).
 * Never: trusts the stored decision, reads a clock (the original `now` is an input), or does I/O.
 */
import { type AuthorizationReceiptOptions, authorizeToolCall } from '../authorization/authorize.js';
import { canonicalize, digestOf } from '../canonical/canonical.js';
import { verifyExecution } from '../execution/execution.js';
import {
  AUDIENCE_RECEIPT_VERSION,
  type AuthorizationReceipt,
  EMPTY_TRUSTED_STATE,
  type ToolContract,
  type ToolExecutionObservation,
  type ToolGrant,
  type ToolInvocation,
  type TrustedState,
} from '../model.js';
import type { CoreError } from '../errors.js';
import type { Result } from '../result.js';

export interface ReplayReport {
  readonly ok: boolean;
  /** Sorted names of differing fields (`sha256`, `body.<field>`), or `recompute_failed: <reason>`. */
  readonly differences: readonly string[];
}

export interface AuthorizationInputs {
  readonly contract: ToolContract;
  readonly grant: ToolGrant;
  readonly invocation: ToolInvocation;
  readonly now: number;
  readonly trusted?: TrustedState;
  /** Required to replay a version 2 receipt: the audience and dispatch window it was issued with. */
  readonly options?: AuthorizationReceiptOptions;
}

export interface ExecutionInputs {
  readonly contract: ToolContract;
  readonly authorization: AuthorizationReceipt;
  readonly observation: ToolExecutionObservation;
}

export function verifyAuthorizationReceipt(stored: unknown, inputs: AuthorizationInputs): ReplayReport {
  const trusted = inputs.trusted ?? EMPTY_TRUSTED_STATE;
  // The stored body names its version; replaying an old receipt under a newer rule (or the
  // reverse) would report a difference that is no tampering, or hide one. Anything else (an
  // unknown version, or version 2 without the options it was issued with) is recomputed as
  // version 1, so it still fails with every differing field named.
  if (storedVersion(stored) === AUDIENCE_RECEIPT_VERSION && inputs.options !== undefined) {
    return compare(
      stored,
      authorizeToolCall(
        inputs.contract,
        inputs.grant,
        inputs.invocation,
        inputs.now,
        trusted,
        inputs.options,
      ),
    );
  }
  return compare(
    stored,
    authorizeToolCall(inputs.contract, inputs.grant, inputs.invocation, inputs.now, trusted),
  );
}

/** The `receipt_version` of a stored receipt's body, read as untrusted data; `undefined` if absent. */
function storedVersion(stored: unknown): unknown {
  if (stored === null || typeof stored !== 'object') return undefined;
  const body = own(stored as Record<string, unknown>, 'body');
  if (body === null || typeof body !== 'object') return undefined;
  return own(body as Record<string, unknown>, 'receipt_version');
}

export function verifyExecutionReceipt(stored: unknown, inputs: ExecutionInputs): ReplayReport {
  return compare(stored, verifyExecution(inputs.contract, inputs.authorization, inputs.observation));
}

/**
 * Compare a stored receipt (taken as `unknown`: it came from storage and may be anything)
 * against a recomputed one, field by field over the union of keys.
 */
export function compare(
  stored: unknown,
  recomputed: Result<{ sha256: string; body: object }, CoreError>,
): ReplayReport {
  if (!recomputed.ok) return { ok: false, differences: [`recompute_failed: ${recomputed.error.reason}`] };
  const fresh = recomputed.value;
  if (stored === null || typeof stored !== 'object' || Array.isArray(stored)) {
    return { ok: false, differences: ['receipt'] };
  }
  const s = stored as Record<string, unknown>;
  const diffs = new Set<string>();
  for (const k of new Set([...Object.keys(s), 'sha256', 'body'])) {
    if (k !== 'sha256' && k !== 'body') diffs.add(k);
  }
  if (s.sha256 !== fresh.sha256) diffs.add('sha256');
  const body = s.body;
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    diffs.add('body');
  } else {
    const b = body as Record<string, unknown>;
    const f = fresh.body as Record<string, unknown>;
    for (const k of new Set([...Object.keys(b), ...Object.keys(f)])) {
      // Own properties only: `b["__proto__"]` must never read through to a prototype.
      if (!sameJson(own(b, k), own(f, k))) diffs.add(`body.${k}`);
    }
    // The body must also hash to the stored identity (catches a consistent re-hash of a forged body
    // only together with the field comparison above).
    if (safeDigest(b) !== s.sha256) diffs.add('sha256');
  }
  const differences = [...diffs].sort();
  return { ok: differences.length === 0, differences };
}

function own(o: Record<string, unknown>, k: string): unknown {
  return Object.prototype.hasOwnProperty.call(o, k) ? o[k] : undefined;
}

function sameJson(a: unknown, b: unknown): boolean {
  if (a === undefined || b === undefined) return a === b;
  try {
    return canonicalize(a) === canonicalize(b);
  } catch {
    return false;
  }
}

function safeDigest(v: unknown): string | null {
  try {
    return digestOf(v);
  } catch {
    return null;
  }
}
