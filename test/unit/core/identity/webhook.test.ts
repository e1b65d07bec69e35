/**
 * Standard Webhooks verification (src/core/identity/webhook.ts): interoperability with the
 * reference TypeScript library `standardwebhooks` in both directions, and every refusal: missing,
 * malformed, out-of-window, wrong secret, mutated body, other id or timestamp.
 */
import fc from 'fast-check';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import {
  WEBHOOK_SECRET_PREFIX,
  WEBHOOK_TOLERANCE_MS,
  constantTimeEqual,
  formatWebhookSecret,
  parseWebhookSecret,
  signWebhook,
  verifyWebhook,
  type WebhookHeaders,
} from '../../../../src/core/identity/webhook.js';
import { encodeBase64 } from '../../../../src/core/receipts/base64.js';

const SECRET = formatWebhookSecret(new Uint8Array(32).map((_, i) => i * 7 + 1));
const OTHER = formatWebhookSecret(new Uint8Array(32).fill(9));
const KEY = parseWebhookSecret(SECRET) as Uint8Array;
const OTHER_KEY = parseWebhookSecret(OTHER) as Uint8Array;
const NOW = 1_767_225_661_000;
const TS = Math.floor(NOW / 1000);
const BODY = new TextEncoder().encode('{"operation_id":"x","observation":{"a":1}}');
const ID = 'msg_2KWPBgLlAfxdpx2AI54pPJ85f4W';

function headers(o: Partial<WebhookHeaders> = {}): WebhookHeaders {
  return { id: ID, timestamp: String(TS), signature: signWebhook(KEY, ID, TS, BODY), ...o };
}

const reason = (h: WebhookHeaders, body = BODY, keys = [KEY], now = NOW) => {
  const v = verifyWebhook(h, body, keys, now);
  return v.ok ? 'ok' : v.error.reason;
};

describe('webhook secrets', () => {
  it('are whsec_ + canonical base64 of 24 to 64 bytes', () => {
    expect(SECRET.startsWith(WEBHOOK_SECRET_PREFIX)).toBe(true);
    expect(parseWebhookSecret(SECRET)).toEqual(KEY);
    expect(parseWebhookSecret(SECRET.slice(WEBHOOK_SECRET_PREFIX.length))).toBeNull();
    expect(parseWebhookSecret(`${WEBHOOK_SECRET_PREFIX}${encodeBase64(new Uint8Array(23))}`)).toBeNull();
    expect(parseWebhookSecret(`${WEBHOOK_SECRET_PREFIX}${encodeBase64(new Uint8Array(65))}`)).toBeNull();
    expect(parseWebhookSecret(`${WEBHOOK_SECRET_PREFIX}not base64!`)).toBeNull();
    expect(() => formatWebhookSecret(new Uint8Array(16))).toThrow(RangeError);
  });
});

describe('interoperability with the reference library (standardwebhooks 1.1.1)', () => {
  it('verifies what the reference library signs, and the reference library verifies what Writ signs', () => {
    const now = Date.now();
    const ts = Math.floor(now / 1000);
    const text = new TextDecoder().decode(BODY);
    const reference = new Webhook(SECRET);
    const theirs = reference.sign(ID, new Date(ts * 1000), text);
    expect(theirs).toBe(signWebhook(KEY, ID, ts, BODY));
    expect(reason({ id: ID, timestamp: String(ts), signature: theirs }, BODY, [KEY], now)).toBe('ok');
    const ours = signWebhook(KEY, ID, ts, BODY);
    expect(() =>
      reference.verify(text, {
        'webhook-id': ID,
        'webhook-timestamp': String(ts),
        'webhook-signature': ours,
      }),
    ).not.toThrow();
  });
});

