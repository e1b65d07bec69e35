/**
 * Importing a tenant whose export is larger than one request (platform admin; docs/scaling.md,
 * "Moving a tenant"): the export file is uploaded in numbered parts (an R2 multipart upload in
 * the `BLOBS` bucket, src/db/import-uploads.ts), completed with the SHA-256 the operator
 * expects, then imported from there as a stream (src/services/tenant-moves.ts `importSource`).
 *
 * Guarantees: a completed upload is the file the operator named by digest: the parts must be
 * listed 1..n in order, R2 checks each part's ETag and size, and the whole object is hashed
 * before the upload counts as completed (a mismatch deletes it); every later read is of the R2
 * object version that was hashed (a call stopped by its budget never reads to the end, so the hash
 * alone would not cover the rows it wrote) and re-hashes it.
 * The import verifies the whole file (every line and every whole-file rule) before it writes
 * anything, holding state bounded independently of the file's size (`verifySource`): a line is at
 * most `MAX_LINE_BYTES`, the reference check holds at most `REFERENCE_CAPACITY` digests and reads
 * the file again per partition when there are more. It then writes the rows staged, at most
 * `IMPORT_CALL_CHUNKS` D1 batches per call, and answers how far it got; the same call again
 * resumes after the last chunk that committed (staging is keyed by the file's digest, so a file
 * begun in one request can be finished from an upload and the other way round), without verifying
 * the file again: the first call keeps what it found, and a resumed call checks each line it
 * writes, that it is of the verified tenant, and the digest of a read to the end before going live.
 * Never: writes a row before the whole file is verified, holds more than one part or one line in
 * memory, or uses an upload whose bytes do not hash to the digest it was completed with.
 */
import { z } from 'zod';
import { newUploadId } from '../db/ids.js';
import type { LogFields } from './context.js';
import { ServiceError, notFound } from './errors.js';
import type { ImportUploadStore, TenantMovePort } from './ports.js';
import {
  type ExportSource,
  type SourceImportOptions,
  MAX_LINE_BYTES,
  importSource,
  refuse,
} from './tenant-moves.js';

/** A part is read whole into memory before it goes to R2: at most this many bytes. */
export const IMPORT_PART_MAX_BYTES = 16 * 1024 * 1024;
/** R2's rule (checked by R2 at completion): every part but the last at least 5 MiB, all equal. */
export const IMPORT_PART_MIN_BYTES = 5 * 1024 * 1024;
/** Parts of one upload: 640 parts of 16 MiB are 10 GiB, one D1 database's size limit. */
export const MAX_IMPORT_PARTS = 640;
/** Rows of an uploaded file: a 10 GB shard holds fewer rows of at least 200 bytes. */
export const MAX_UPLOAD_IMPORT_ROWS = 50_000_000;
/**
 * D1 batches one import call writes at most. Workers allow 1,000 subrequests per invocation
 * (each D1 batch and each R2 read is one): 400 chunks, the reads of the file (one to verify, one
 * per reference partition, one to write) and a handful of directory and staging queries, plus the
 * key batches (one per 100 live principals) stay under it for tenants of up to ~50,000 live
 * principals. docs/scaling.md has the arithmetic.
 */
export const IMPORT_CALL_CHUNKS = 400;

const UPLOAD_ID = /^[0-9a-f]{32}$/;

/**
 * The version of the import's verification rules. A kept verification of another version is not
 * trusted (the file is verified again): raise it with any change to what `verifySource` checks.
 */
export const VERIFICATION_RULES = 2;

export const CompleteUploadRequest = z.strictObject({
  /** Every part, numbered 1..n in order, with the ETag its upload answered. */
  parts: z
    .array(
      z.strictObject({
        part_number: z.number().int().min(1).max(MAX_IMPORT_PARTS),
        etag: z.string().min(1).max(256),
      }),
    )
    .min(1)
    .max(MAX_IMPORT_PARTS),
  /** SHA-256 (lowercase hex) of the whole export file, as the operator computed it. */
  sha256: z.string().regex(/^[0-9a-f]{64}$/, 'a lowercase hex SHA-256'),
});
export type CompleteUploadRequest = z.infer<typeof CompleteUploadRequest>;

