/**
 * Signature envelope storage (src/db/signature-rows.ts): a row reads back as exactly the canonical
 * envelope that was signed (the log leaf's bytes), whatever form it was stored in, and a row whose
 * text or columns changed after the write is refused, never read as a different leaf.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalize } from '../../../src/core/canonical/canonical.js';
import { RECEIPT_KINDS, SignatureEnvelope } from '../../../src/core/receipts/signing.js';
import { StoredDocumentError } from '../../../src/db/documents.js';
import {
  SIGNATURE_LAYOUTS,
  decodeSignatureEnvelope,
  encodeSignatureEnvelope,
} from '../../../src/db/signature-rows.js';

const id = fc.stringMatching(/^[a-z]{3}-[a-z0-9._:-]{1,40}$/);
const hex = (n: number) => fc.stringMatching(new RegExp(`^[0-9a-f]{${n}}$`));
const base64Signature = fc
  .uint8Array({ minLength: 64, maxLength: 64 })
  .map((b) => Buffer.from(b).toString('base64'));
const envelope = fc.record({
  signature_version: fc.constant(1 as const),
  alg: fc.constant('Ed25519' as const),
  issuer: id,
  key_id: hex(16),
  tenant_id: id,
  receipt_kind: fc.constantFrom(...RECEIPT_KINDS),
  receipt_sha256: hex(64),
  issued_at_unix_ms: fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }),
  signature: base64Signature,
});

function row(e: SignatureEnvelope) {
  const columns = { tenant_id: e.tenant_id, receipt_sha256: e.receipt_sha256 };
  const leaf = canonicalize(e);
  return { columns, leaf, stored: encodeSignatureEnvelope(leaf, columns) };
}

/** Every text one byte away from `text` (each position: a few replacements, and the byte deleted). */
function mutations(text: string): string[] {
  const out = new Set<string>();
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    for (const r of [c ^ 1, c ^ 2, c ^ 32, 0x5b, 0x7b, 0x22, 0x30, 0x41]) {
      out.add(text.slice(0, i) + String.fromCharCode(r) + text.slice(i + 1));
    }
    out.add(text.slice(0, i) + text.slice(i + 1));
  }
  out.delete(text);
  return [...out];
}

/** Refused (a `StoredDocumentError`) or read as exactly `leaf`: never another leaf. */
function refusedOrSame(stored: string, columns: { tenant_id: string; receipt_sha256: string }, leaf: string) {
  let got: string;
  try {
    got = decodeSignatureEnvelope(stored, columns);
  } catch (e) {
    expect(e).toBeInstanceOf(StoredDocumentError);
    return;
  }
  expect(got).toBe(leaf);
}

describe('signature envelope storage', () => {
  it('has one frozen layout for version 1, naming every member but the columns and the version', () => {
    const layout = SIGNATURE_LAYOUTS.get(1);
    expect(layout).toEqual({
      constants: { alg: 'Ed25519' },
      members: ['issued_at_unix_ms', 'issuer', 'key_id', 'receipt_kind', 'signature'],
    });
    expect(
      [
        'receipt_sha256',
        'signature_version',
        'tenant_id',
        ...Object.keys(layout?.constants ?? {}),
        ...(layout?.members ?? []),
      ].sort(),
    ).toEqual(Object.keys(SignatureEnvelope.shape).sort());
  });

  it('stores a version 1 envelope as a positional array that reads back byte for byte', () => {
    fc.assert(
      fc.property(envelope, (e) => {
        const { columns, leaf, stored } = row(e);
        expect(stored.startsWith('[')).toBe(true);
        expect(stored).not.toContain(e.receipt_sha256);
        expect(stored.length).toBeLessThan(leaf.length - 180);
        expect(JSON.parse(stored)).toHaveLength(7);
        expect(decodeSignatureEnvelope(stored, columns)).toBe(leaf);
      }),
    );
  });

  it('reads a stored canonical object (rows from before the positional form) unchanged', () => {
    fc.assert(
      fc.property(envelope, (e) => {
        const { columns, leaf } = row(e);
        expect(decodeSignatureEnvelope(leaf, columns)).toBe(leaf);
      }),
    );
  });

  it('keeps the canonical object when the array could not give it back exactly', () => {
    fc.assert(
      fc.property(envelope, id, fc.integer({ min: 0, max: 6 }), (e, other, how) => {
        const { columns } = row(e);
        const changed: Record<string, unknown> = { ...e };
        const cols = { ...columns };
        if (how === 0) changed.extra = 1; // a member the layout has not
        if (how === 1) delete changed.key_id; // a member missing
        if (how === 2) changed.alg = 'Ed448'; // not the version's constant
        if (how === 3) changed.signature_version = 2; // no layout
        if (how === 4) cols.tenant_id = `${other}x`; // the tenant column is not the envelope's
        if (how === 5)
          cols.receipt_sha256 = 'f'.repeat(64) === e.receipt_sha256 ? '0'.repeat(64) : 'f'.repeat(64);
        if (how === 6) changed.issued_at_unix_ms = 1.5; // a time the layout does not hold
        const leaf = canonicalize(changed);
        expect(encodeSignatureEnvelope(leaf, cols)).toBe(leaf);
        // Not canonical text: stored as given, never re-spelled.
        const spaced = JSON.stringify(changed, null, 1);
        expect(encodeSignatureEnvelope(spaced, columns)).toBe(spaced);
      }),
    );
  });

  it('refuses, or reads unchanged, every one-byte change of a positional text', () => {
    fc.assert(
      fc.property(envelope, (e) => {
        const { columns, leaf, stored } = row(e);
        for (const m of mutations(stored)) refusedOrSame(m, columns, leaf);
      }),
      { numRuns: 20 },
    );
  });

  it("refuses, or reads unchanged, every one-byte change of the row's tenant_id or receipt_sha256", () => {
    fc.assert(
      fc.property(envelope, (e) => {
        const { columns, leaf, stored } = row(e);
        for (const t of mutations(columns.tenant_id))
          refusedOrSame(stored, { ...columns, tenant_id: t }, leaf);
        for (const s of mutations(columns.receipt_sha256))
          refusedOrSame(stored, { ...columns, receipt_sha256: s }, leaf);
      }),
      { numRuns: 20 },
    );
  });

  it('refuses an object row that does not name its columns, and any text that is neither form', () => {
    fc.assert(
      fc.property(envelope, id, (e, other) => {
        fc.pre(other !== e.tenant_id);
        const { columns, leaf, stored } = row(e);
        const refused = (text: string, cols = columns) =>
          expect(() => decodeSignatureEnvelope(text, cols)).toThrow(StoredDocumentError);
        refused(leaf, { ...columns, tenant_id: other });
        refused(leaf, {
          ...columns,
          receipt_sha256: '0'.repeat(64) === e.receipt_sha256 ? '1'.repeat(64) : '0'.repeat(64),
        });
        refused(JSON.stringify(e, null, 1)); // not canonical
        refused(` ${stored}`);
        refused('');
        refused('"a"');
        // The array re-spelled, re-ordered, shortened or lengthened, or with its check dropped.
        const values = JSON.parse(stored) as unknown[];
        refused(JSON.stringify(values, null, 1));
        refused(JSON.stringify([...values, null]));
        refused(JSON.stringify(values.slice(0, -1)));
        refused(JSON.stringify([values[0], values[2], values[1], ...values.slice(3)]));
        refused(JSON.stringify([2, ...values.slice(1)]));
        refused(JSON.stringify(values.map((v, i) => (i === 1 ? String(v) : v))));
      }),
    );
  });
});
