/**
 * Export files uploaded in parts for a tenant import (src/services/import-uploads.ts), held in
 * the `BLOBS` bucket under `imports/` with R2 multipart uploads.
 *
 * Keys: `imports/uploads/<upload_id>` is the file (an R2 multipart upload until completed), and
 * `imports/uploads/<upload_id>.json` the upload's record: the R2 upload id while it is open, then
 * the file's SHA-256 and size once completed and hashed; `imports/uploads/<upload_id>.verification`
 * the import's verification of the file, part-way or finished, sealed by the service
 * (src/services/import-verification-state.ts; this adapter stores the text and holds the key). `upload_id` is 128 random bits in hex.
 *
 * Guarantees: every read of a completed file is of the object version hashed at completion
 * (`UploadIntegrityError` before any byte otherwise: a write under the key, even of the same
 * bytes again, makes another version), re-hashes its bytes and throws `UploadIntegrityError`
 * after the last chunk (before the read ends) when they do not hash to the digest recorded at
 * completion; R2's refusals of a completion that the caller can fix (a part missing, an ETag that
 * is not the part's, parts too small or of unequal size, an upload already finished) are answered
 * as values, any other R2 failure is thrown.
 * Never: touches keys outside `imports/` (the orphan blob collector only walks `sha256/` and
 * `retired/sha256/`, so it never sees these), or holds more than one part in memory.
 */
import { createHash } from 'node:crypto';
import type { ImportUploadStore, UploadRecord } from '../services/ports.js';

const PREFIX = 'imports/uploads/';
const objectKey = (upload_id: string) => `${PREFIX}${upload_id}`;
const recordKey = (upload_id: string) => `${PREFIX}${upload_id}.json`;
const verificationKey = (upload_id: string) => `${PREFIX}${upload_id}.verification`;
/** Where an earlier version kept an unsealed verification: never read, deleted with the upload. */
const unsealedKey = (upload_id: string) => `${PREFIX}${upload_id}.verified.json`;

/** A completed upload's bytes no longer hash to the digest recorded when it was completed. */
export class UploadIntegrityError extends Error {
  override readonly name = 'UploadIntegrityError';
}

/** R2's codes for a completion the operator can correct (R2 error messages end with `(code)`). */
const FIXABLE = /\((10011|10024|10025|10048)\)/;

export function r2ImportUploads(
  bucket: R2Bucket,
  sealKey: () => Promise<CryptoKey>,
  recordSealKey: () => Promise<CryptoKey>,
): ImportUploadStore {
  const writeRecord = (upload_id: string, record: UploadRecord) =>
    bucket.put(recordKey(upload_id), JSON.stringify(record), {
      httpMetadata: { contentType: 'application/json' },
    });
  return {
    async create(upload_id, now) {
      const upload = await bucket.createMultipartUpload(objectKey(upload_id), {
        httpMetadata: { contentType: 'application/x-ndjson' },
      });
      await writeRecord(upload_id, {
        status: 'open',
        r2_upload_id: upload.uploadId,
        created_at_unix_ms: now,
      });
    },
    async record(upload_id) {
      const o = await bucket.get(recordKey(upload_id));
      // Written only by this adapter, from the typed record above.
      return o === null ? null : ((await o.json()) as UploadRecord);
    },
    async putPart(upload_id, record, part_number, bytes) {
      const upload = bucket.resumeMultipartUpload(objectKey(upload_id), record.r2_upload_id);
      const part = await upload.uploadPart(part_number, bytes);
      return { etag: part.etag };
    },
    async complete(upload_id, record, parts) {
      const upload = bucket.resumeMultipartUpload(objectKey(upload_id), record.r2_upload_id);
      try {
        await upload.complete(parts.map((p) => ({ partNumber: p.part_number, etag: p.etag })));
      } catch (e) {
        const message = e instanceof Error ? e.message : String(e);
        if (FIXABLE.test(message)) return { refused: message };
        throw e;
      }
      // The whole file, hashed as it streams: only one chunk is in memory at a time.
      const o = await bucket.get(objectKey(upload_id));
      if (o === null) throw new Error(`completed upload ${upload_id} has no object`);
      const hash = createHash('sha256');
      let bytes = 0;
      for await (const chunk of o.body) {
        hash.update(chunk);
        bytes += chunk.byteLength;
      }
      return { sha256: hash.digest('hex'), bytes, version: o.version };
    },
    async completed(upload_id, record) {
      await writeRecord(upload_id, record);
    },
    async *read(upload_id, sha256, version, offset = 0) {
      const o = await bucket.get(objectKey(upload_id), offset > 0 ? { range: { offset } } : undefined);
      if (o === null) throw new UploadIntegrityError(`upload ${upload_id} has no object`);
      // Checked before any byte is used: the hash below is only known at the end, and a reader
      // that stops early (a spent budget), or starts at an offset, would otherwise have used bytes
      // no hash ever checked.
      if (o.version !== version)
        throw new UploadIntegrityError(`upload ${upload_id} was replaced since it was completed`);
      const hash = offset === 0 ? createHash('sha256') : null;
      const reader = o.body.getReader();
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          hash?.update(value);
          yield value;
        }
      } finally {
        // A reader that stops early (a refused line, a spent budget) releases the stream.
        await reader.cancel().catch(() => undefined);
      }
      if (hash !== null && hash.digest('hex') !== sha256)
        throw new UploadIntegrityError(`upload ${upload_id} does not hash to its recorded digest`);
    },
    async verification(upload_id) {
      const o = await bucket.get(verificationKey(upload_id));
      return o === null ? null : o.text();
    },
    async keepVerification(upload_id, sealed) {
      await bucket.put(verificationKey(upload_id), sealed, {
        httpMetadata: { contentType: 'text/plain' },
      });
    },
    async forgetVerification(upload_id) {
      await bucket.delete(verificationKey(upload_id));
    },
    sealKey,
    recordKey: recordSealKey,
    async remove(upload_id, record) {
      if (record.status === 'open') {
        // Frees the parts R2 holds (they are not objects, and cost storage until aborted).
        await bucket.resumeMultipartUpload(objectKey(upload_id), record.r2_upload_id).abort();
      }
      await bucket.delete([
        objectKey(upload_id),
        recordKey(upload_id),
        verificationKey(upload_id),
        unsealedKey(upload_id),
      ]);
    },
  };
}
