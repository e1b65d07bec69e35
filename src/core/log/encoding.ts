/**
 * Byte and text encodings shared by the transparency-log formats: strict RFC 4648 §4 base64,
 * canonical decimal numbers, strict UTF-8 and constant-shape byte comparison.
 *
 * Guarantees: `decodeBase64` accepts exactly the text `encodeBase64` produces (standard
 * alphabet, `=` padding, zero pad bits), so every value has one encoding and a changed character
 * never decodes to the same bytes. `parseDecimal` accepts only `0` or a digit string without
 * leading zeros that fits a safe integer. Nothing here throws on any input.
 * Never: reads a clock or does I/O; uses no platform API beyond TextEncoder / TextDecoder.
 */

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const DECODE = (() => {
  const table = new Int16Array(128).fill(-1);
  for (let i = 0; i < ALPHABET.length; i++) table[ALPHABET.charCodeAt(i)] = i;
  return table;
})();

export function encodeBase64(bytes: Uint8Array): string {
  let out = '';
  let i = 0;
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
    out += ALPHABET[n >> 18]! + ALPHABET[(n >> 12) & 63]! + ALPHABET[(n >> 6) & 63]! + ALPHABET[n & 63]!;
  }
  const rest = bytes.length - i;
  if (rest === 1) {
    const n = bytes[i]! << 16;
    out += ALPHABET[n >> 18]! + ALPHABET[(n >> 12) & 63]! + '==';
  } else if (rest === 2) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8);
    out += ALPHABET[n >> 18]! + ALPHABET[(n >> 12) & 63]! + ALPHABET[(n >> 6) & 63]! + '=';
  }
  return out;
}

/**
 * Strict base64: length a multiple of 4, standard alphabet, padding only at the end and only as
 * needed, unused pad bits zero. Returns undefined for anything else (malleable encodings would
 * let one signature or hash be written several ways).
 */
export function decodeBase64(text: string): Uint8Array | undefined {
  if (text.length % 4 !== 0) return undefined;
  let pad = 0;
  if (text.endsWith('==')) pad = 2;
  else if (text.endsWith('=')) pad = 1;
  const out = new Uint8Array((text.length / 4) * 3 - pad);
  let o = 0;
  for (let i = 0; i < text.length; i += 4) {
    const last = i + 4 === text.length;
    const v: number[] = [];
    for (let j = 0; j < 4; j++) {
      const c = text.charCodeAt(i + j);
      if (c === 61 /* '=' */ && last && j >= 4 - pad) {
        v.push(0);
        continue;
      }
      const d = c < 128 ? DECODE[c]! : -1;
      if (d < 0) return undefined;
      v.push(d);
    }
    const n = (v[0]! << 18) | (v[1]! << 12) | (v[2]! << 6) | v[3]!;
    if (last && pad === 2) {
      if ((n & 0xffff) !== 0) return undefined;
      out[o++] = n >> 16;
    } else if (last && pad === 1) {
      if ((n & 0xff) !== 0) return undefined;
      out[o++] = n >> 16;
      out[o++] = (n >> 8) & 0xff;
    } else {
      out[o++] = n >> 16;
      out[o++] = (n >> 8) & 0xff;
      out[o++] = n & 0xff;
    }
  }
  return out;
}

/** Digits of a safe integer: at most 16 (2^53 - 1 has 16 digits). */
const MAX_DECIMAL_DIGITS = 16;

/**
 * `0`, or a non-zero digit followed by digits, as a safe integer. No sign, no leading zeros, no
 * spaces (C2SP tlog-checkpoint and tlog-proof both require "no leading zeroes").
 */
export function parseDecimal(text: string): number | undefined {
  if (text.length === 0 || text.length > MAX_DECIMAL_DIGITS) return undefined;
  if (!/^(?:0|[1-9][0-9]*)$/.test(text)) return undefined;
  const n = Number(text);
  return Number.isSafeInteger(n) ? n : undefined;
}

const utf8Decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const utf8Encoder = new TextEncoder();

export function utf8(text: string): Uint8Array {
  return utf8Encoder.encode(text);
}

/** Strict UTF-8 decoding; undefined for invalid sequences (never U+FFFD substitution). */
export function decodeUtf8(bytes: Uint8Array): string | undefined {
  try {
    return utf8Decoder.decode(bytes);
  } catch {
    return undefined;
  }
}

export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}

export function concatBytes(...parts: readonly Uint8Array[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}
