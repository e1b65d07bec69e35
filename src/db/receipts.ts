/**
 * Receipt rows shared by the tenant store and the idempotency object's index mirror. Receipts
 * are append-only (a trigger refuses update, and delete unless the row was archived to R2 first)
 * and stored under the issuing tenant, so another tenant's receipt is not found. Every read
 * re-hashes the decoded receipt against the row's key, whatever its encoding.
 *
 * Every receipt is written with its signature envelope (issue 11, `receipt_signatures`) in the
 * same batch: the statements below sign before they are built, so a receipt that cannot be signed
 * is never written (the signer throws, and no statement reaches D1).
 */
import { and, asc, eq, gt, sql } from 'drizzle-orm';
import { z } from 'zod';
import { bytesToHex, hexToBytes } from '@noble/hashes/utils.js';
import { canonicalize, digestOf } from '../core/canonical/canonical.js';
import { decodeBase64, encodeBase64 } from '../core/receipts/base64.js';
import type { JsonValue } from '../core/canonical/json.js';
import type { SignableReceipt, SignatureEnvelope } from '../core/receipts/signing.js';
import type { BlobRef, NewReceipt, SignatureRow, StoredReceipt } from '../services/ports.js';
import type { Db } from './client.js';
import { StoredDocumentError, parseStoredJson, toCanonicalText } from './documents.js';
import { evidenceFromStored, storedEvidenceText } from './evidence-encoding.js';
import { receiptArchiveEntries, receipts, receiptSignatures } from './schema.js';
import { decodeSignatureEnvelope, encodeSignatureEnvelope } from './signature-rows.js';

/**
 * Signs one receipt at its issue time, or throws (a missing or unusable key ring): the caller
 * then writes nothing. Deterministic (Ed25519): the same receipt, key and time give the same
 * envelope, so a retried write (the idempotency object's mirror) produces the same row.
 */
export type ReceiptSigner = (
  receipt: SignableReceipt,
  issued_at_unix_ms: number,
) => Promise<SignatureEnvelope>;

export type TenantReceipt = NewReceipt & {
  readonly tenant_id: string;
  /** Observation receipts only: the indexed id columns (see `receipts.observation_claim`). */
  readonly observation?: {
    readonly observation_id: string;
    readonly raw_sha256: string;
    readonly claim: string | null;
  };
  /** Evidence already put to R2: the row keeps its digest and size instead of the text. */
  readonly evidence_blob?: BlobRef;
};

/**
 * Receipt text encodings (`receipts.receipt_encoding`). None changes a receipt's bytes: all
 * decode to the same `{sha256, body}`, re-hashed against the row's key on every read.
 * - 1: canonical `{sha256, body}` (every row written before migration 0004).
 * - 2: the canonical body without `tenant_id` and `principal_id`, which the row's columns already
 *   hold; written only when both are in the body and equal the columns (about 170 bytes less).
 * - 3 (authorization receipts, migration-free): encoding 2 without the member names. The text is
 *   the canonical array `[receipt_version, ...values]`, the values in the order of that version's
 *   frozen layout (`POSITIONAL_LAYOUTS`), each `*_sha256` digest as its 32 bytes in canonical
 *   base64 (44 characters instead of 64); `receipt_kind` is the row's `kind` column. Written only
 *   when the body has exactly the layout's members and every digest is lowercase hex or null;
 *   otherwise the row falls back to encoding 2 or 1. About 600 bytes less than encoding 2.
 */
export const RECEIPT_ENCODING = { wrapped: 1, compact: 2, positional: 3 } as const;

/**
 * The frozen member order of each positional layout, by `receipt_kind` and `receipt_version`:
 * a stored row's meaning depends on it, so a layout is never edited. A body version with other
 * members is simply not written positionally (a new version gets a new entry, if ever).
 * `tenant_id`, `principal_id` (the row's columns), `receipt_kind` (the `kind` column) and
 * `receipt_version` (the array's first element) are not listed.
 */
