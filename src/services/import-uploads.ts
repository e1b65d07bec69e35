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
 * anything, holding state bounded independently of the file's size (`Verification`): a line is
 * at most `MAX_LINE_BYTES`, the reference check holds at most `REFERENCE_CAPACITY` digests and
 * reads the file again per partition when there are more. A call verifies at most
 * `VERIFY_CALL_BYTES` of reads and keeps its state, sealed and bound to the upload
 * (src/services/import-verification-state.ts), for the next call to go on from the byte offset it
 * reached: a file of any size is verified, in as many calls as it takes. It then writes the rows
 * staged, at most `IMPORT_CALL_CHUNKS` D1 batches per call, and answers how far it got; the same
 * call again resumes after the last chunk that committed (staging is keyed by the file's digest,
 * so a file begun in one request can be finished from an upload and the other way round),
 * without verifying the file again: the finished verification is kept, and a resumed call checks
 * each line it writes, that it is of the verified tenant, and the digest of a read to the end
 * before going live.
 * Never: writes a row before the whole file is verified, reads a completed upload whose record
 * (digest, size, object version) does not match its seal, resumes from kept state that does not
 * open under its seal for this upload, digest and object version, holds more than one part or one
 * line in memory, or uses an upload whose bytes do not hash to the digest it was completed with.
 */