const uploadOf = async (store: ImportUploadStore, upload_id: string) => {
  const record = UPLOAD_ID.test(upload_id) ? await store.record(upload_id) : null;
  if (record === null) throw notFound('upload');
  return record;
};

/** Start an upload: its id and the part bounds. */
export async function createImportUpload(
  store: ImportUploadStore,
  now: number,
  log: (fields: LogFields) => void,
) {
  const upload_id = newUploadId();
  await store.create(upload_id, now);
  log({ upload_id });
  return {
    upload_id,
    part_max_bytes: IMPORT_PART_MAX_BYTES,
    part_min_bytes: IMPORT_PART_MIN_BYTES,
    max_parts: MAX_IMPORT_PARTS,
  };
}

/** Put part `part_number` (sending a part again replaces it; its new ETag counts). */
export async function putImportPart(
  store: ImportUploadStore,
  upload_id: string,
  part_number: string,
  bytes: Uint8Array,
  log: (fields: LogFields) => void,
) {
  if (!/^[1-9][0-9]{0,3}$/.test(part_number) || Number(part_number) > MAX_IMPORT_PARTS)
    throw new ServiceError('invalid_request', `part number must be 1 to ${MAX_IMPORT_PARTS}`);
  // An empty part would make a completed file that is not the concatenation the operator cut.
  if (bytes.byteLength === 0) throw new ServiceError('invalid_request', 'a part must not be empty');
  const record = await uploadOf(store, upload_id);
  if (record.status !== 'open') throw new ServiceError('conflict', 'the upload is already completed');
  const n = Number(part_number);
  const { etag } = await store.putPart(upload_id, record, n, bytes);
  log({ upload_id, part_number: n, bytes: bytes.byteLength });
  return { upload_id, part_number: n, etag, bytes: bytes.byteLength };
}

/**
 * Complete the upload from its parts and check the whole file against the digest the operator
 * expects. A list not numbered 1..n in order is refused before R2 sees it (R2 would sort it and
 * build a file in another order than the one the operator listed); an R2 refusal leaves the upload
 * open to correct; a digest mismatch deletes the file (nothing of it can be used).
 */
export async function completeImportUpload(
  store: ImportUploadStore,
  upload_id: string,
  body: CompleteUploadRequest,
  log: (fields: LogFields) => void,
) {
  for (const [i, p] of body.parts.entries()) {
    if (p.part_number === i + 1) continue;
    const message =
      p.part_number < i + 1 || body.parts.some((q) => q.part_number === i + 1)
        ? `part ${p.part_number} is listed out of order or twice: parts must be listed 1 to n in order`
        : `part ${i + 1} is missing: parts must be listed 1 to n in order`;
    throw new ServiceError('invalid_request', message, [{ path: `parts.${i}.part_number`, message }]);
  }
  const record = await uploadOf(store, upload_id);
  if (record.status !== 'open') throw new ServiceError('conflict', 'the upload is already completed');
  const done = await store.complete(upload_id, record, body.parts);
  if ('refused' in done)
    throw new ServiceError(
      'invalid_request',
      `R2 refused the parts (the upload stays open): ${done.refused}`,
    );
  const completed = {
    ...record,
    status: 'complete' as const,
    sha256: done.sha256,
    bytes: done.bytes,
    version: done.version,
  };
  if (done.sha256 !== body.sha256) {
    await store.remove(upload_id, completed);
    throw new ServiceError(
      'invalid_request',
      `the uploaded file hashes to ${done.sha256}, not ${body.sha256}; the upload is deleted, nothing was imported`,
    );
  }
  await store.completed(upload_id, completed);
  log({ upload_id, sha256: done.sha256, bytes: done.bytes, parts: body.parts.length });
  return { upload_id, sha256: done.sha256, bytes: done.bytes, parts: body.parts.length };
}