const AUTHORIZATION_V1_MEMBERS = [
  'approval_id',
  'decision',
  'effect',
  'evaluated_at_unix_ms',
  'grant_sha256',
  'idempotency_key',
  'input_bytes',
  'input_sha256',
  'invocation_id',
  'invocation_sha256',
  'policy_sha256',
  'requested_at_unix_ms',
  'run_envelope_sha256',
  'target',
  'tool_contract_sha256',
  'trusted_state_sha256',
  'violations',
] as const;

export const POSITIONAL_LAYOUTS: ReadonlyMap<string, readonly string[]> = new Map<string, readonly string[]>([
  ['authorization/1', AUTHORIZATION_V1_MEMBERS],
  [
    'authorization/2',
    [
      ...AUTHORIZATION_V1_MEMBERS,
      'dispatch_deadline_unix_ms',
      'executor_principal_id',
      'executor_release',
      'named_principal_id',
      'named_tenant_id',
    ].sort(),
  ],
]);

/** Members never in a positional array: the row's columns and the array's first element. */
const OUTSIDE_LAYOUT = new Set(['tenant_id', 'principal_id', 'receipt_kind', 'receipt_version']);
const HEX_DIGEST = /^[0-9a-f]{64}$/;
const isDigestMember = (key: string) => key.endsWith('_sha256');

export function encodeReceipt(r: TenantReceipt): { text: string; encoding: number } {
  const body = r.receipt.body as Record<string, unknown>;
  if (
    typeof body.tenant_id === 'string' &&
    body.tenant_id === r.tenant_id &&
    typeof body.principal_id === 'string' &&
    body.principal_id === r.principal_id
  ) {
    const positional = positionalText(body, r.kind);
    if (positional !== null) return { text: positional, encoding: RECEIPT_ENCODING.positional };
    const { tenant_id: _t, principal_id: _p, ...rest } = body;
    return { text: toCanonicalText(rest), encoding: RECEIPT_ENCODING.compact };
  }
  return {
    text: toCanonicalText({ sha256: r.receipt.sha256, body: r.receipt.body }),
    encoding: RECEIPT_ENCODING.wrapped,
  };
}

/** Encoding 3's text of a body whose ids are already the row's columns, or null if it has no layout. */
function positionalText(body: Record<string, unknown>, kind: string): string | null {
  if (body.receipt_kind !== kind || typeof body.receipt_version !== 'number') return null;
  const layout = POSITIONAL_LAYOUTS.get(`${kind}/${body.receipt_version}`);
  if (layout === undefined) return null;
  const members = Object.keys(body).filter((k) => !OUTSIDE_LAYOUT.has(k));
  if (members.length !== layout.length || !layout.every((k) => Object.hasOwn(body, k))) return null;
  const values: JsonValue[] = [body.receipt_version];
  for (const k of layout) {
    const v = body[k] as JsonValue;
    if (isDigestMember(k) && v !== null) {
      if (typeof v !== 'string' || !HEX_DIGEST.test(v)) return null;
      values.push(encodeBase64(hexToBytes(v)));
    } else {
      values.push(v);
    }
  }
  return toCanonicalText(values);
}

/** Encoding 3's body, its ids and kind put back from the row; throws on any text it did not write. */
function positionalBody(
  parsed: JsonValue,
  row: { readonly tenant_id: string; readonly principal_id: string | null; readonly kind: string },
): Record<string, JsonValue> {
  const refuse = () => new StoredDocumentError('stored receipt does not match its encoding');
  if (!Array.isArray(parsed) || row.principal_id === null) throw refuse();
  const version = parsed[0];
  const layout = POSITIONAL_LAYOUTS.get(`${row.kind}/${String(version)}`);
  if (typeof version !== 'number' || layout === undefined || parsed.length !== layout.length + 1) {
    throw refuse();
  }
  const body: Record<string, JsonValue> = {
    principal_id: row.principal_id,
    receipt_kind: row.kind,
    receipt_version: version,
    tenant_id: row.tenant_id,
  };
  layout.forEach((k, i) => {
    const v = parsed[i + 1] as JsonValue;
    if (isDigestMember(k) && v !== null) {
      const bytes = typeof v === 'string' ? decodeBase64(v) : null;
      if (bytes === null || bytes.length !== 32) throw refuse();
      body[k] = bytesToHex(bytes);
    } else {
      body[k] = v;
    }
  });
  return body;
}

