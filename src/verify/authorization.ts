/**
 * `verifyAuthorizationReceipt`: the check an executor runs on an authorization receipt before it
 * acts (spec ch. 11: "The executor must verify it rather than trust a boolean from the caller";
 * "Bind an authorization receipt to an executor audience and maximum dispatch time").
 *
 * Guarantees: `ok` only when every check passes, in this order, each refusal with its reason:
 * present and well-formed (`missing`, `malformed`), version 2 or later (`unsupported_version`: a
 * version 1 receipt names no audience), body hashes to its `sha256` (`digest_mismatch`: mutated),
 * signed by a published key valid at the issue time (`signature_missing`, `bad_signature`,
 * `issuer_mismatch`, `unknown_key`, `key_not_valid_at_issue`, `signature_mismatch`), signed at its
 * evaluation time (`signature_mismatch`), with a deadline at most the policy limit
 * (`POLICY_LIMITS.authorizationMaxDispatchMs`) after it (`malformed`), authorized
 * (`denied`), for this executor (`wrong_audience`), before its deadline (`expired`), and, when the
 * input is given, for exactly these input bytes (`input_mismatch`).
 * Never: reads a clock (`now` is an argument), does I/O, or remembers a receipt. Replay protection
 * is the executor's: a receipt stays valid until its deadline, so the executor must claim its
 * idempotency key (or invocation id) once, atomically, before acting (docs/receipts.md).
 * Imports only src/core and @noble/*: runs in Node, browsers and Workers.
 */
import { canonicalize, digestOf, sha256Hex } from '../core/canonical/canonical.js';
import { decodeJsonBytes, type JsonValue, utf8Encode } from '../core/canonical/json.js';
import {
  AUDIENCE_RECEIPT_VERSION,
  AuthorizationReceipt,
  type AuthorizationReceiptBodyV2,
  CONTRACT_LIMITS,
} from '../core/model.js';
import { POLICY_LIMITS } from '../core/policy.js';
import type { TrustedKeys } from '../core/receipts/keys.js';
import {
  type SignatureFailureReason,
  type VerifiedSignature,
  verifyReceiptSignature,
} from '../core/receipts/signing.js';

export const EXECUTOR_REFUSALS = [
  'missing',
  'malformed',
  'unsupported_version',
  'digest_mismatch',
  'signature_missing',
  'bad_signature',
  'issuer_mismatch',
  'unknown_key',
  'key_not_valid_at_issue',
  'signature_mismatch',
  'denied',
  'wrong_audience',
  'expired',
  'input_mismatch',
] as const;
export type ExecutorRefusal = (typeof EXECUTOR_REFUSALS)[number];

export interface ExecutorAudience {
  /** The release this executor runs; must equal the receipt's `executor_release`. */
  readonly executor_release: string;
  /** This executor's principal; required when the receipt pins one. */
  readonly executor_principal_id?: string;
}

export interface ExecutorVerifyOptions {
  /** The issuer's published keys, obtained out of band (`parsePublicKeySet`). */
  readonly keys: TrustedKeys;
  readonly audience: ExecutorAudience;
  /** The executor's clock, read once. */
  readonly now: number;
  /** The signature envelope delivered with the receipt (untrusted, as decoded from JSON). */
  readonly signature: unknown;
  /**
   * What the executor is about to act on: the JSON value, or the bytes of its JSON text (decoded
   * strictly: duplicate keys refused). Compared by the digest of its RFC 8785 form and that form's
   * UTF-8 length, as the service computes `input_sha256` and `input_bytes`.
   */
  readonly input?: Uint8Array | JsonValue;
}

export type ExecutorVerdict =
  | {
      readonly ok: true;
      readonly receipt: { readonly sha256: string; readonly body: AuthorizationReceiptBodyV2 };
      readonly signature: VerifiedSignature;
    }
  | { readonly ok: false; readonly reason: ExecutorRefusal; readonly message: string };

const refuse = (reason: ExecutorRefusal, message: string): ExecutorVerdict => ({
  ok: false,
  reason,
  message,
});

const SIGNATURE_REASONS: Record<SignatureFailureReason, ExecutorRefusal> = {
  missing: 'signature_missing',
  malformed_signature: 'bad_signature',
  bad_signature: 'bad_signature',
  issuer_mismatch: 'issuer_mismatch',
  unknown_key: 'unknown_key',
  key_not_valid_at_issue: 'key_not_valid_at_issue',
  receipt_mismatch: 'signature_mismatch',
};

/** Input JSON texts up to twice the largest contract input (whitespace), 64 levels deep. */
const INPUT_LIMITS = { maxBytes: 2 * CONTRACT_LIMITS.maxInputBytes, maxDepth: 64 } as const;