/** Abort an open upload (R2 drops its parts) or delete a completed file. */
export async function abortImportUpload(
  store: ImportUploadStore,
  upload_id: string,
  log: (fields: LogFields) => void,
) {
  const record = await uploadOf(store, upload_id);
  await store.remove(upload_id, record);
  log({ upload_id, status: record.status });
  return { upload_id, removed: true };
}

/**
 * Import a completed upload onto `shard` (`importSource`): the whole file verified as a stream,
 * then at most `max_chunks` (default `IMPORT_CALL_CHUNKS`) chunks written; the answer is the
 * import's (new keys) once the tenant is live, else how far it got (call again to go on).
 */
export async function importUpload(
  port: TenantMovePort,
  store: ImportUploadStore,
  shard: number,
  upload_id: string,
  now: number,
  log: (fields: LogFields) => void,
  options: SourceImportOptions = {},
) {
  const record = await uploadOf(store, upload_id);
  if (record.status !== 'complete')
    throw new ServiceError('conflict', 'the upload is not completed: complete it with its parts first');
  const { sha256, version } = record;
  const source: ExportSource = { sha256, lines: () => splitLines(store.read(upload_id, sha256, version)) };
  // A call resuming the import of a file an earlier call verified whole skips verifying it again
  // (the CPU of a call then no longer grows with the file); see `SourceImportOptions.verified`.
  const kept = await store.verification(upload_id);
  const verified =
    kept !== null && kept.sha256 === sha256 && kept.rules === VERIFICATION_RULES ? kept : undefined;
  log({ upload_id, verified_before: verified !== undefined });
  return importSource(port, shard, source, now, log, {
    ...options,
    max_chunks: options.max_chunks ?? IMPORT_CALL_CHUNKS,
    verify: { max_rows: MAX_UPLOAD_IMPORT_ROWS, ...options.verify },
    verified,
    onVerified: async (v) => {
      const { verification: _stats, ...found } = v;
      await store.keepVerification(upload_id, { ...found, sha256, rules: VERIFICATION_RULES });
    },
  });
}

/**
 * The lines of a byte stream, as `text.split('\n')` gives them for the single-request import (one
 * trailing `\n` ends the last line): each at most `maxLineBytes` bytes of UTF-8, decoded strictly
 * (a byte-order mark is kept, so the line is refused as not JSON). Holds at most one line.
 */
export async function* splitLines(
  chunks: AsyncIterable<Uint8Array>,
  maxLineBytes: number = MAX_LINE_BYTES,
): AsyncGenerator<string> {
  const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  let pending: Uint8Array[] = [];
  let pendingBytes = 0;
  let n = 0;
  const line = (tail: Uint8Array): string => {
    n += 1;
    const size = pendingBytes + tail.byteLength;
    // What the single-request import reports for a line past the bound.
    if (size > maxLineBytes) throw refuse(n, 'not json (too_large)');
    let bytes = tail;
    if (pending.length > 0) {
      bytes = new Uint8Array(size);
      let at = 0;
      for (const p of pending) {
        bytes.set(p, at);
        at += p.byteLength;
      }
      bytes.set(tail, at);
      pending = [];
      pendingBytes = 0;
    }
    try {
      return decoder.decode(bytes);
    } catch {
      throw refuse(n, 'not valid UTF-8');
    }
  };
  for await (const chunk of chunks) {
    let start = 0;
    // A 0x0A byte is always a line feed in UTF-8 (never inside a multi-byte character).
    for (let nl = chunk.indexOf(10, start); nl !== -1; nl = chunk.indexOf(10, start)) {
      yield line(chunk.subarray(start, nl));
      start = nl + 1;
    }
    if (start < chunk.byteLength) {
      const rest = chunk.subarray(start);
      // Refused as soon as the line is too long, not after buffering all of it.
      if (pendingBytes + rest.byteLength > maxLineBytes) throw refuse(n + 1, 'not json (too_large)');
      pending.push(rest);
      pendingBytes += rest.byteLength;
    }
  }
  if (pendingBytes > 0) yield line(new Uint8Array(0));
}
