/**
 * The service's receipt signer (src/platform/receipt-keys.ts): byte-identical to the core's
 * portable signer, and fail closed: no key ring, an invalid one, an issuer that cannot name a log,
 * or an active key outside its window all refuse with `signing_unavailable` (503).
 */
import { describe, expect, it } from 'vitest';
import { digestOf } from '../../../src/core/canonical/canonical.js';
import { generateKeyRing, parseKeyRing, trustedKeysOfRing } from '../../../src/core/receipts/keys.js';
import { signReceipt, verifyReceiptSignature } from '../../../src/core/receipts/signing.js';
import { logKey, publishedKeys, receiptSigner } from '../../../src/platform/receipt-keys.js';
import { ed25519Signer, verifyEd25519 } from '../../../src/core/log/note.js';
import { utf8 } from '../../../src/core/log/encoding.js';
import { checkpointOf, checkpointBodyOf } from '../../../src/core/log/sequencer.js';
import { attachCheckpointSignature } from '../../../src/core/log/checkpoint.js';
import { EMPTY_LOG_STATE, appendLeaves } from '../../../src/core/log/tiles.js';
import { ServiceError } from '../../../src/services/errors.js';

const AT = 1_767_225_600_000;
const doc = generateKeyRing(new Uint8Array(32).fill(5), 'writ.example', 0);
const text = JSON.stringify(doc);

function receipt(n: number) {
  const body = { receipt_kind: 'execution', tenant_id: 't_1', n };
  return { sha256: digestOf(body), body };
}

async function refusal(p: Promise<unknown> | (() => unknown)): Promise<string> {
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (e) {
    return e instanceof ServiceError ? e.reason : `other: ${String(e)}`;
  }
  return 'none';
}

describe('receipt signer', () => {
  it('signs exactly as the portable core signer, and the signature verifies strictly', async () => {
    const ring = parseKeyRing(text);
    if (!ring.ok) throw new Error('ring');
    for (let n = 0; n < 20; n++) {
      const r = receipt(n);
      const native = await receiptSigner({ WRIT_RECEIPT_KEYS: text })(r, AT + n);
      const portable = signReceipt(ring.value, r, AT + n);
      expect(portable).toEqual({ ok: true, value: native });
      expect(verifyReceiptSignature(native, r, trustedKeysOfRing(ring.value)).ok).toBe(true);
    }
  });

  it('refuses with signing_unavailable without a usable key ring, before signing anything', async () => {
    const r = receipt(1);
    const plus = JSON.stringify({ ...doc, issuer: 'writ+example' });
    const retired = JSON.stringify({
      ...doc,
      keys: doc.keys.map((k) => ({ ...k, signing_until_unix_ms: AT })),
    });
    for (const bad of [undefined, '', ' ', 'not json', '{}', plus, text.replace('"keys"', '"keyz"')]) {
      const env = bad === undefined ? {} : { WRIT_RECEIPT_KEYS: bad };
      expect(await refusal(receiptSigner(env)(r, AT)), String(bad)).toBe('signing_unavailable');
      expect(await refusal(() => publishedKeys(env, AT))).toBe('signing_unavailable');
      expect(await refusal(() => logKey(env, 't_1'))).toBe('signing_unavailable');
    }
    // A retired active key cannot sign after its window; it still signs inside it (old receipts).
    expect(await refusal(receiptSigner({ WRIT_RECEIPT_KEYS: retired })(r, AT))).toBe('signing_unavailable');
    expect(await refusal(receiptSigner({ WRIT_RECEIPT_KEYS: retired })(r, AT - 1))).toBe('none');
  });

  it('names each tenant log by the issuer and tenant, and signs its checkpoints with the active key', () => {
    const k = logKey({ WRIT_RECEIPT_KEYS: text }, 't_1');
    expect(k.origin).toBe('writ.example/log/t_1');
    const portable = ed25519Signer('writ.example/log/t_1', new Uint8Array(32).fill(5));
    if (!portable.ok) throw new Error('signer');
    expect(k.keyId).toBe(portable.value.keyId);
  });

  it('signs checkpoints natively, byte-identical to the portable signer (known answer)', async () => {
    // The runtime has native Ed25519: otherwise logKey falls back and this compares portable to itself.
    const pkcs8 = Uint8Array.of(
      ...[0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20],
      ...new Uint8Array(32).fill(5),
    );
    expect((await crypto.subtle.importKey('pkcs8', pkcs8, 'Ed25519', false, ['sign'])).type).toBe('private');
    const k = logKey({ WRIT_RECEIPT_KEYS: text }, 't_1');
    const portable = ed25519Signer(k.origin, new Uint8Array(32).fill(5));
    if (!portable.ok) throw new Error('signer');
    let state = EMPTY_LOG_STATE;
    for (let n = 0; n < 20; n++) {
      const body = checkpointBodyOf(state, k.origin);
      if (!body.ok) throw new Error('body');
      const native = attachCheckpointSignature(body.value, {
        name: k.origin,
        keyId: k.keyId,
        signature: await k.sign(utf8(body.value)),
      });
      // The note the drain publishes equals the one the previous (portable, synchronous) path made.
      expect(native).toEqual(checkpointOf(state, k.origin, portable.value));
      const next = appendLeaves(state, [new Uint8Array(32).fill(n)]);
      if (!next.ok) throw new Error('append');
      state = next.value.state;
    }
  });

  it('a rotated key ring takes effect at the next call, for every tenant, with no stale signer', async () => {
    const at = AT;
    const next = generateKeyRing(new Uint8Array(32).fill(6), 'writ.example', at);
    const rotated = JSON.stringify({
      ...doc,
      active: next.active,
      keys: [...doc.keys.map((k) => ({ ...k, signing_until_unix_ms: at })), ...next.keys],
    });
    const msg = utf8('writ.example/log/t_1\n0\nx\n');
    const ringOf = (t: string) => {
      const r = parseKeyRing(t);
      if (!r.ok) throw new Error('ring');
      return r.value;
    };
    for (const [ringText, seed] of [
      [text, 5],
      [rotated, 6],
      [text, 5],
    ] as const) {
      const k = logKey({ WRIT_RECEIPT_KEYS: ringText }, 't_1');
      const signature = await k.sign(msg);
      const portable = ed25519Signer(k.origin, new Uint8Array(32).fill(seed));
      if (!portable.ok) throw new Error('signer');
      expect(k.keyId).toBe(portable.value.keyId);
      expect(signature).toEqual(portable.value.sign(msg));
      expect(verifyEd25519(ringOf(ringText).active.public_key, msg, signature)).toBe(true);
    }
  });
});
