/**
 * Receipt text encodings (src/db/receipts.ts, migrations/0004): whatever the encoding, a row
 * decodes to exactly the receipt that was stored, and a row whose columns no longer match its
 * text decodes to nothing (a refusal), never to a different receipt.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { digestOf } from '../../../src/core/canonical/canonical.js';
import { StoredDocumentError } from '../../../src/db/documents.js';
import { AuthorizationReceiptBodyV1, AuthorizationReceiptBodyV2 } from '../../../src/core/model.js';
import {
  POSITIONAL_LAYOUTS,
  RECEIPT_ENCODING,
  decodeReceipt,
  encodeReceipt,
} from '../../../src/db/receipts.js';

const id = fc.stringMatching(/^[a-z]{3}-[a-z2-7]{4,26}$/);
const body = fc.record({
  tenant_id: id,
  principal_id: id,
  decision: fc.constantFrom('authorized', 'denied'),
  n: fc.integer(),
  note: fc.string(),
  nested: fc.dictionary(fc.string({ maxLength: 8 }), fc.oneof(fc.string(), fc.integer(), fc.boolean())),
});

function stored(
  b: Record<string, unknown>,
  tenant_id: string,
  principal_id: string | null,
  kind = 'authorization',
) {
  const sha256 = digestOf(b);
  const { text, encoding } = encodeReceipt({
    tenant_id,
    principal_id,
    kind,
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
        const row = {
          ...s,
          kind: 'authorization',
          receipt: s.text,
          receipt_encoding: s.encoding,
          tenant_id: b.tenant_id,
        };
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
          kind: 'authorization',
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
        const row = {
          sha256: s.sha256,
          kind: 'authorization',
          receipt: s.text,
          receipt_encoding: s.encoding,
        };
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

// Encoding 3: authorization bodies with exactly a layout's members, drawn with any values the
// members could hold (digests lowercase hex or null), so nothing but the layout decides the text.
const hex = fc.stringMatching(/^[0-9a-f]{64}$/);
const anyValue = fc.oneof(
  fc.string(),
  fc.integer(),
  fc.constant(null),
  fc.boolean(),
  fc.dictionary(fc.string({ maxLength: 6 }), fc.oneof(fc.string(), fc.integer())),
  fc.array(fc.string({ maxLength: 12 }), { maxLength: 3 }),
);
function authorizationBody(version: 1 | 2) {
  const layout = POSITIONAL_LAYOUTS.get(`authorization/${version}`) ?? [];
  return fc
    .record({
      tenant_id: id,
      principal_id: id,
      values: fc.tuple(
        ...layout.map((k) => (k.endsWith('_sha256') ? fc.oneof(hex, fc.constant(null)) : anyValue)),
      ),
    })
    .map(({ tenant_id, principal_id, values }) => {
      const b: Record<string, unknown> = {
        tenant_id,
        principal_id,
        receipt_kind: 'authorization',
        receipt_version: version,
      };
      layout.forEach((k, i) => {
        b[k] = values[i];
      });
      return b;
    });
}
const anyAuthorizationBody = fc.oneof(authorizationBody(1), authorizationBody(2));

function positionalRow(b: Record<string, unknown>) {
  const s = stored(b, String(b.tenant_id), String(b.principal_id));
  return {
    sha256: s.sha256,
    kind: 'authorization',
    tenant_id: String(b.tenant_id),
    principal_id: String(b.principal_id) as string | null,
    receipt: s.text,
    receipt_encoding: s.encoding,
  };
}

describe('positional receipt encoding (3)', () => {
  it('has one frozen layout per authorization version, naming exactly its members', () => {
    const outside = ['principal_id', 'receipt_kind', 'receipt_version', 'tenant_id'];
    for (const [version, schema] of [
      [1, AuthorizationReceiptBodyV1],
      [2, AuthorizationReceiptBodyV2],
    ] as const) {
      const members = Object.keys(schema.shape)
        .filter((k) => !outside.includes(k))
        .sort();
      expect(POSITIONAL_LAYOUTS.get(`authorization/${version}`)).toEqual(members);
    }
  });

  it('decodes to the stored receipt, and is shorter than the compact text', () => {
    fc.assert(
      fc.property(anyAuthorizationBody, (b) => {
        const row = positionalRow(b);
        expect(row.receipt_encoding).toBe(RECEIPT_ENCODING.positional);
        expect(row.receipt.startsWith('[')).toBe(true);
        const { tenant_id: _t, principal_id: _p, ...rest } = b;
        expect(row.receipt.length).toBeLessThan(JSON.stringify(rest).length);
        expect(decodeReceipt(row)).toEqual({ sha256: row.sha256, body: b });
      }),
    );
  });

  it('is not written for a body it could not give back exactly', () => {
    fc.assert(
      fc.property(anyAuthorizationBody, fc.integer({ min: 0, max: 4 }), (b, how) => {
        const layout = POSITIONAL_LAYOUTS.get(`authorization/${String(b.receipt_version)}`) ?? [];
        const changed: Record<string, unknown> = { ...b };
        let kind = 'authorization';
        if (how === 0) changed.extra_member = 1;
        if (how === 1) delete changed[layout[3] as string];
        if (how === 2) changed.grant_sha256 = 'A'.repeat(64); // not lowercase hex
        if (how === 3) changed.receipt_version = 9; // no layout
        if (how === 4) kind = 'execution'; // the kind column is not the body's kind
        const s = stored(changed, String(b.tenant_id), String(b.principal_id), kind);
        expect(s.encoding).toBe(RECEIPT_ENCODING.compact);
        const row = {
          ...positionalRow(b),
          kind,
          sha256: s.sha256,
          receipt: s.text,
          receipt_encoding: s.encoding,
        };
        expect(decodeReceipt(row)).toEqual({ sha256: s.sha256, body: changed });
      }),
    );
  });

  it('refuses a row whose text or columns were changed after the write', () => {
    fc.assert(
      fc.property(anyAuthorizationBody, id, fc.nat(), (b, other, at) => {
        fc.pre(other !== b.principal_id && other !== b.tenant_id);
        const row = positionalRow(b);
        const values = JSON.parse(row.receipt) as unknown[];
        const i = 1 + (at % (values.length - 1));
        const refused = (r: typeof row) => expect(() => decodeReceipt(r)).toThrow(StoredDocumentError);
        // Columns: tenant, principal, kind, encoding.
        refused({ ...row, tenant_id: other });
        refused({ ...row, principal_id: other });
        refused({ ...row, principal_id: null });
        refused({ ...row, kind: 'execution' });
        refused({ ...row, receipt_encoding: RECEIPT_ENCODING.compact });
        // Text: one value changed, dropped, added, moved, or the version changed.
        const edit = (f: (v: unknown[]) => void) => {
          const v = [...values];
          f(v);
          return { ...row, receipt: JSON.stringify(v) };
        };
        refused(edit((v) => (v[i] = v[i] === 'x' ? 'y' : 'x')));
        refused(edit((v) => v.splice(i, 1)));
        refused(edit((v) => v.push(null)));
        refused(edit((v) => (v[0] = v[0] === 1 ? 2 : 1)));
        refused(edit((v) => (v[0] = 3)));
        if (values.length > 2 && JSON.stringify(values[1]) !== JSON.stringify(values[2])) {
          refused(edit((v) => ([v[1], v[2]] = [v[2], v[1]])));
        }
        refused({ ...row, receipt: JSON.stringify({ values }) });
      }),
    );
  });

  it('refuses a digest that is not exactly 32 bytes in canonical base64', () => {
    const b = fc.sample(authorizationBody(2), { numRuns: 1, seed: 7 })[0] as Record<string, unknown>;
    b.grant_sha256 = 'ab'.repeat(32);
    const row = positionalRow(b);
    expect(decodeReceipt(row).body).toEqual(b);
    const layout = POSITIONAL_LAYOUTS.get('authorization/2') ?? [];
    const at = 1 + layout.indexOf('grant_sha256');
    const values = JSON.parse(row.receipt) as unknown[];
    expect(values[at]).toBe(Buffer.from('ab'.repeat(32), 'hex').toString('base64'));
    for (const bad of [
      'ab'.repeat(32), // the hex itself
      Buffer.from('ab'.repeat(32), 'hex').toString('base64url'), // URL-safe, unpadded
      Buffer.from('ab'.repeat(31), 'hex').toString('base64'), // 31 bytes
      Buffer.from('ab'.repeat(33), 'hex').toString('base64'), // 33 bytes
      `${String(values[at]).slice(0, 42)}9=`, // non-zero unused bits
      123,
    ]) {
      const v = [...values];
      v[at] = bad;
      expect(() => decodeReceipt({ ...row, receipt: JSON.stringify(v) })).toThrow(StoredDocumentError);
    }
  });
});
