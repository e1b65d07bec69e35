/**
 * Signed approval envelopes with key rotation (spec ch. 11 exercise: "Add a signed approval
 * envelope with key rotation and replay tests").
 *
 * An approval decided outside Writ (an approval console, a change-management system) reaches
 * Writ as an envelope: the exact `ToolApproval` (tenant, policy, contract, input digest, effect,
 * expiry, approver) plus who signed it and when, authenticated with HMAC-SHA256 (`@noble/hashes`)
 * over the RFC 8785 bytes of everything but the signature. Keys live in a keyring by `key_id`;
 * rotating means adding a key, signing with it, and retiring the old one: an envelope verifies
 * only with the key it names, and only if it was issued inside that key's validity window.
 *
 * Guarantees:
 * - any change to any signed field, the key id or the signature fails (`bad_signature`);
 * - an unknown key id fails (`unknown_key`); an envelope issued before its key's `not_before`
 *   or at or after its `retired_at_unix_ms` fails (`key_not_valid_at_issue`);
 * - an envelope issued in the future, or after the approval's own expiry, fails, and so does one
 *   whose approval expires more than the policy limit (`approvalMaxLifetimeMs`) after its issue:
 *   a retired key's envelopes, however dated, stop yielding live approvals that long after it
 *   retired;
 * - replay: the verifier is told which approval ids were already used (`alreadyUsed`), and an
 *   envelope for a used id fails (`replayed`), so one signature authorizes at most one call
 *   (the edge service's single-use approval consumption is the durable form of this set);
 * - signatures are compared in constant time; secrets are at least 32 bytes.
 * The verified approval still goes through `authorizeToolCall`, which checks every binding
 * against the invocation: a valid signature never replaces those checks.
 * Never: reads a clock (`now` is an argument), does I/O, or accepts an unsigned field.
 */
import { hmac } from '@noble/hashes/hmac.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import { z } from 'zod';
import { canonicalize, guardCanonical } from '../core/canonical/canonical.js';
import { coreError, type CoreError, fromZodError } from '../core/errors.js';
import { constantTimeEqual } from '../core/execution/idempotency.js';
import { utf8Encode } from '../core/canonical/json.js';
import { ToolApproval } from '../core/model.js';
import { POLICY_LIMITS } from '../core/policy.js';
import { err, ok, type Result } from '../core/result.js';
import { Identifier, strict, UnixMs } from '../core/schema.js';

export const APPROVAL_ENVELOPE_VERSION = 1;

/** The signed part of an envelope: everything but the signature. */
export const ApprovalEnvelopeBody = strict({
  envelope_version: z.literal(APPROVAL_ENVELOPE_VERSION),
  algorithm: z.literal('hmac-sha256'),
  key_id: Identifier,
  issuer: Identifier,
  issued_at_unix_ms: UnixMs,
  approval: ToolApproval,
});
export type ApprovalEnvelopeBody = z.infer<typeof ApprovalEnvelopeBody>;

export const ApprovalEnvelope = strict({
  body: ApprovalEnvelopeBody,
  /** Lowercase hex HMAC-SHA256 over the RFC 8785 bytes of `body`. */
  signature: z.string().regex(/^[0-9a-f]{64}$/),
});
export type ApprovalEnvelope = z.infer<typeof ApprovalEnvelope>;

/** One key of a keyring. A retired key verifies only envelopes issued before its retirement. */
export interface EnvelopeKey {
  readonly key_id: string;
  readonly secret: Uint8Array;
  readonly not_before_unix_ms: number;
  readonly retired_at_unix_ms: number | null;
}

export type EnvelopeRejection =
  | 'bad_signature'
  | 'unknown_key'
  | 'key_not_valid_at_issue'
  | 'issued_in_future'
  | 'issued_after_approval_expiry'
  | 'approval_outlives_limit'
  | 'replayed';

export const MIN_SECRET_BYTES = 32;

/** Sign an approval with a key (the approval side's operation; also used by tests and labs). */
export function signApprovalEnvelope(
  body: ApprovalEnvelopeBody,
  key: EnvelopeKey,
): Result<ApprovalEnvelope, CoreError> {
  const parsed = ApprovalEnvelopeBody.safeParse(body);
  if (!parsed.success) return err(fromZodError('invalid_request', 'envelope.body', parsed.error));
  if (parsed.data.key_id !== key.key_id) {
    return err(coreError('invalid_request', 'the envelope names another key than the signing key'));
  }
  if (key.secret.byteLength < MIN_SECRET_BYTES) {
    return err(coreError('invalid_request', `signing secrets must be at least ${MIN_SECRET_BYTES} bytes`));
  }
  return guardCanonical(() => ok({ body: parsed.data, signature: mac(key.secret, parsed.data) }));
}

export type EnvelopeVerification =
  | { readonly ok: true; readonly approval: ToolApproval; readonly key_id: string }
  | { readonly ok: false; readonly rejection: EnvelopeRejection };

/**
 * Verify an envelope (taken as `unknown`: it came from outside). A malformed envelope is a
 * `CoreError`; a well-formed one that fails a check is a rejection value.
 */
export function verifyApprovalEnvelope(
  envelope: unknown,
  keyring: readonly EnvelopeKey[],
  now: number,
  alreadyUsed: (approval_id: string) => boolean,
): Result<EnvelopeVerification, CoreError> {
  const parsed = ApprovalEnvelope.safeParse(envelope);
  if (!parsed.success) return err(fromZodError('invalid_request', 'envelope', parsed.error));
  if (!Number.isSafeInteger(now) || now < 0) {
    return err(coreError('invalid_request', 'verification time must be a non-negative integer'));
  }
  const { body, signature } = parsed.data;
  const reject = (rejection: EnvelopeRejection) => ok({ ok: false as const, rejection });
  const key = keyring.find((k) => k.key_id === body.key_id);
  if (key === undefined || key.secret.byteLength < MIN_SECRET_BYTES) return reject('unknown_key');
  // Authenticity first: nothing else an attacker wrote is believed before the MAC checks out.
  const expected = guardCanonical(() => ok(mac(key.secret, body)));
  if (!expected.ok) return expected;
  if (!constantTimeEqual(expected.value, signature)) return reject('bad_signature');
  const issued = body.issued_at_unix_ms;
  if (
    issued < key.not_before_unix_ms ||
    (key.retired_at_unix_ms !== null && issued >= key.retired_at_unix_ms)
  ) {
    return reject('key_not_valid_at_issue');
  }
  if (issued > now) return reject('issued_in_future');
  if (issued >= body.approval.expires_at_unix_ms) return reject('issued_after_approval_expiry');
  // The key's window is checked at `issued_at`, which the signer writes: a retired (stolen) key
  // could date an envelope inside its window. No approval outlives the policy limit from its
  // issue, so such envelopes stop being usable that long (seven days) after the key retired.
  if (body.approval.expires_at_unix_ms - issued > POLICY_LIMITS.approvalMaxLifetimeMs) {
    return reject('approval_outlives_limit');
  }
  if (alreadyUsed(body.approval.approval_id)) return reject('replayed');
  return ok({ ok: true as const, approval: body.approval, key_id: key.key_id });
}

function mac(secret: Uint8Array, body: ApprovalEnvelopeBody): string {
  return bytesToHex(hmac(sha256, secret, utf8Encode(canonicalize(body))));
}
