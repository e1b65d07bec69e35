/**
 * The verification kept between the calls of an upload's import
 * (src/services/import-verification-state.ts): opened only if this key sealed exactly these bytes
 * and they name this upload, file digest and object version; of other rules, stale.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type KeptBinding,
  type KeptVerification,
  deriveRecordKey,
  deriveStateKey,
  openKept,
  recordSealed,
  sealKept,
  sealRecord,
} from '../../../src/services/import-verification-state.js';

const SECRET = 'a-platform-admin-token-of-at-least-32-characters';
const binding: KeptBinding = { upload_id: '0'.repeat(32), sha256: 'a'.repeat(64), version: 'v1', rules: 2 };
const kept: KeptVerification = {
  phase: 'verified',
  found: {
    tenant_id: 'ten-a',
    name: 'a',
    created_at_unix_ms: 1,
    rows_total: 3,
    exported_max_seq: 0,
    principals: [],
    quota: { table: 'tenant_quotas', row: { tenant_id: 'ten-a' } },
  },
};

describe('a kept verification', () => {
  it('opens with the key that sealed it, for the binding it was sealed with', async () => {
    const key = await deriveStateKey(SECRET);
    expect(await openKept(key, await sealKept(key, binding, kept), binding)).toEqual({ kept });
  });

  it('is refused when any of its bytes changed (property: one character replaced anywhere)', async () => {
    const key = await deriveStateKey(SECRET);
    const sealed = await sealKept(key, binding, kept);
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: sealed.length - 1 }),
        fc.integer({ min: 32, max: 126 }),
        async (at, code) => {
          fc.pre(sealed.charCodeAt(at) !== code);
          const changed = sealed.slice(0, at) + String.fromCharCode(code) + sealed.slice(at + 1);
          expect(await openKept(key, changed, binding)).toHaveProperty('refused');
        },
      ),
      { numRuns: 200 },
    );
    expect(await openKept(key, sealed.slice(65), binding)).toEqual({ refused: 'is not sealed' });
  });

  it('sealed under another secret is refused', async () => {
    const sealed = await sealKept(await deriveStateKey(`${SECRET}-rotated`), binding, kept);
    expect(await openKept(await deriveStateKey(SECRET), sealed, binding)).toEqual({
      refused: 'does not match its seal',
    });
  });

  it('of another upload, file digest or object version is refused though its seal is good', async () => {
    const key = await deriveStateKey(SECRET);
    const open = async (b: Partial<KeptBinding>) =>
      openKept(key, await sealKept(key, { ...binding, ...b }, kept), binding);
    expect(await open({ upload_id: '1'.repeat(32) })).toEqual({ refused: 'is of another upload' });
    expect(await open({ sha256: 'b'.repeat(64) })).toEqual({ refused: 'is of another file digest' });
    expect(await open({ version: 'v2' })).toEqual({ refused: 'is of another object version' });
    // Other rules: nothing is wrong, the file is verified again.
    expect(await open({ rules: 1 })).toEqual({ stale: true });
  });

  it('needs a secret of at least 32 characters to derive its key', async () => {
    await expect(deriveStateKey('short')).rejects.toThrow(/32 characters/);
  });
});

describe("a completed upload's record seal", () => {
  const file = { sha256: 'a'.repeat(64), bytes: 10, version: 'v1' };
  const id = '0'.repeat(32);

  it('holds for the id, digest, size and version it was made for, and for no other', async () => {
    const key = await deriveRecordKey(SECRET);
    const seal = await sealRecord(key, id, file);
    expect(await recordSealed(key, id, file, seal)).toBe(true);
    // A record rewritten to name other bytes, or another upload's record copied here.
    expect(await recordSealed(key, '1'.repeat(32), file, seal)).toBe(false);
    for (const other of [{ sha256: 'b'.repeat(64) }, { bytes: 11 }, { version: 'v2' }])
      expect(await recordSealed(key, id, { ...file, ...other }, seal)).toBe(false);
    // No seal (a record completed before records were sealed), or not a MAC.
    for (const bad of [undefined, null, '', seal.toUpperCase(), `${seal}0`])
      expect(await recordSealed(key, id, file, bad)).toBe(false);
  });

  it('is under its own key: the kept-state key and another secret do not make it', async () => {
    const seal = await sealRecord(await deriveStateKey(SECRET), id, file);
    expect(await recordSealed(await deriveRecordKey(SECRET), id, file, seal)).toBe(false);
    const other = await sealRecord(await deriveRecordKey(`${SECRET}-rotated`), id, file);
    expect(await recordSealed(await deriveRecordKey(SECRET), id, file, other)).toBe(false);
  });
});
