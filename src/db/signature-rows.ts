/**
 * How `receipt_signatures.envelope` stores a receipt's signature envelope (issue 10, "Bounded
 * D1"), and the one reader every consumer goes through (the log sequencer's drain, bundles, tenant
 * exports). What is read back is always the RFC 8785 canonical envelope text: the log leaf's bytes.
 *
 * Two forms, told apart by the text's first character, with no column to say which:
 * - `{`: the canonical envelope itself (every row written before this encoding, and any envelope
 *   the compact form could not give back exactly). Read as stored, unchanged.
 * - `[`: the positional form of a version 1 envelope: the canonical JSON array
 *   `[signature_version, issued_at_unix_ms, issuer, key_id, receipt_kind, signature, check]`
 *   (`SIGNATURE_LAYOUTS`, frozen: a stored row's meaning depends on it). `tenant_id` and
 *   `receipt_sha256` are the row's columns, `alg` is fixed by the version (`"Ed25519"`), and
 *   `check` is the canonical base64 of the first 9 bytes of the SHA-256 of the envelope's text.
 *   About 170 bytes instead of about 390.
 *
 * Guarantees: the writer stores the positional form only when reading it back gives the canonical
 * envelope byte for byte (otherwise the canonical text itself). The reader accepts only what the
 * writer writes: exactly the layout's length and types, the canonical spelling, and a `check` that
 * matches the envelope rebuilt with the row's `tenant_id` and `receipt_sha256`; anything else is a
 * `StoredDocumentError` (500), never a different leaf. The check stops an edited column, or a
 * corrupted value, from being served as another leaf (the signature would only be caught by a
 * verifier); it is no defence against a writer of D1, who could recompute it: that is what the
 * signature and the log's consistency proofs are for.
 * Never: changes the bytes of an envelope, or reads a row of the `{` form differently than before.
 */
import { hexToBytes } from '@noble/hashes/utils.js';
import { canonicalize, sha256HexOfText } from '../core/canonical/canonical.js';
import type { JsonValue } from '../core/canonical/json.js';
import { encodeBase64 } from '../core/receipts/base64.js';
import { StoredDocumentError, parseStoredJson } from './documents.js';

/** The columns a positional envelope takes its `tenant_id` and `receipt_sha256` from. */
export interface SignatureRowColumns {
  readonly tenant_id: string;
  readonly receipt_sha256: string;
}

/**
 * The frozen layout of each signature version's positional form: the constants the version fixes,
 * and the members stored, in array order after the version. Never edited (a new version would get
 * its own entry); a unit test checks version 1 against `SignatureEnvelope`.
 */
export const SIGNATURE_LAYOUTS: ReadonlyMap<
  number,
  { readonly constants: Readonly<Record<string, string>>; readonly members: readonly string[] }
> = new Map([
  [
    1,
    {
      constants: { alg: 'Ed25519' },
      members: ['issued_at_unix_ms', 'issuer', 'key_id', 'receipt_kind', 'signature'],
    },
  ],
]);

/** Members taken from the row's columns. */
const FROM_COLUMNS = ['tenant_id', 'receipt_sha256'] as const;
const CHECK_BYTES = 9;

/** The check of an envelope's canonical text: the first 9 bytes of its SHA-256, canonical base64. */
const checkOf = (leaf: string) => encodeBase64(hexToBytes(sha256HexOfText(leaf).slice(0, 2 * CHECK_BYTES)));

/**
 * The text to store for a canonical envelope text `leaf` in a row with these columns: the
 * positional form when it reads back as exactly `leaf`, otherwise `leaf` itself.
 */
export function encodeSignatureEnvelope(leaf: string, columns: SignatureRowColumns): string {
  const compact = positionalText(leaf, columns);
  return compact !== null && rebuiltLeaf(compact, columns) === leaf ? compact : leaf;
}

function positionalText(leaf: string, columns: SignatureRowColumns): string | null {
  let parsed: JsonValue;
  try {
    parsed = parseStoredJson('signature envelope', leaf);
  } catch {
    return null;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return null;
  const version = parsed.signature_version;
  const layout = typeof version === 'number' ? SIGNATURE_LAYOUTS.get(version) : undefined;
  if (layout === undefined) return null;
  const expected = [
    'signature_version',
    ...FROM_COLUMNS,
    ...Object.keys(layout.constants),
    ...layout.members,
  ];
  if (Object.keys(parsed).length !== expected.length || !expected.every((k) => Object.hasOwn(parsed, k))) {
    return null;
  }
  if (FROM_COLUMNS.some((k) => parsed[k] !== columns[k])) return null;
  if (Object.entries(layout.constants).some(([k, v]) => parsed[k] !== v)) return null;
  const values: JsonValue[] = [version as number, ...layout.members.map((k) => parsed[k] as JsonValue)];
  return canonicalize([...values, checkOf(leaf)]);
}

/** The canonical envelope text of a positional text, or null for any text the writer never writes. */
function rebuiltLeaf(text: string, columns: SignatureRowColumns): string | null {
  let parsed: JsonValue;
  try {
    parsed = parseStoredJson('signature envelope', text);
  } catch {
    return null;
  }
  if (!Array.isArray(parsed) || canonicalize(parsed) !== text) return null;
  const version = parsed[0];
  const layout = typeof version === 'number' ? SIGNATURE_LAYOUTS.get(version) : undefined;
  // The version, the layout's members, then the check.
  if (layout === undefined || parsed.length !== layout.members.length + 2) return null;
  const envelope: Record<string, JsonValue> = {
    ...layout.constants,
    receipt_sha256: columns.receipt_sha256,
    signature_version: version as number,
    tenant_id: columns.tenant_id,
  };
  for (const [i, k] of layout.members.entries()) {
    const v = parsed[i + 1] as JsonValue;
    // Only the types a version 1 envelope has: a number for its time, text for the rest.
    const ok =
      k === 'issued_at_unix_ms' ? Number.isSafeInteger(v) && (v as number) >= 0 : typeof v === 'string';
    if (!ok) return null;
    envelope[k] = v;
  }
  const leaf = canonicalize(envelope);
  return parsed[parsed.length - 1] === checkOf(leaf) ? leaf : null;
}

/**
 * The canonical envelope text (the log leaf's bytes) of a stored `envelope`: a `{` text as stored,
 * a `[` text rebuilt with the row's columns. Throws `StoredDocumentError` for any text the writer
 * never writes, or whose check does not match the columns: a 500, never a different leaf.
 */
export function decodeSignatureEnvelope(stored: string, columns: SignatureRowColumns): string {
  // A `{` row is served as stored, once it is what was written: a canonical object naming the
  // row's receipt and tenant (a `[` row with its first byte flipped is not).
  if (stored.startsWith('{') && isCanonicalEnvelopeOf(stored, columns)) return stored;
  if (stored.startsWith('[')) {
    const leaf = rebuiltLeaf(stored, columns);
    // Only what the writer writes: the same columns must give back exactly this text.
    if (leaf !== null && positionalText(leaf, columns) === stored) return leaf;
  }
  throw new StoredDocumentError('stored signature envelope does not match its row');
}

function isCanonicalEnvelopeOf(text: string, columns: SignatureRowColumns): boolean {
  let parsed: JsonValue;
  try {
    parsed = parseStoredJson('signature envelope', text);
  } catch {
    return false;
  }
  return (
    typeof parsed === 'object' &&
    parsed !== null &&
    !Array.isArray(parsed) &&
    FROM_COLUMNS.every((k) => parsed[k] === columns[k]) &&
    canonicalize(parsed) === text
  );
}
