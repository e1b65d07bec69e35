import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { digestOf, sha256HexOfText, useSha256 } from '../../../../src/core/canonical/canonical.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import { sha256 } from '@noble/hashes/sha2.js';

const noble = (d: string | Uint8Array) =>
  bytesToHex(sha256(typeof d === 'string' ? new TextEncoder().encode(d) : d));

// Runs in Node. The Worker's own install (workerd's `node:crypto` under nodejs_compat) is checked
// inside workerd by test/integration/platform/runtime-sha256.test.ts.
describe('useSha256: a pluggable SHA-256 must prove itself first', () => {
  afterEach(() => {
    expect(useSha256(noble)).toBe(true);
  });

  it('installs an implementation that reproduces the known answers', () => {
    expect(useSha256((d) => createHash('sha256').update(d).digest('hex'))).toBe(true);
    expect(sha256HexOfText('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(digestOf({ b: 1, a: 'é€😀' })).toBe(noble('{"a":"é€😀","b":1}'));
  });

  it('refuses a wrong implementation and keeps the previous one', () => {
    const before = sha256HexOfText('writ');
    expect(useSha256(() => '0'.repeat(64))).toBe(false);
    // Right for ASCII but wrong for multi-byte text (e.g. hashing UTF-16 or latin1 bytes).
    expect(
      useSha256((d) =>
        createHash('sha256')
          .update(typeof d === 'string' ? Buffer.from(d, 'latin1') : d)
          .digest('hex'),
      ),
    ).toBe(false);
    // Uppercase hex would give one digest two spellings.
    expect(useSha256((d) => createHash('sha256').update(d).digest('hex').toUpperCase())).toBe(false);
    expect(
      useSha256(() => {
        throw new Error('boom');
      }),
    ).toBe(false);
    expect(sha256HexOfText('writ')).toBe(before);
  });
});