describe('verifyWebhook', () => {
  it('accepts a valid signature, and says which secret matched', () => {
    const v = verifyWebhook(headers(), BODY, [OTHER_KEY, KEY], NOW);
    expect(v).toEqual({ ok: true, value: { webhook_id: ID, timestamp_seconds: TS, secret_index: 1 } });
  });

  it('missing headers', () => {
    expect(reason(headers({ id: undefined }))).toBe('missing_headers');
    expect(reason(headers({ timestamp: undefined }))).toBe('missing_headers');
    expect(reason(headers({ signature: undefined }))).toBe('missing_headers');
  });

  it('malformed headers: an id with a dot, a timestamp that is not plain decimal seconds, no v1 entry', () => {
    expect(reason(headers({ id: 'msg.1' }))).toBe('malformed_headers');
    expect(reason(headers({ id: '' }))).toBe('malformed_headers');
    expect(reason(headers({ id: 'x'.repeat(129) }))).toBe('malformed_headers');
    for (const t of [`0${TS}`, `${TS}.0`, `+${TS}`, `${TS}e0`, ` ${TS}`, '', String(NOW)]) {
      expect(reason(headers({ timestamp: t })), t).not.toBe('ok');
    }
    expect(reason(headers({ timestamp: `0${TS}` }))).toBe('malformed_headers');
    expect(reason(headers({ signature: '' }))).toBe('malformed_headers');
    expect(reason(headers({ signature: 'v1,x '.repeat(17) }))).toBe('malformed_headers');
    expect(reason(headers({ signature: 'x'.repeat(4097) }))).toBe('malformed_headers');
  });

  it('a timestamp outside the window, on either side; the window edge is inside', () => {
    const edge = TS * 1000;
    expect(reason(headers(), BODY, [KEY], edge + WEBHOOK_TOLERANCE_MS)).toBe('ok');
    expect(reason(headers(), BODY, [KEY], edge - WEBHOOK_TOLERANCE_MS)).toBe('ok');
    expect(reason(headers(), BODY, [KEY], edge + WEBHOOK_TOLERANCE_MS + 1)).toBe('timestamp_out_of_window');
    expect(reason(headers(), BODY, [KEY], edge - WEBHOOK_TOLERANCE_MS - 1)).toBe('timestamp_out_of_window');
  });

  it('a signature by another secret, for another id or timestamp, or no secret at all', () => {
    expect(reason(headers(), BODY, [OTHER_KEY])).toBe('no_matching_signature');
    expect(reason(headers(), BODY, [])).toBe('no_matching_signature');
    expect(reason(headers({ signature: signWebhook(KEY, 'msg_other', TS, BODY) }))).toBe(
      'no_matching_signature',
    );
    expect(reason(headers({ signature: signWebhook(KEY, ID, TS + 1, BODY) }))).toBe('no_matching_signature');
    // The asymmetric scheme and unknown versions are skipped, not taken as a pass.
    const v1 = signWebhook(KEY, ID, TS, BODY);
    expect(reason(headers({ signature: v1.replace('v1,', 'v1a,') }))).toBe('no_matching_signature');
    expect(reason(headers({ signature: `v2,abc v1a,${v1.slice(3)} ${v1}` }))).toBe('ok');
  });

  it('any change to one body byte fails (property)', () => {
    fc.assert(
      fc.property(fc.nat({ max: BODY.byteLength - 1 }), fc.integer({ min: 1, max: 255 }), (i, x) => {
        const mutated = BODY.slice();
        mutated[i] = (mutated[i] as number) ^ x;
        return reason(headers(), mutated) === 'no_matching_signature';
      }),
    );
  });

  it('constantTimeEqual compares whole byte strings', () => {
    expect(constantTimeEqual(new Uint8Array([1, 2]), new Uint8Array([1, 2]))).toBe(true);
    expect(constantTimeEqual(new Uint8Array([1, 2]), new Uint8Array([1, 3]))).toBe(false);
    expect(constantTimeEqual(new Uint8Array([1, 2]), new Uint8Array([1, 2, 3]))).toBe(false);
  });
});
