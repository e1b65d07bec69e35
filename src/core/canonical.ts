/**
 * Canonical identity: RFC 8785 JSON Canonicalization Scheme (JCS) and SHA-256 over it.
 *
 * Guarantees: the same JSON value always yields the same bytes, whatever the key order it
 * was built with; object keys are sorted by UTF-16 code units and numbers use the ECMAScript
 * shortest round-trip form, exactly as RFC 8785 §3.2 requires. Values JCS cannot represent
 * (lone surrogates, non-finite numbers, `undefined`, functions) throw `CanonicalizationError`:
 * they never reach a digest.
 *
 * Never: reads a clock or does I/O.
 */
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import { hasLoneSurrogate, utf8Encode } from './json.js';

export class CanonicalizationError extends Error {
  override readonly name = 'CanonicalizationError';
}

/** RFC 8785 canonical JSON text. */
export function canonicalize(value: unknown): string {
  const parts: string[] = [];
  write(value, parts);
  return parts.join('');
}

function write(value: unknown, out: string[]): void {
  switch (typeof value) {
    case 'string':
      if (hasLoneSurrogate(value)) throw new CanonicalizationError('lone surrogate in string');
      // JSON.stringify escapes exactly as RFC 8785 §3.2.2.2 prescribes.
      out.push(JSON.stringify(value));
      return;
    case 'number':
      if (!Number.isFinite(value)) throw new CanonicalizationError('non-finite number');
      // ECMAScript Number::toString is the JCS number serialization (RFC 8785 §3.2.2.3); -0 -> "0".
      out.push(JSON.stringify(value));
      return;
    case 'boolean':
      out.push(value ? 'true' : 'false');
      return;
    case 'object': {
      if (value === null) {
        out.push('null');
        return;
      }
      if (Array.isArray(value)) {
        out.push('[');
        for (let i = 0; i < value.length; i++) {
          if (i > 0) out.push(',');
          write(value[i], out);
        }
        out.push(']');
        return;
      }
      // Only plain objects are JSON objects: a Map, Date, typed array or class instance read
      // through Object.keys would collide with another value (every Map would hash as "{}").
      const proto: unknown = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) {
        throw new CanonicalizationError('cannot canonicalize an object that is not a plain object');
      }
      const obj = value as Record<string, unknown>;
      // Default sort compares UTF-16 code units, which is RFC 8785 §3.2.3's order. A member whose
      // value is undefined throws below rather than being dropped, so {a: undefined} and {} never
      // share a digest.
      const keys = Object.keys(obj).sort();
      out.push('{');
      for (let i = 0; i < keys.length; i++) {
        const k = keys[i] as string;
        if (i > 0) out.push(',');
        if (hasLoneSurrogate(k)) throw new CanonicalizationError('lone surrogate in key');
        out.push(JSON.stringify(k), ':');
        write(obj[k], out);
      }
      out.push('}');
      return;
    }
    default:
      throw new CanonicalizationError(`cannot canonicalize a value of type ${typeof value}`);
  }
}

export function canonicalBytes(value: unknown): Uint8Array {
  return utf8Encode(canonicalize(value));
}

/** Lowercase hex SHA-256 of raw bytes. */
export function sha256Hex(bytes: Uint8Array): string {
  return bytesToHex(sha256(bytes));
}

/** Lowercase hex SHA-256 of a UTF-8 string. */
export function sha256HexOfText(text: string): string {
  return bytesToHex(sha256(utf8Encode(text)));
}

/** SHA-256 over the RFC 8785 canonical bytes of `value`: Writ's content identity. */
export function digestOf(value: unknown): string {
  return sha256Hex(canonicalBytes(value));
}
