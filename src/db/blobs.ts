/**
 * The R2 adapter of `BlobStore` (src/services/ports.ts): immutable bytes under `sha256/<hex>`.
 *
 * Guarantees: a put is create-only (`onlyIf: { etagDoesNotMatch: '*' }`), so stored bytes are never
 * replaced, and R2 itself checks the body against the digest we computed (`sha256` option); a get
 * re-hashes what R2 returned and refuses a mismatch with `BlobIntegrityError` (a 500: corruption
 * or tampering is never served as evidence). Content addressing makes a lost race harmless: two
 * writers of one key write the same bytes.
 * Never: overwrites or deletes an object, or trusts a key it did not derive from the bytes.
 */
import { sha256Hex } from '../core/canonical/canonical.js';
import type { BlobRef, BlobStore } from '../services/ports.js';
import { StoredDocumentError } from './documents.js';

/** A blob whose bytes do not hash to its key (or that R2 refused to store as such). */
export class BlobIntegrityError extends StoredDocumentError {
  readonly reason = 'blob_digest_mismatch';
  constructor(readonly sha256: string) {
    super(`stored blob sha256/${sha256} does not hash to its key`);
  }
}

const SHA256_HEX = /^[0-9a-f]{64}$/;

export function blobKey(sha256: string): string {
  // Keys are derived, never taken from input: anything else is a programming error.
  if (!SHA256_HEX.test(sha256)) throw new Error('blob key must be a sha256 hex digest');
  return `sha256/${sha256}`;
}

export function r2BlobStore(bucket: R2Bucket): BlobStore {
  return {
    async put(bytes: Uint8Array, content_type: string): Promise<BlobRef> {
      const sha256 = sha256Hex(bytes);
      const key = blobKey(sha256);
      // Most puts of an existing key are retries or shared content: a head avoids R2's
      // one-write-per-second-per-key limit (a 429) for them.
      if ((await bucket.head(key)) === null) {
        // null: another writer created the key first; its bytes are these bytes by construction.
        await bucket.put(key, bytes, {
          onlyIf: { etagDoesNotMatch: '*' },
          sha256,
          httpMetadata: { contentType: content_type },
        });
      }
      return { sha256, bytes: bytes.byteLength };
    },

    async get(sha256: string): Promise<Uint8Array | null> {
      const object = await bucket.get(blobKey(sha256));
      if (object === null) return null;
      const bytes = new Uint8Array(await object.arrayBuffer());
      if (sha256Hex(bytes) !== sha256) throw new BlobIntegrityError(sha256);
      return bytes;
    },
  };
}
