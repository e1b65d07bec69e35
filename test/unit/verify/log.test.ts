/**
 * The receipt log verifier (src/verify/log.ts) inside `verifyBundle`: a real C2SP proof and
 * checkpoint pass; every single-character change to the log section's text fails; the proof of
 * another tenant's log, or a checkpoint signed by a key outside the trusted set, fails.
 */
import { describe, expect, it } from 'vitest';
import { generateKeyRing } from '../../../src/core/receipts/keys.js';
import { verifyBundle, verifyBundleBytes } from '../../../src/verify/bundle.js';
import { receiptLogVerifier } from '../../../src/verify/log.js';
import { authorizationBundle, keys, OTHER_SEED, ISSUER, realLog, ring } from './fixtures.js';

const base = authorizationBundle();
const logged = { ...base, log: realLog(base.signature) };
const opts = { trustedKeys: keys(), logVerifier: receiptLogVerifier } as const;

describe('receipt log verifier', () => {
  it('accepts a real inclusion proof and reports the index, size and origin', () => {
    const v = verifyBundle(JSON.parse(JSON.stringify(logged)), opts);
    expect(v).toMatchObject({
      valid: true,
      log: { status: 'included', inclusion: { index: 3, tree_size: 6 } },
    });
  });

  it('detects every single-character change inside the log section', () => {
    const text = JSON.stringify(logged);
    const start = text.indexOf('"log":');
    expect(start).toBeGreaterThan(0);
    let checked = 0;
    for (let i = start + 6; i < text.length - 1; i++) {
      const c = text[i]!;
      if (c === '"' || c === '{' || c === '}' || c === ',' || c === ':') continue;
      const mutated = text.slice(0, i) + (c === 'A' ? 'B' : 'A') + text.slice(i + 1);
      const v = verifyBundleBytes(new TextEncoder().encode(mutated), opts);
      expect(v.valid, `position ${i}`).toBe(false);
      checked++;
    }
    expect(checked).toBeGreaterThan(300);
  });

  it('refuses a checkpoint of another tenant’s log and one signed by an untrusted key', () => {
    // The same proof bytes, read for another tenant: the origin no longer matches.
    const other = { ...logged, log: realLog({ ...base.signature, tenant_id: 'tenant-other' }) };
    expect(verifyBundle(JSON.parse(JSON.stringify(other)), opts).failure?.reason).toBe('log_failed');
    // A log signed by a key the verifier does not trust.
    const stranger = ring(generateKeyRing(OTHER_SEED, ISSUER, 0));
    const untrusted = { ...logged, log: realLog(base.signature, stranger) };
    expect(verifyBundle(JSON.parse(JSON.stringify(untrusted)), opts)).toMatchObject({
      valid: false,
      failure: { reason: 'log_failed' },
    });
  });
});