export function verifyAuthorizationReceipt(receipt: unknown, o: ExecutorVerifyOptions): ExecutorVerdict {
  if (receipt === undefined || receipt === null) return refuse('missing', 'no authorization receipt');
  const version = versionOf(receipt);
  // A v1 receipt names no audience or deadline: accepting it would let any executor act on it forever.
  if (typeof version === 'number' && version !== AUDIENCE_RECEIPT_VERSION) {
    return refuse(
      'unsupported_version',
      `receipt version ${version} is not supported (need ${AUDIENCE_RECEIPT_VERSION})`,
    );
  }
  const parsed = AuthorizationReceipt.safeParse(receipt);
  if (!parsed.success || parsed.data.body.receipt_version !== AUDIENCE_RECEIPT_VERSION) {
    return refuse('malformed', 'the authorization receipt is not well-formed');
  }
  const r = { sha256: parsed.data.sha256, body: parsed.data.body };
  const body = r.body;
  // A body edited after issue (the decision flipped, the target moved) no longer hashes to its identity.
  if (digestOf(body) !== r.sha256)
    return refuse('digest_mismatch', 'the receipt body does not hash to its sha256');

  const sig = verifyReceiptSignature(o.signature, r, o.keys);
  if (!sig.ok) return refuse(SIGNATURE_REASONS[sig.error.reason], sig.error.message);
  // The key window is checked at the envelope's issue time, which its signer chooses: a retired
  // (possibly leaked) key could date an envelope inside its window and sign a receipt evaluated
  // now. Writ signs an authorization receipt at its evaluation time, and no deadline lies more
  // than the policy limit after it, so a retired key's receipts stop being accepted that long
  // after its window closed.
  if (sig.value.envelope.issued_at_unix_ms !== body.evaluated_at_unix_ms) {
    return refuse('signature_mismatch', 'the signature is dated other than the receipt was evaluated');
  }
  if (
    body.dispatch_deadline_unix_ms <= body.evaluated_at_unix_ms ||
    body.dispatch_deadline_unix_ms - body.evaluated_at_unix_ms > POLICY_LIMITS.authorizationMaxDispatchMs
  ) {
    return refuse('malformed', 'the dispatch deadline is not within the policy limit of the evaluation');
  }

  // A denied receipt dispatched anyway is the confused deputy the executor exists to stop.
  if (body.decision !== 'authorized' || body.violations.length > 0) {
    return refuse('denied', 'the receipt records a denial');
  }
  // Another executor release would interpret the reviewed input with unreviewed code.
  if (body.executor_release !== o.audience.executor_release) {
    return refuse('wrong_audience', `the receipt is for executor release "${body.executor_release}"`);
  }
  if (
    body.executor_principal_id !== null &&
    body.executor_principal_id !== o.audience.executor_principal_id
  ) {
    return refuse('wrong_audience', 'the receipt is for another executor principal');
  }
  // A receipt found in a log hours later must not become a standing permission. A clock reading
  // that is not a time (NaN, a string, undefined from an untyped caller) compares false with any
  // deadline: it is refused as expired, never read as "not yet".
  if (!Number.isSafeInteger(o.now) || o.now >= body.dispatch_deadline_unix_ms) {
    return refuse('expired', 'the receipt is past its dispatch deadline');
  }
  if (o.input !== undefined) {
    const mismatch = inputMismatch(o.input, body);
    // What is checked must be what is executed: reviewed bytes, then different bytes acted on.
    if (mismatch !== null) return refuse('input_mismatch', mismatch);
  }
  return { ok: true, receipt: { sha256: r.sha256, body }, signature: sig.value };
}

function versionOf(receipt: unknown): unknown {
  if (typeof receipt !== 'object' || receipt === null) return undefined;
  const body = Object.prototype.hasOwnProperty.call(receipt, 'body')
    ? (receipt as { body: unknown }).body
    : undefined;
  if (typeof body !== 'object' || body === null) return undefined;
  return Object.prototype.hasOwnProperty.call(body, 'receipt_version')
    ? (body as { receipt_version: unknown }).receipt_version
    : undefined;
}

function inputMismatch(input: Uint8Array | JsonValue, body: AuthorizationReceiptBodyV2): string | null {
  let value: JsonValue;
  if (input instanceof Uint8Array) {
    const decoded = decodeJsonBytes(input, INPUT_LIMITS);
    if (!decoded.ok) return `the input is not strict json: ${decoded.error.reason}`;
    value = decoded.value;
  } else value = input;
  let bytes: Uint8Array;
  try {
    bytes = utf8Encode(canonicalize(value));
  } catch {
    return 'the input has no canonical form';
  }
  if (bytes.byteLength !== body.input_bytes || sha256Hex(bytes) !== body.input_sha256) {
    return 'the input is not the one the receipt authorizes';
  }
  return null;
}