import { z } from 'zod';
import { newUploadId } from '../db/ids.js';
import type { LogFields } from './context.js';
import { ServiceError, notFound } from './errors.js';
import {
  type KeptBinding,
  type KeptVerification,
  openKept,
  recordSealed,
  sealKept,
  sealRecord,
} from './import-verification-state.js';
import type { ImportUploadStore, TenantMovePort, VerifiedFile } from './ports.js';
import {
  type ExportSource,
  type LinesFrom,
  type SourceImportOptions,
  type SourceLine,
  MAX_LINE_BYTES,
  Verification,
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
export const VERIFICATION_RULES = 4;

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
    seal: await sealRecord(await store.recordKey(), upload_id, done),
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
 * Bytes of the file one call verifies at most (every read counted: the first, checking read and
 * the reference partitions' reads). Measured (docs/scaling.md): about 200 MiB of small rows
 * verified in 30 s of CPU, so a third of that leaves the call room to write its chunks.
 */
export const VERIFY_CALL_BYTES = 64 * 1024 * 1024;

/** How far the verification of an upload got when a call stopped at its budget: call again. */
export interface ImportVerifying {
  readonly status: 'in_progress';
  readonly phase: 'verifying';
  readonly upload_id: string;
  readonly shard: number;
  /** 1: every line checked; 2 and later: the references checked again, one partition per read. */
  readonly read: number;
  readonly rows_verified: number;
  /** Bytes of the file the read under way got through, of `bytes_total`. */
  readonly bytes_read: number;
  readonly bytes_total: number;
}

export interface UploadImportOptions extends SourceImportOptions {
  /** Bytes this call verifies at most (`VERIFY_CALL_BYTES`; tests lower it). */
  readonly verify_call_bytes?: number | undefined;
}

/**
 * Import a completed upload onto `shard` (`importSource`): the file verified as a stream, up to
 * `verify_call_bytes` per call (the verification goes on in the next call from where it stopped,
 * its state kept sealed in R2: src/services/import-verification-state.ts), then, once verified
 * whole, at most `max_chunks` (default `IMPORT_CALL_CHUNKS`) chunks written. The answer is the
 * import's (new keys) once the tenant is live, else how far it got (call again to go on).
 */
export async function importUpload(
  port: TenantMovePort,
  store: ImportUploadStore,
  shard: number,
  upload_id: string,
  now: number,
  log: (fields: LogFields) => void,
  options: UploadImportOptions = {},
) {
  const record = await uploadOf(store, upload_id);
  if (record.status !== 'complete')
    throw new ServiceError('conflict', 'the upload is not completed: complete it with its parts first');
  if (!port.shardExists(shard)) throw new ServiceError('invalid_request', `shard ${shard} is not configured`);
  // A record rewritten in the bucket (other bytes put under the key, a record naming their digest
  // and version) would have this import verify and write a file the operator never completed.
  if (!(await recordSealed(await store.recordKey(), upload_id, record, record.seal)))
    throw new ServiceError(
      'conflict',
      `the record of upload ${upload_id} does not match its seal (rewritten in the bucket, or completed before records were sealed, or under another WRIT_ADMIN_TOKEN): nothing was written; delete the upload and upload the file again`,
    );
  const budget = options.verify_call_bytes ?? VERIFY_CALL_BYTES;
  if (!(budget >= 1)) throw new RangeError('verify_call_bytes must be at least 1');
  const { sha256, version, bytes } = record;
  const source: ExportSource = { sha256, lines: () => splitLines(store.read(upload_id, sha256, version)) };
  // A read from the end of the file (a call that stopped at its last line) reads nothing.
  const linesFrom: LinesFrom = (offset, first_line) =>
    splitLinesFrom(
      offset >= bytes ? none() : store.read(upload_id, sha256, version, offset),
      offset,
      first_line,
    );
  const key = await store.sealKey();
  const binding = { upload_id, sha256, version, rules: VERIFICATION_RULES };
  const kept = await keptVerification(store, key, binding, log);
  let verified: VerifiedFile;
  if (kept?.phase === 'verified') {
    // A call resuming the writing skips verifying again (its CPU no longer grows with the file);
    // see `SourceImportOptions.verified`.
    verified = kept.found;
  } else {
    const run =
      kept?.phase === 'verifying'
        ? Verification.resume(port, kept.state)
        : Verification.start(port, { max_rows: MAX_UPLOAD_IMPORT_ROWS, ...options.verify });
    const r = await run.run(linesFrom, budget);
    if ('stopped' in r) {
      await store.keepVerification(
        upload_id,
        await sealKept(key, binding, { phase: 'verifying', state: run.save() }),
      );
      log({
        upload_id,
        verify_read: r.stopped.read,
        verify_bytes_read: r.stopped.bytes_read,
        resumed_verification: kept !== null,
      });
      const progress: ImportVerifying = {
        status: 'in_progress',
        phase: 'verifying',
        upload_id,
        shard,
        ...r.stopped,
        bytes_total: bytes,
      };
      return progress;
    }
    const { verification: stats, ...found } = r.done;
    await store.keepVerification(upload_id, await sealKept(key, binding, { phase: 'verified', found }));
    log({
      upload_id,
      verify_reads: stats.reads,
      peak_references: stats.peak_references,
      resumed_verification: kept !== null,
    });
    verified = found;
  }
  return importSource(port, shard, source, now, log, {
    ...options,
    max_chunks: options.max_chunks ?? IMPORT_CALL_CHUNKS,
    verified,
  });
}

/**
 * The verification kept for the upload, if it is this upload's as this Worker sealed it; of other
 * rules, none (verified again). Anything else is discarded, so the next call verifies from the
 * start, and refused (nothing written): never resumed from state this Worker did not keep for
 * these bytes.
 */
async function keptVerification(
  store: ImportUploadStore,
  key: CryptoKey,
  binding: KeptBinding,
  log: (fields: LogFields) => void,
): Promise<KeptVerification | null> {
  const text = await store.verification(binding.upload_id);
  if (text === null) return null;
  const opened = await openKept(key, text, binding);
  if ('kept' in opened) return opened.kept;
  await store.forgetVerification(binding.upload_id);
  if ('stale' in opened) {
    log({ upload_id: binding.upload_id, kept_verification: 'stale' });
    return null;
  }
  log({ upload_id: binding.upload_id, kept_verification: 'refused' });
  throw new ServiceError(
    'conflict',
    `the kept verification of upload ${binding.upload_id} ${opened.refused}: it is discarded and nothing was written; import again to verify the file from its start`,
  );
}

async function* none(): AsyncGenerator<Uint8Array> {}

/**
 * The lines of a byte stream, as `text.split('\n')` gives them for the single-request import (one
 * trailing `\n` ends the last line): each at most `maxLineBytes` bytes of UTF-8, decoded strictly
 * (a byte-order mark is kept, so the line is refused as not JSON). Holds at most one line.
 */
export async function* splitLines(
  chunks: AsyncIterable<Uint8Array>,
  maxLineBytes: number = MAX_LINE_BYTES,
): AsyncGenerator<string> {
  for await (const l of splitLinesFrom(chunks, 0, 1, maxLineBytes)) yield l.text;
}

/**
 * `splitLines` of the bytes from `offset` of a file (the start of line `first_line`), each line
 * with the offset in the file just after it (after its `\n`, or the end of the file).
 */
export async function* splitLinesFrom(
  chunks: AsyncIterable<Uint8Array>,
  offset: number,
  first_line: number,
  maxLineBytes: number = MAX_LINE_BYTES,
): AsyncGenerator<SourceLine> {
  const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  let pending: Uint8Array[] = [];
  let pendingBytes = 0;
  let n = first_line - 1;
  let at = offset;
  const line = (tail: Uint8Array): string => {
    n += 1;
    const size = pendingBytes + tail.byteLength;
    // What the single-request import reports for a line past the bound.
    if (size > maxLineBytes) throw refuse(n, 'not json (too_large)');
    let bytes = tail;
    if (pending.length > 0) {
      bytes = new Uint8Array(size);
      let k = 0;
      for (const p of pending) {
        bytes.set(p, k);
        k += p.byteLength;
      }
      bytes.set(tail, k);
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
      const text = line(chunk.subarray(start, nl));
      at += nl + 1 - start;
      yield { text, end: at };
      start = nl + 1;
    }
    if (start < chunk.byteLength) {
      const rest = chunk.subarray(start);
      // Refused as soon as the line is too long, not after buffering all of it.
      if (pendingBytes + rest.byteLength > maxLineBytes) throw refuse(n + 1, 'not json (too_large)');
      pending.push(rest);
      pendingBytes += rest.byteLength;
      at += rest.byteLength;
    }
  }
  if (pendingBytes > 0) yield { text: line(new Uint8Array(0)), end: at };
}
