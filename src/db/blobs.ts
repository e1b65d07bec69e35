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
 * trusts a key it did not derive from the bytes. A get of an object the collector retired
 * (`r2BlobSweep`) puts it back: a row that names it makes it live again.
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
      if (object !== null) return verified(sha256, object);
      // Retired by the orphan collector, yet a row names it (a writer that re-used it in the
      // collector's last instant): put it back and serve it.
      const retired = await bucket.get(retiredKey(sha256));
      if (retired === null) return null;
      const bytes = await verified(sha256, retired);
      await bucket.put(blobKey(sha256), bytes, { onlyIf: { etagDoesNotMatch: '*' }, sha256 });
      return bytes;
    },
  };
}

async function verified(sha256: string, object: R2ObjectBody): Promise<Uint8Array> {
  const bytes = new Uint8Array(await object.arrayBuffer());
  if (sha256Hex(bytes) !== sha256) throw new BlobIntegrityError(sha256);
  return bytes;
}

/** Where the collector keeps an object it took away, for a grace period, before deleting it. */
function retiredKey(sha256: string): string {
  return `retired/${blobKey(sha256)}`;
}

// ---------------------------------------------------------------------------------------------
// The orphan collector's view of the bucket (src/services/blob-collection.ts)

const PREFIX = 'sha256/';

/**
 * Listing, a second look, verified reads, and retirement of `sha256/<hex>` objects: a retired
 * object is moved to `retired/sha256/<hex>` (copied, verified, then removed), from where a read
 * (`r2BlobStore.get`) or the collector puts it back if a row names it, or the collector deletes
 * it once it has been retired for the grace period with no row naming it.
 */
export function r2BlobSweep(bucket: R2Bucket): BlobSweepPort {
  const listUnder = async (prefix: string, start_after: string | null, limit: number) => {
    const page = await bucket.list({
      prefix,
      limit,
      ...(start_after === null ? {} : { startAfter: `${prefix}${start_after}` }),
    });
    const objects = page.objects
      .map((o) => ({ sha256: o.key.slice(prefix.length), uploaded_unix_ms: o.uploaded.getTime() }))
      // A key that is not a digest was not written by Writ: never judged, never deleted.
      .filter((o) => SHA256_HEX.test(o.sha256));
    const last = page.objects.at(-1)?.key.slice(prefix.length);
    return { objects, next: page.truncated && last !== undefined && SHA256_HEX.test(last) ? last : null };
  };
  const RETIRED = `retired/${PREFIX}`;
  return {
    list: (start_after, limit) => listUnder(PREFIX, start_after, limit),
    listRetired: (start_after, limit) => listUnder(RETIRED, start_after, limit),
    async uploadedAt(sha256) {
      const o = await bucket.head(blobKey(sha256));
      return o === null ? null : o.uploaded.getTime();
    },
    async read(sha256) {
      const o = await bucket.get(blobKey(sha256));
      return o === null ? null : verified(sha256, o);
    },
    async retire(sha256) {
      const o = await bucket.get(blobKey(sha256));
      if (o === null) return;
      const bytes = await verified(sha256, o);
      // The copy first: at every moment the bytes are under one of the two keys.
      await bucket.put(retiredKey(sha256), bytes, { sha256 });
      await bucket.delete(blobKey(sha256));
    },
    async restore(sha256) {
      const o = await bucket.get(retiredKey(sha256));
      if (o === null) return;
      const bytes = await verified(sha256, o);
      await bucket.put(blobKey(sha256), bytes, { onlyIf: { etagDoesNotMatch: '*' }, sha256 });
      await bucket.delete(retiredKey(sha256));
    },
    async purge(sha256) {
      await bucket.delete(retiredKey(sha256));
    },
  };
}
