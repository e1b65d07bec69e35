/**
 * The R2 adapter of `BlobStore` (src/services/ports.ts): immutable bytes under `sha256/<hex>`.
 *
 * Guarantees: a put is create-only (`onlyIf: { etagDoesNotMatch: '*' }`), so stored bytes are never
 * replaced, and R2 itself checks the body against the digest we computed (`sha256` option); a get
 * re-hashes what R2 returned and refuses a mismatch with `BlobIntegrityError` (a 500: corruption
 * or tampering is never served as evidence). Content addressing makes a lost race harmless: two
 * writers of one key write the same bytes.
 * A put that finds the object already there but written more than `BLOB_REFRESH_MS` ago writes
 * the same bytes again (R2 checks them against the digest), so that the object's upload time is
 * recent whenever a write is about to refer to it: the orphan collector (`r2BlobSweep`,
 * src/services/blob-collection.ts) only deletes objects older than its grace period.
 * Never: changes an object's bytes, deletes one (only `r2BlobSweep` does, for the collector), or
 * trusts a key it did not derive from the bytes.
 */
import { sha256Hex } from '../core/canonical/canonical.js';
import type { BlobRef, BlobStore, BlobSweepPort } from '../services/ports.js';
import { StoredDocumentError } from './documents.js';

/** A blob whose bytes do not hash to its key (or that R2 refused to store as such). */
export class BlobIntegrityError extends StoredDocumentError {
  readonly reason = 'blob_digest_mismatch';
  constructor(readonly sha256: string) {
    super(`stored blob sha256/${sha256} does not hash to its key`);
  }
}

const SHA256_HEX = /^[0-9a-f]{64}$/;

/**
 * The orphan collector's grace period: it deletes no object written (or refreshed) less than this
 * long ago. Far longer than any request between its put and the D1 commit that refers to it.
 */
export const BLOB_GRACE_MS = 24 * 60 * 60 * 1000;
/** A put refreshes an existing object older than this: half the grace period (see `put`). */
export const BLOB_REFRESH_MS = BLOB_GRACE_MS / 2;

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
      const found = await bucket.head(key);
      if (found === null) {
        // null: another writer created the key first; its bytes are these bytes by construction.
        await bucket.put(key, bytes, {
          onlyIf: { etagDoesNotMatch: '*' },
          sha256,
          httpMetadata: { contentType: content_type },
        });
      } else if (found.uploaded.getTime() < Date.now() - BLOB_REFRESH_MS) {
        // An old object (perhaps an orphan the collector is about to judge) is about to be
        // referred to again: write it again so its upload time says so. Same bytes, checked.
        await bucket.put(key, bytes, { sha256, httpMetadata: { contentType: content_type } });
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

// ---------------------------------------------------------------------------------------------
// The orphan collector's view of the bucket (src/services/blob-collection.ts)

const PREFIX = 'sha256/';

/** Listing, a second look, verified reads and deletion of `sha256/<hex>` objects. */
export function r2BlobSweep(bucket: R2Bucket): BlobSweepPort {
  const store = r2BlobStore(bucket);
  return {
    async list(start_after, limit) {
      const page = await bucket.list({
        prefix: PREFIX,
        limit,
        ...(start_after === null ? {} : { startAfter: blobKey(start_after) }),
      });
      const objects = page.objects
        .map((o) => ({ sha256: o.key.slice(PREFIX.length), uploaded_unix_ms: o.uploaded.getTime() }))
        // A key that is not a digest was not written by Writ: never judged, never deleted.
        .filter((o) => SHA256_HEX.test(o.sha256));
      const last = page.objects.at(-1)?.key.slice(PREFIX.length);
      return { objects, next: page.truncated && last !== undefined && SHA256_HEX.test(last) ? last : null };
    },
    async uploadedAt(sha256) {
      const o = await bucket.head(blobKey(sha256));
      return o === null ? null : o.uploaded.getTime();
    },
    read: (sha256) => store.get(sha256),
    async delete(sha256) {
      await bucket.delete(blobKey(sha256));
    },
  };
}
