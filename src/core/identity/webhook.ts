/**
 * Standard Webhooks signatures (symmetric, `v1`): the check that lets an executor speak as a
 * signed webhook instead of with a bearer key (docs/api.md, "Signed webhooks").
 *
 * Guarantees: `verifyWebhook` is `ok` only when the three headers are present and well-formed,
 * the timestamp lies within `toleranceMs` of `now` (either side), and one `v1` signature in the
 * header equals HMAC-SHA256(secret, `{webhook-id}.{webhook-timestamp}.{body}`) for one of the
 * given secrets, compared in constant time over the raw body bytes exactly as received. A secret
 * is `whsec_` + canonical base64 of 24 to 64 random bytes.
 * Never: reads a clock (`now` is an argument), draws randomness (the adapter passes the bytes in),
 * parses the body, decides who the sender is (the caller picks the secrets), or remembers ids
 * (de-duplication is the store's).
 */
import { hmac } from '@noble/hashes/hmac.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { utf8Encode } from '../canonical/json.js';
import { err, ok, type Result } from '../result.js';
import { decodeBase64, encodeBase64 } from '../receipts/base64.js';

export const WEBHOOK_SECRET_PREFIX = 'whsec_';
/** Bytes Writ draws for a new secret (the spec asks for at least 24). */
export const WEBHOOK_SECRET_BYTES = 32;
const MIN_SECRET_BYTES = 24;
const MAX_SECRET_BYTES = 64;
/** The spec's example tolerance; Writ's only one. */
export const WEBHOOK_TOLERANCE_MS = 5 * 60_000;
/**
 * A `webhook-id`: no `.` (it would move the boundary of the signed content), printable, bounded.
 * Svix-style `msg_...` ids and UUIDs fit.
 */
export const WEBHOOK_ID_PATTERN = /^[A-Za-z0-9_-]{1,128}$/;
/** Unix seconds as plain decimal: one spelling per instant, so the signed text is unambiguous. */
const TIMESTAMP_PATTERN = /^(0|[1-9][0-9]{0,11})$/;
const MAX_SIGNATURE_HEADER = 4096;
const MAX_SIGNATURES = 16;
const V1_SIGNATURE = /^v1,([A-Za-z0-9+/]{43}=)$/;

export type WebhookFailureReason =
  'missing_headers' | 'malformed_headers' | 'timestamp_out_of_window' | 'no_matching_signature';

export interface WebhookFailure {
  readonly reason: WebhookFailureReason;
  readonly message: string;
}

export interface WebhookHeaders {
  readonly id: string | undefined;
  readonly timestamp: string | undefined;
  readonly signature: string | undefined;
}

export interface VerifiedWebhook {
  readonly webhook_id: string;
  readonly timestamp_seconds: number;
  /** Index in `secrets` of the secret that matched (which one of a rotation is still in use). */
  readonly secret_index: number;
}

/** `whsec_` + base64 of the random bytes: shown to the tenant admin once. */
export function formatWebhookSecret(random: Uint8Array): string {
  if (random.byteLength < MIN_SECRET_BYTES || random.byteLength > MAX_SECRET_BYTES) {
    throw new RangeError(`a webhook secret needs ${MIN_SECRET_BYTES} to ${MAX_SECRET_BYTES} random bytes`);
  }
  return WEBHOOK_SECRET_PREFIX + encodeBase64(random);
}

/** The key bytes of a `whsec_` secret, or null for anything else. */
export function parseWebhookSecret(text: string): Uint8Array | null {
  if (!text.startsWith(WEBHOOK_SECRET_PREFIX)) return null;
  const key = decodeBase64(text.slice(WEBHOOK_SECRET_PREFIX.length));
  if (key === null || key.byteLength < MIN_SECRET_BYTES || key.byteLength > MAX_SECRET_BYTES) return null;
  return key;
}

/** The `v1,<base64>` signature of one message (a sender's `webhook-signature` entry; tests sign with it). */
export function signWebhook(key: Uint8Array, id: string, timestampSeconds: number, body: Uint8Array): string {
  return `v1,${encodeBase64(mac(key, id, String(timestampSeconds), body))}`;
}

export function verifyWebhook(
  headers: WebhookHeaders,
  body: Uint8Array,
  secrets: readonly Uint8Array[],
  now: number,
  toleranceMs: number = WEBHOOK_TOLERANCE_MS,
): Result<VerifiedWebhook, WebhookFailure> {
  const { id, timestamp, signature } = headers;
  if (id === undefined || timestamp === undefined || signature === undefined) {
    return fail('missing_headers', 'webhook-id, webhook-timestamp and webhook-signature are required');
  }
  if (!WEBHOOK_ID_PATTERN.test(id)) return fail('malformed_headers', 'webhook-id is not well-formed');
  if (!TIMESTAMP_PATTERN.test(timestamp)) {
    return fail('malformed_headers', 'webhook-timestamp must be unix seconds');
  }
  const seconds = Number(timestamp);
  // A captured message re-sent later (or one pre-dated for later use) falls outside the window;
  // inside it, the id de-duplication catches the copy.
  if (Math.abs(seconds * 1000 - now) > toleranceMs) {
    return fail('timestamp_out_of_window', 'webhook-timestamp is outside the accepted window');
  }
  if (signature.length > MAX_SIGNATURE_HEADER) {
    return fail('malformed_headers', 'webhook-signature is too long');
  }
  const entries = signature.split(' ').filter((s) => s.length > 0);
  if (entries.length === 0 || entries.length > MAX_SIGNATURES) {
    return fail('malformed_headers', 'webhook-signature lists no signature or too many');
  }
  // Other schemes (`v1a`, future versions) are skipped, as the spec asks: only `v1` is verified.
  const candidates: Uint8Array[] = [];
  for (const entry of entries) {
    const m = V1_SIGNATURE.exec(entry);
    if (m === null) continue;
    const bytes = decodeBase64(m[1] as string);
    if (bytes !== null) candidates.push(bytes);
  }
  for (let i = 0; i < secrets.length; i++) {
    const expected = mac(secrets[i] as Uint8Array, id, timestamp, body);
    // Every candidate is compared in full: a timing difference must not tell which bytes matched.
    let matched = false;
    for (const c of candidates) matched = constantTimeEqual(c, expected) || matched;
    if (matched) return ok({ webhook_id: id, timestamp_seconds: seconds, secret_index: i });
  }
  return fail('no_matching_signature', 'no webhook-signature matches a signing secret of this executor');
}

/** Equal-length byte strings compared without a data-dependent exit (signing oracle). */
export function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  let diff = 0;
  for (let i = 0; i < a.byteLength; i++) diff |= (a[i] as number) ^ (b[i] as number);
  return diff === 0;
}

function mac(key: Uint8Array, id: string, timestamp: string, body: Uint8Array): Uint8Array {
  const prefix = utf8Encode(`${id}.${timestamp}.`);
  const message = new Uint8Array(prefix.byteLength + body.byteLength);
  message.set(prefix, 0);
  message.set(body, prefix.byteLength);
  return hmac(sha256, key, message);
}

const fail = (reason: WebhookFailureReason, message: string) => err<WebhookFailure>({ reason, message });