/**
 * The stored receipt `{sha256, body}` of a row, re-hashed: text that does not decode, or decodes to
 * a body that does not hash to the row's key, is corruption (a column edit cannot pass as a receipt).
 */
export function decodeReceipt(row: {
  readonly tenant_id: string;
  readonly sha256: string;
  readonly kind: string;
  readonly principal_id: string | null;
  readonly receipt: string;
  readonly receipt_encoding: number;
}): StoredReceipt['receipt'] {
  const parsed = parseStoredJson('receipt', row.receipt);
  let body: unknown;
  if (row.receipt_encoding === RECEIPT_ENCODING.positional) {
    body = positionalBody(parsed, row);
  } else if (row.receipt_encoding === RECEIPT_ENCODING.compact) {
    if (!isObject(parsed) || 'tenant_id' in parsed || 'principal_id' in parsed || row.principal_id === null) {
      throw new StoredDocumentError('stored receipt does not match its encoding');
    }
    body = { ...parsed, tenant_id: row.tenant_id, principal_id: row.principal_id };
  } else if (row.receipt_encoding === RECEIPT_ENCODING.wrapped) {
    if (!isObject(parsed) || parsed.sha256 !== row.sha256 || !isObject(parsed.body)) {
      throw new StoredDocumentError('stored receipt does not match its encoding');
    }
    body = parsed.body;
  } else {
    throw new StoredDocumentError('stored receipt has an unknown encoding');
  }
  if (digestOf(body) !== row.sha256) throw new StoredDocumentError('stored receipt does not hash to its key');
  return { sha256: row.sha256, body: body as StoredReceipt['receipt']['body'] };
}

