/**
 * Receipt text encodings (src/db/receipts.ts, migrations/0004): whatever the encoding, a row
 * decodes to exactly the receipt that was stored, and a row whose columns no longer match its
 * text decodes to nothing (a refusal), never to a different receipt.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { digestOf } from '../../../src/core/canonical/canonical.js';
import { StoredDocumentError } from '../../../src/db/documents.js';
import { RECEIPT_ENCODING, decodeReceipt, encodeReceipt } from '../../../src/db/receipts.js';

const id = fc.stringMatching(/^[a-z]{3}-[a-z2-7]{4,26}$/);
const body = fc.record({
  tenant_id: id,
  principal_id: id,
  decision: fc.constantFrom('authorized', 'denied'),
  n: fc.integer(),
  note: fc.string(),
  nested: fc.dictionary(fc.string({ maxLength: 8 }), fc.oneof(fc.string(), fc.integer(), fc.boolean())),
});

function stored(b: Record<string, unknown>, tenant_id: string, principal_id: string | null) {
  const sha256 = digestOf(b);
  const { text, encoding } = encodeReceipt({
    tenant_id,
    principal_id,
    kind: 'authorization',
    outcome: 'authorized',
    created_at_unix_ms: 0,
    receipt: { sha256, body: b },
  });
  return { sha256, text, encoding };
}

describe('receipt encodings', () => {
  it('decode to the stored receipt, compact when the ids are the columns', () => {
    fc.assert(
      fc.property(body, (b) => {
        const s = stored(b, b.tenant_id, b.principal_id);
        expect(s.encoding).toBe(RECEIPT_ENCODING.compact);
        expect(s.text).not.toContain(`"tenant_id"`);
        const row = { ...s, receipt: s.text, receipt_encoding: s.encoding, tenant_id: b.tenant_id };
        expect(decodeReceipt({ ...row, principal_id: b.principal_id })).toEqual({
          sha256: s.sha256,
          body: b,
        });
      }),
    );
  });

  it('keep the wrapped encoding when a column differs from the body', () => {
    fc.assert(
      fc.property(body, id, (b, other) => {
        fc.pre(other !== b.principal_id);
        const s = stored(b, b.tenant_id, other);
        expect(s.encoding).toBe(RECEIPT_ENCODING.wrapped);
        const row = {
          sha256: s.sha256,
          receipt: s.text,
          receipt_encoding: s.encoding,
          tenant_id: b.tenant_id,
        };
        expect(decodeReceipt({ ...row, principal_id: other })).toEqual({ sha256: s.sha256, body: b });
      }),
    );
  });

  it('refuse a row whose principal or tenant column was changed after the write', () => {
    fc.assert(
      fc.property(body, id, (b, other) => {
        fc.pre(other !== b.principal_id && other !== b.tenant_id);
        const s = stored(b, b.tenant_id, b.principal_id);
        const row = { sha256: s.sha256, receipt: s.text, receipt_encoding: s.encoding };
        expect(() => decodeReceipt({ ...row, tenant_id: b.tenant_id, principal_id: other })).toThrow(
          StoredDocumentError,
        );
        expect(() => decodeReceipt({ ...row, tenant_id: other, principal_id: b.principal_id })).toThrow(
          StoredDocumentError,
        );
        expect(() => decodeReceipt({ ...row, tenant_id: b.tenant_id, principal_id: null })).toThrow(
          StoredDocumentError,
        );
        expect(() =>
          decodeReceipt({
            ...row,
            receipt_encoding: 9,
            tenant_id: b.tenant_id,
            principal_id: b.principal_id,
          }),
        ).toThrow(StoredDocumentError);
      }),
    );
  });
});
