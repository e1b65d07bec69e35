/**
 * Randomness for stored identities: the only place the Worker draws random bytes. Formatting is
 * pure and lives in src/core/identity/identity.ts.
 */
import { API_KEY_BYTES, formatApiKey, formatId, ID_BYTES, type IdKind } from '../core/identity/identity.js';

export function newId(kind: IdKind): string {
  return formatId(kind, crypto.getRandomValues(new Uint8Array(ID_BYTES)));
}

/**
 * A fresh API key (256 random bits) routed to `shard`, the D1 shard holding its tenant. Shown
 * once; only `apiKeyDigest(key)` is stored.
 */
export function newApiKey(shard: number): string {
  return formatApiKey(crypto.getRandomValues(new Uint8Array(API_KEY_BYTES)), shard);
}

/** An import upload's id (src/services/import-uploads.ts): 128 random bits, lowercase hex. */
export function newUploadId(): string {
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join(
    '',
  );
}
