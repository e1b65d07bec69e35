/**
 * Known answers for Standard Webhooks `v1` signatures (src/core/identity/webhook.ts): the static
 * vector of the reference TypeScript library (standardwebhooks 1.1.1, `webhook.test.ts`, "sign
 * function works" and "multi sig payload is valid"), checked without running the library, so a
 * change to the signed content, the HMAC key decoding or the header parsing is caught even if the
 * library and Writ were to drift together.
 */
import { describe, expect, it } from 'vitest';
import {
  WEBHOOK_TOLERANCE_MS,
  parseWebhookSecret,
  signWebhook,
  verifyWebhook,
} from '../../../../src/core/identity/webhook.js';

// The reference library's vector: a 24-byte secret (the spec's minimum), its message id, timestamp
// and payload, and the signature the library's `sign` must produce for them.
const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const ID = 'msg_p5jXN8AQM9LWM0D4loKWxJek';
const TS = 1614265330;
const PAYLOAD = new TextEncoder().encode('{"test": 2432232314}');
const EXPECTED = 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=';
// A well-formed `v1` signature that signs nothing here, from the same test file.
const DECOY = 'v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=';

const KEY = parseWebhookSecret(SECRET) as Uint8Array;
const NOW = TS * 1000;

const verify = (signature: string, now = NOW, body = PAYLOAD) =>
  verifyWebhook({ id: ID, timestamp: String(TS), signature }, body, [KEY], now);

describe('the reference vector (standardwebhooks 1.1.1)', () => {
  it('the whsec_ secret decodes to its 24 key bytes', () => {
    expect(KEY).not.toBeNull();
    expect(KEY.byteLength).toBe(24);
  });

  it('Writ signs it to the reference signature', () => {
    expect(signWebhook(KEY, ID, TS, PAYLOAD)).toBe(EXPECTED);
  });

  it('Writ verifies the reference signature, alone and among other entries', () => {
    expect(verify(EXPECTED)).toEqual({
      ok: true,
      value: { webhook_id: ID, timestamp_seconds: TS, secret_index: 0 },
    });
    // The reference's multi-signature header: a decoy, an unknown version, the valid one, a decoy.
    const many = [DECOY, DECOY.replace('v1,', 'v2,'), EXPECTED, DECOY].join(' ');
    expect(verify(many).ok).toBe(true);
    // A rotation: the same message signed by an old and a new secret; either secret verifies it.
    const other = parseWebhookSecret(`whsec_${'A'.repeat(43)}=`) as Uint8Array;
    const both = `${signWebhook(other, ID, TS, PAYLOAD)} ${EXPECTED}`;
    const v = verifyWebhook({ id: ID, timestamp: String(TS), signature: both }, PAYLOAD, [other], NOW);
    expect(v.ok && v.value.secret_index).toBe(0);
    expect(verify(both).ok).toBe(true);
  });

  it('refuses the reference vector altered in any part, or outside the window', () => {
    const refused = (v: ReturnType<typeof verify>) => (v.ok ? 'ok' : v.error.reason);
    expect(refused(verify(DECOY))).toBe('no_matching_signature');
    expect(refused(verify(EXPECTED.slice(0, 8)))).toBe('no_matching_signature');
    expect(refused(verify('v1,'))).toBe('no_matching_signature');
    expect(refused(verify('v1,dawfeoifkpqwoekfpqoekf'))).toBe('no_matching_signature');
    expect(refused(verify(EXPECTED.replace('v1,', 'v1a,')))).toBe('no_matching_signature');
    expect(refused(verify(EXPECTED, NOW, new TextEncoder().encode('{"test": 2432232315}')))).toBe(
      'no_matching_signature',
    );
    expect(
      refused(verifyWebhook({ id: ID, timestamp: String(TS + 1), signature: EXPECTED }, PAYLOAD, [KEY], NOW)),
    ).toBe('no_matching_signature');
    expect(refused(verify(EXPECTED, NOW + WEBHOOK_TOLERANCE_MS))).toBe('ok');
    expect(refused(verify(EXPECTED, NOW - WEBHOOK_TOLERANCE_MS))).toBe('ok');
    expect(refused(verify(EXPECTED, NOW + WEBHOOK_TOLERANCE_MS + 1))).toBe('timestamp_out_of_window');
    expect(refused(verify(EXPECTED, NOW - WEBHOOK_TOLERANCE_MS - 1))).toBe('timestamp_out_of_window');
  });
});