function isObject(v: unknown): v is { readonly [key: string]: JsonValue } {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Insert statements for `db.batch([...])`, so a receipt is written in the same transaction as the
 * state change it records. Re-inserting identical content is a no-op (same digest, same bytes).
 * Per receipt: the receipt insert first (its result is the caller's "stored or not"), then its
 * signature row, inserted only if the receipt row exists after the first statement (a receipt
 * refused by a unique index, such as an observation id another receipt holds, gets no signature
 * row and so never reaches the log), and only once per receipt.
 */
export async function insertReceiptStatements(
  db: Db,
  sign: ReceiptSigner,
  ...items: readonly TenantReceipt[]
) {
  // Sign everything before building any statement: a signer failure leaves nothing to run.
  const signed = await Promise.all(
    items.map(async (r) => ({
      r,
      envelope: await sign(
        { sha256: r.receipt.sha256, body: r.receipt.body as SignableReceipt['body'] },
        r.created_at_unix_ms,
      ),
    })),
  );
  return signed.flatMap(({ r, envelope }) => [
    insertReceiptStatement(db, r),
    insertSignatureStatement(db, r, envelope),
  ]);
}

function insertSignatureStatement(db: Db, r: TenantReceipt, envelope: SignatureEnvelope) {
  // A signature that names another receipt, tenant or time would be a log leaf for nothing stored.
  if (
    envelope.receipt_sha256 !== r.receipt.sha256 ||
    envelope.tenant_id !== r.tenant_id ||
    envelope.issued_at_unix_ms !== r.created_at_unix_ms
  ) {
    throw new Error(`signature of receipt ${r.receipt.sha256} does not match it`);
  }
  // The envelope in its stored form (src/db/signature-rows.ts): positional when it reads back as
  // exactly the canonical envelope. Columns in table order (`seq` NULL: the next AUTOINCREMENT
  // value). The WHERE clause also keeps SQLite from reading ON CONFLICT as part of the SELECT.
  const stored = encodeSignatureEnvelope(canonicalize(envelope), {
    tenant_id: r.tenant_id,
    receipt_sha256: r.receipt.sha256,
  });
  return db
    .insert(receiptSignatures)
    .select(
      sql`SELECT NULL, ${r.tenant_id}, ${r.receipt.sha256}, ${stored}, ${r.created_at_unix_ms}
        WHERE EXISTS (SELECT 1 FROM ${receipts} WHERE ${receipts.tenant_id} = ${r.tenant_id} AND ${receipts.sha256} = ${r.receipt.sha256})`,
    )
    .onConflictDoNothing();
}

function insertReceiptStatement(db: Db, r: TenantReceipt) {
  // A receipt whose identity is not its body's digest would be unverifiable evidence.
  if (digestOf(r.receipt.body) !== r.receipt.sha256) {
    throw new Error(`receipt ${r.receipt.sha256} does not hash to its identity`);
  }
  const { text, encoding } = encodeReceipt(r);
  const inline =
    r.evidence_blob !== undefined || r.evidence === undefined || r.evidence === null
      ? null
      : storedEvidenceText(r.kind, r.evidence, r.receipt.body);
  // Columns in table order (src/db/schema.ts). A receipt that retention moved to an R2 archive
  // (it has an archive entry) is not inserted again: re-inserting identical content stays a no-op
  // after archiving too (the idempotency object re-mirrors its operation's receipts after every
  // change), so the row is never counted twice against the quota nor archived a second time.
  return db
    .insert(receipts)
    .select(
      sql`SELECT ${r.tenant_id}, ${r.receipt.sha256}, ${r.kind}, ${text}, ${inline}, ${r.outcome},
          ${r.principal_id ?? null}, ${r.created_at_unix_ms}, ${r.observation?.observation_id ?? null},
          ${r.observation?.raw_sha256 ?? null}, ${r.observation?.claim ?? null}, ${encoding},
          ${r.evidence_blob?.sha256 ?? null}, ${r.evidence_blob?.bytes ?? null}
        WHERE NOT EXISTS (SELECT 1 FROM ${receiptArchiveEntries} WHERE ${receiptArchiveEntries.tenant_id} = ${r.tenant_id} AND ${receiptArchiveEntries.sha256} = ${r.receipt.sha256})`,
    )
    .onConflictDoNothing();
}
/**
 * A signature row as its readers take it: the envelope as its canonical text (the log leaf's
 * bytes), whatever form it is stored in; a row the reader does not accept throws (a 500).
 */
function signatureRow(
  tenant_id: string,
  row: { readonly seq: number; readonly receipt_sha256: string; readonly envelope: string },
): SignatureRow {
  const envelope = decodeSignatureEnvelope(row.envelope, { tenant_id, receipt_sha256: row.receipt_sha256 });
  return { seq: row.seq, receipt_sha256: row.receipt_sha256, envelope };
}

/** The tenant's signature rows after `after_seq`, in `seq` order, at most `limit`. */
export async function signatureRowsAfter(
  db: Db,
  tenant_id: string,
  after_seq: number,
  limit: number,
): Promise<readonly SignatureRow[]> {
  const rows = await db
    .select({
      seq: receiptSignatures.seq,
      receipt_sha256: receiptSignatures.receipt_sha256,
      envelope: receiptSignatures.envelope,
    })
    .from(receiptSignatures)
    .where(and(eq(receiptSignatures.tenant_id, tenant_id), gt(receiptSignatures.seq, after_seq)))
    .orderBy(asc(receiptSignatures.seq))
    .limit(limit);
  return rows.map((r) => signatureRow(tenant_id, r));
}

/** The signature row of the tenant's receipt with this digest, or null. */
export async function signatureRowOf(
  db: Db,
  tenant_id: string,
  sha256: string,
): Promise<SignatureRow | null> {
  const row = await db
    .select({
      seq: receiptSignatures.seq,
      receipt_sha256: receiptSignatures.receipt_sha256,
      envelope: receiptSignatures.envelope,
    })
    .from(receiptSignatures)
    .where(and(eq(receiptSignatures.tenant_id, tenant_id), eq(receiptSignatures.receipt_sha256, sha256)))
    .get();
  return row === undefined ? null : signatureRow(tenant_id, row);
}

export type ReceiptRow = typeof receipts.$inferSelect;

/**
 * A receipt row as stored, its receipt decoded and verified. Evidence is either the parsed in-row
 * text or, when it lives in R2, the reference the caller resolves (`evidence_blob`).
 */
export function receiptFromRow(row: ReceiptRow): {
  readonly stored: Omit<StoredReceipt, 'evidence'>;
  readonly evidence: JsonValue | null;
  readonly evidence_blob: BlobRef | null;
} {
  const receipt = decodeReceipt(row);
  return {
    stored: {
      tenant_id: row.tenant_id,
      sha256: row.sha256,
      kind: row.kind,
      receipt,
      outcome: row.outcome,
      principal_id: row.principal_id,
      created_at_unix_ms: row.created_at_unix_ms,
    },
    evidence: row.evidence === null ? null : evidenceFromStored(row.kind, row.evidence, receipt.body),
    evidence_blob:
      row.evidence_sha256 === null ? null : { sha256: row.evidence_sha256, bytes: row.evidence_bytes ?? 0 },
  };
}

/** The tenant's receipt row with this digest, or null (also for another tenant's receipt). */
export async function getReceiptRow(db: Db, tenant_id: string, sha256: string): Promise<ReceiptRow | null> {
  const row = await db
    .select()
    .from(receipts)
    .where(and(eq(receipts.tenant_id, tenant_id), eq(receipts.sha256, sha256)))
    .get();
  return row ?? null;
}

/**
 * One line of a receipt archive: the row as the API would serve it (receipt decoded to
 * `{sha256, body}`, evidence parsed, or its R2 reference), so an archive reads without knowing any
 * storage encoding. Keys in canonical order when written with `toCanonicalText`.
 */
export function archiveLine(row: ReceiptRow): JsonValue {
  const r = receiptFromRow(row);
  return {
    tenant_id: row.tenant_id,
    sha256: row.sha256,
    kind: row.kind,
    outcome: row.outcome,
    principal_id: row.principal_id,
    created_at_unix_ms: row.created_at_unix_ms,
    receipt: r.stored.receipt,
    evidence: r.evidence,
    evidence_blob: r.evidence_blob === null ? null : { ...r.evidence_blob },
    observation_id: row.observation_id,
    observation_raw_sha256: row.observation_raw_sha256,
    observation_claim: row.observation_claim,
  };
}

const ArchiveLine = z.strictObject({
  tenant_id: z.string(),
  sha256: z.string(),
  kind: z.string(),
  outcome: z.string(),
  principal_id: z.string().nullable(),
  created_at_unix_ms: z.number().int(),
  receipt: z.strictObject({ sha256: z.string(), body: z.record(z.string(), z.json()) }),
  evidence: z.json().nullable(),
  evidence_blob: z.strictObject({ sha256: z.string(), bytes: z.number().int() }).nullable(),
  observation_id: z.string().nullable(),
  observation_raw_sha256: z.string().nullable(),
  observation_claim: z.string().nullable(),
});

/**
 * The receipt `sha256` of `tenant_id` from an archive's text (already verified against the archive
 * digest), re-hashed; null when the archive does not hold it.
 */
export function receiptFromArchive(
  text: string,
  tenant_id: string,
  sha256: string,
): {
  readonly stored: Omit<StoredReceipt, 'evidence'>;
  readonly evidence: JsonValue | null;
  readonly evidence_blob: BlobRef | null;
} | null {
  for (const line of text.split('\n')) {
    if (line === '' || !line.includes(sha256)) continue;
    const l = ArchiveLine.safeParse(parseStoredJson('receipt archive line', line));
    if (!l.success) throw new StoredDocumentError('stored receipt archive line does not match its schema');
    const a = l.data;
    if (a.sha256 !== sha256 || a.tenant_id !== tenant_id) continue;
    if (a.receipt.sha256 !== sha256 || digestOf(a.receipt.body) !== sha256) {
      throw new StoredDocumentError('archived receipt does not hash to its key');
    }
    return {
      stored: {
        tenant_id: a.tenant_id,
        sha256: a.sha256,
        kind: a.kind,
        receipt: { sha256: a.receipt.sha256, body: a.receipt.body as StoredReceipt['receipt']['body'] },
        outcome: a.outcome,
        principal_id: a.principal_id,
        created_at_unix_ms: a.created_at_unix_ms,
      },
      evidence: (a.evidence ?? null) as JsonValue | null,
      evidence_blob: a.evidence_blob,
    };
  }
  return null;
}

/** Moved beside the evidence encoding that needs it (src/db/evidence-encoding.ts). */
export { invocationFromReceiptBody } from './evidence-encoding.js';
