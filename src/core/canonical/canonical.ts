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
import { coreError, type CoreError } from '../errors.js';
import { utf8Encode } from './json.js';
import { err, type Result } from '../result.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex } from '@noble/hashes/utils.js';

/** SHA-256 of a string's UTF-8 or of bytes, lowercase hex. */
export type Sha256Impl = (data: string | Uint8Array) => string;

// The portable implementation: audited @noble/hashes.
const nobleSha256: Sha256Impl = (data) =>
  bytesToHex(sha256(typeof data === 'string' ? utf8Encode(data) : data));
let sha256Impl: Sha256Impl = nobleSha256;

// Known answers an installed implementation must reproduce: FIPS 180-2 vectors, a multi-block
// input and multi-byte UTF-8 (as text and as bytes).
const KNOWN_ANSWERS: readonly (readonly [string | Uint8Array, string])[] = [
  ['', 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'],
  ['abc', 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad'],
  [
    'abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq',
    '248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1',
  ],
  ['é€😀'.repeat(40), nobleSha256('é€😀'.repeat(40))],
  [utf8Encode('é€😀'.repeat(40)), nobleSha256('é€😀'.repeat(40))],
];

/**
 * Let an adapter hash with the platform's native SHA-256 (`node:crypto` `createHash`, which
 * workerd also provides under `nodejs_compat`); the core itself imports no platform API. The
 * implementation must reproduce the known answers first, or it is refused and the pure one stays:
 * an identity never depends on which implementation computed it. Returns whether it was installed.
 */
export function useSha256(impl: Sha256Impl): boolean {
  try {
    for (const [data, want] of KNOWN_ANSWERS) if (impl(data) !== want) return false;
  } catch {
    return false;
  }
  sha256Impl = impl;
  return true;
}

export class CanonicalizationError extends Error {
  override readonly name = 'CanonicalizationError';
}

/** RFC 8785 canonical JSON text. */
export function canonicalize(value: unknown): string {
  // A JSON value whose object keys are already in RFC 8785 order at every level serializes to
  // exactly its canonical text with the platform's JSON.stringify (RFC 8785 §3.2 is defined by
  // ECMAScript's serialization of strings and numbers). Writ builds its receipts and parsed
  // invocations in that order, so this is the common case; anything else takes `write`.
  return inCanonicalOrder(value) ? JSON.stringify(value) : write(value);
}

/** The reference serializer, exported for the equivalence tests of the fast path. */
export function canonicalizeReference(value: unknown): string {
  return write(value);
}

/**
 * True when JSON.stringify(value) is the canonical text: only null, booleans, finite numbers,
 * well-formed strings, arrays without holes and plain objects whose own keys are well-formed
 * and strictly ascending by UTF-16 code units, and no object or array with a `toJSON` method.
 * Anything else (including values that cannot be
 * canonicalized at all) returns false, and `write` serializes it or throws the precise error.
 */
function inCanonicalOrder(value: unknown): boolean {
  switch (typeof value) {
    case 'string':
      return value.isWellFormed();
    case 'number':
      return Number.isFinite(value);
    case 'boolean':
      return true;
    case 'object': {
      if (value === null) return true;
      // JSON.stringify would call a toJSON method (own, hidden or inherited); `write` never does.
      if (typeof (value as { toJSON?: unknown }).toJSON === 'function') return false;
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) if (!inCanonicalOrder(value[i])) return false;
        return true;
      }
      const proto: unknown = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) return false;
      const obj = value as Record<string, unknown>;
      const keys = Object.keys(obj);
      for (let i = 0; i < keys.length; i++) {
        const k = keys[i] as string;
        if ((i > 0 && !((keys[i - 1] as string) < k)) || !k.isWellFormed()) return false;
        if (!inCanonicalOrder(obj[k])) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

// Built by string concatenation (V8 ropes, flattened once when hashed): no parts array, no join.
function write(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return canonicalString(value);
    case 'number':
      return canonicalNumber(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object': {
      if (value === null) return 'null';
      if (Array.isArray(value)) {
        let out = '[';
        for (let i = 0; i < value.length; i++) {
          if (i > 0) out += ',';
          out += write(value[i]);
        }
        return out + ']';
      }
      // Only plain objects are JSON objects: a Map, Date, typed array or class instance read
      // through Object.keys would collide with another value (every Map would hash as "{}").
      const proto: unknown = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) {
        throw new CanonicalizationError('cannot canonicalize an object that is not a plain object');
      }
      const obj = value as Record<string, unknown>;
      // A member whose value is undefined throws below rather than being dropped, so
      // {a: undefined} and {} never share a digest.
      const keys = sortedKeys(obj);
      let out = '{';
      for (let i = 0; i < keys.length; i++) {
        const k = keys[i] as string;
        if (!k.isWellFormed()) throw new CanonicalizationError('lone surrogate in key');
        if (i > 0) out += ',';
        out += quotedKey(k) + write(obj[k]);
      }
      return out + '}';
    }
    default:
      throw new CanonicalizationError(`cannot canonicalize a value of type ${typeof value}`);
  }
}

/** RFC 8785 form of a string (§3.2.2.2); throws for a lone surrogate. */
export function canonicalString(value: string): string {
  // isWellFormed is the native form of "has no lone surrogate".
  if (!value.isWellFormed()) throw new CanonicalizationError('lone surrogate in string');
  // JSON.stringify escapes exactly as RFC 8785 §3.2.2.2 prescribes.
  return JSON.stringify(value);
}

/** RFC 8785 form of a number (§3.2.2.3); throws for a non-finite one. */
export function canonicalNumber(value: number): string {
  if (!Number.isFinite(value)) throw new CanonicalizationError('non-finite number');
  // ECMAScript Number::toString is the JCS number serialization; -0 -> "0".
  return String(value);
}

// The quoted form of recently seen keys (`"tenant_id":`). Object keys come from a small, recurring
// vocabulary (the model's field names), so this saves a JSON.stringify per member. Bounded in
// entries and key length, so a flood of distinct or long keys costs speed, never memory;
// correctness never depends on a hit.
const QUOTED_KEY_LIMIT = 1024;
const QUOTED_KEY_MAX_LENGTH = 64;
const quotedKeys = new Map<string, string>();

function quotedKey(k: string): string {
  let q = quotedKeys.get(k);
  if (q === undefined) {
    q = JSON.stringify(k) + ':';
    if (k.length <= QUOTED_KEY_MAX_LENGTH && quotedKeys.size < QUOTED_KEY_LIMIT) quotedKeys.set(k, q);
  }
  return q;
}

/**
 * Own enumerable keys in RFC 8785 §3.2.3 order: `<` on strings compares UTF-16 code units.
 * Insertion sort: Writ objects have at most a few dozen keys, often already nearly sorted, and
 * this avoids the generic comparator of Array.prototype.sort.
 */
function sortedKeys(obj: object): string[] {
  const keys = Object.keys(obj);
  // Insertion sort is quadratic: only for the small objects Writ's own types are. A large
  // untrusted object (tool input) takes the native O(n log n) sort, which has the same order.
  if (keys.length <= 32) sortStrings(keys);
  else keys.sort();
  return keys;
}

function sortStrings(keys: string[]): void {
  for (let i = 1; i < keys.length; i++) {
    const k = keys[i] as string;
    let j = i - 1;
    while (j >= 0 && (keys[j] as string) > k) {
      keys[j + 1] = keys[j] as string;
      j--;
    }
    keys[j + 1] = k;
  }
}

export function canonicalBytes(value: unknown): Uint8Array {
  return utf8Encode(canonicalize(value));
}

/** Lowercase hex SHA-256 of raw bytes. */
export function sha256Hex(bytes: Uint8Array): string {
  return sha256Impl(bytes);
}

/** Lowercase hex SHA-256 of a UTF-8 string. */
export function sha256HexOfText(text: string): string {
  return sha256Impl(text);
}

/** SHA-256 over the RFC 8785 canonical bytes of `value`: Writ's content identity. */
export function digestOf(value: unknown): string {
  // Hashes the canonical text directly: no intermediate byte array per digest.
  return sha256Impl(canonicalize(value));
}

/**
 * Run `f`, turning a `CanonicalizationError` (a value that has no canonical form, e.g. a lone
 * surrogate that reached the core without passing a schema) into a typed "cannot evaluate" error.
 * Any other exception propagates: it is a bug, and the adapter fails closed on it.
 */
export function guardCanonical<T>(f: () => Result<T, CoreError>): Result<T, CoreError> {
  try {
    return f();
  } catch (e) {
    if (e instanceof CanonicalizationError) {
      return err(coreError('canonicalization_failed', `input has no canonical form: ${e.message}`));
    }
    throw e;
  }
}
