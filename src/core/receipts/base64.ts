/**
 * Strict standard base64 (RFC 4648 §4, with padding) for keys and signatures.
 *
 * Guarantees: `decodeBase64` accepts only the canonical spelling, the one `encodeBase64` writes:
 * standard alphabet, `=` padding, no whitespace, and zero unused bits in the last character. So a
 * key or a signature has exactly one text form, and a changed character is never "the same bytes".
 * Never: accepts the URL-safe alphabet, missing padding or line breaks, or reads any global.
 */
const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const VALUES = new Map<string, number>([...ALPHABET].map((c, i) => [c, i]));

export function encodeBase64(bytes: Uint8Array): string {
  let out = '';
  for (let i = 0; i < bytes.length; i += 3) {
    const a = bytes[i] as number;
    const b = i + 1 < bytes.length ? (bytes[i + 1] as number) : 0;
    const c = i + 2 < bytes.length ? (bytes[i + 2] as number) : 0;
    const n = (a << 16) | (b << 8) | c;
    out += ALPHABET[(n >> 18) & 63];
    out += ALPHABET[(n >> 12) & 63];
    out += i + 1 < bytes.length ? ALPHABET[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.length ? ALPHABET[n & 63] : '=';
  }
  return out;
}

/** The bytes of a canonical base64 text, or `null` for any other text. */
export function decodeBase64(text: string): Uint8Array | null {
  if (text.length % 4 !== 0) return null;
  const pad = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0;
  const out = new Uint8Array((text.length / 4) * 3 - pad);
  let o = 0;
  for (let i = 0; i < text.length; i += 4) {
    const last = i + 4 === text.length;
    let n = 0;
    for (let j = 0; j < 4; j++) {
      const ch = text[i + j] as string;
      if (ch === '=' && last && j >= 4 - pad) {
        n <<= 6;
        continue;
      }
      const v = VALUES.get(ch);
      if (v === undefined) return null;
      n = (n << 6) | v;
    }
    out[o++] = (n >> 16) & 255;
    if (o < out.length) out[o++] = (n >> 8) & 255;
    if (o < out.length) out[o++] = n & 255;
  }
  // Non-zero unused bits would give a second spelling of the same bytes.
  return encodeBase64(out) === text ? out : null;
}
