/**
 * Strict JSON boundary.
 *
 * Guarantees: the byte length is checked before a single character is parsed; the result
 * contains no duplicate keys, no `__proto__` / `constructor` / `prototype` keys, no lone
 * surrogates, no non-finite numbers, no integer literal outside the IEEE-754 safe range, and no
 * nesting deeper than the bound. Every failure is a typed `JsonDecodeError`.
 *
 * Two paths, one answer. The reference parser (`parseReference`) is a strict recursive-descent
 * parser that decides every input and names the offset of the first problem. The fast path runs
 * the platform's `JSON.parse` and then proves, on the result and the text, that the reference
 * parser would have accepted the same text with the same value: no key dropped as a duplicate
 * (members counted in the text equal keys in the result), no forbidden key, only well-formed
 * strings, finite numbers, no integer outside the safe range, depth within the bound. Whenever
 * that proof fails, or `JSON.parse` throws, the reference parser decides. So `JSON.parse`'s own
 * leniencies (last duplicate wins, `__proto__` as a key, `1e400` as Infinity) never reach a caller.
 *
 * Never: reads a clock, does I/O, returns a value the reference parser would refuse, or throws
 * for malformed input.
 */
import { err, ok, type Result } from '../result.js';

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

export type JsonDecodeReason =
  | 'too_large'
  | 'invalid_utf8'
  | 'syntax'
  | 'duplicate_key'
  | 'forbidden_key'
  | 'lone_surrogate'
  | 'non_finite_number'
  | 'unsafe_integer'
  | 'too_deep';

export interface JsonDecodeError {
  readonly reason: JsonDecodeReason;
  readonly message: string;
  /** Offset (in UTF-16 code units of the decoded text) where the problem was found. */
  readonly offset: number;
}

export interface JsonLimits {
  readonly maxBytes: number;
  readonly maxDepth: number;
}

export const DEFAULT_JSON_LIMITS: JsonLimits = { maxBytes: 256 * 1024, maxDepth: 32 };

// Keys that would reach Object.prototype through assignment or confuse prototype-aware code
// downstream (prototype pollution).
export function isForbiddenKey(k: string): boolean {
  return k === '__proto__' || k === 'constructor' || k === 'prototype';
}

const utf8Decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const utf8Encoder = new TextEncoder();

/** UTF-8 byte length of a JS string, without allocating. Lone surrogates count as 3 (U+FFFD). */
export function utf8ByteLength(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        bytes += 4;
        i++;
      } else bytes += 3;
    } else bytes += 3;
  }
  return bytes;
}

export function utf8Encode(text: string): Uint8Array {
  return utf8Encoder.encode(text);
}

/** True when the string has an unpaired UTF-16 surrogate (not representable in UTF-8). */
export function hasLoneSurrogate(text: string): boolean {
  return !text.isWellFormed();
}

/** Decode UTF-8 bytes strictly (bound first), then parse. */
export function decodeJsonBytes(
  bytes: Uint8Array,
  limits: JsonLimits = DEFAULT_JSON_LIMITS,
): Result<JsonValue, JsonDecodeError> {
  if (bytes.byteLength > limits.maxBytes) {
    return err({
      reason: 'too_large',
      message: `body is ${bytes.byteLength} bytes, limit is ${limits.maxBytes}`,
      offset: 0,
    });
  }
  let text: string;
  try {
    text = utf8Decoder.decode(bytes);
  } catch {
    return err({ reason: 'invalid_utf8', message: 'body is not valid utf-8', offset: 0 });
  }
  return parse(text, limits.maxDepth);
}

/** Parse a JS string strictly; its UTF-8 length is bounded before parsing. */
export function decodeJsonText(
  text: string,
  limits: JsonLimits = DEFAULT_JSON_LIMITS,
): Result<JsonValue, JsonDecodeError> {
  if (exceedsBytes(text, limits.maxBytes)) {
    return err({ reason: 'too_large', message: `body exceeds ${limits.maxBytes} bytes`, offset: 0 });
  }
  return parse(text, limits.maxDepth);
}

/** Whether the UTF-8 form of `text` is longer than `maxBytes` (no allocation). */
export function exceedsBytes(text: string, maxBytes: number): boolean {
  // Cheap pre-check: every UTF-16 unit is at least one UTF-8 byte, at most three.
  return text.length > maxBytes || (text.length * 3 > maxBytes && utf8ByteLength(text) > maxBytes);
}

class Fail {
  constructor(readonly error: JsonDecodeError) {}
}

function parse(text: string, maxDepth: number): Result<JsonValue, JsonDecodeError> {
  const fast = parseFast(text, maxDepth);
  return fast !== undefined ? ok(fast) : parseReference(text, maxDepth);
}

/**
 * `JSON.parse`, accepted only when the reference parser provably gives the same value; otherwise
 * `undefined` (never a value of JSON text), and the reference parser decides.
 */
function parseFast(text: string, maxDepth: number): JsonValue | undefined {
  // The reference parser is recursive too: past a few hundred levels, whether it (or this walk)
  // runs out of stack depends on the platform, so only the reference decides there.
  if (maxDepth > MAX_FAST_DEPTH) return undefined;
  // An escaped surrogate may pair with a raw one into a well-formed string that the reference
  // refuses (`"\ud83d` + raw U+DE00): JSON.parse cannot tell, so the reference decides.
  if (hasEscapedSurrogate(text)) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  keysSeen = 0;
  try {
    if (!acceptable(value, 0, maxDepth)) return undefined;
  } catch {
    // The walk is recursive: a stack overflow on deep nesting leaves the decision to the reference.
    return undefined;
  }
  // JSON.parse keeps the last of duplicate keys: fewer keys than members means a duplicate.
  if (keysSeen !== countMembers(text)) return undefined;
  return value as JsonValue;
}

const MAX_FAST_DEPTH = 256;

// `\uD800` to `\uDFFF` (any case); a false hit (an escaped backslash before `uD8..`) only costs speed.
const ESCAPED_SURROGATE = /\\u[dD][89a-fA-F]/;

/** Whether the text has a `\uD800`-`\uDFFF` escape (or an escaped backslash before `uD8..`). */
export function hasEscapedSurrogate(text: string): boolean {
  return text.includes('\\u') && ESCAPED_SURROGATE.test(text);
}

// Keys counted by `acceptable` during one fast parse (single-threaded, never re-entered).
let keysSeen = 0;

/** Whether `v` (from JSON.parse) is exactly what the reference parser would produce. */
function acceptable(v: unknown, depth: number, maxDepth: number): boolean {
  switch (typeof v) {
    case 'string':
      return v.isWellFormed();
    case 'number':
      // An integer-valued number outside the safe range may come from an integer literal (which
      // the reference refuses) or from an exponent or fraction (which it accepts): it decides.
      return Number.isFinite(v) && (Number.isSafeInteger(v) || !Number.isInteger(v));
    case 'boolean':
      return true;
    case 'object': {
      if (v === null) return true;
      if (++depth > maxDepth) return false;
      if (Array.isArray(v)) {
        for (let i = 0; i < v.length; i++) if (!acceptable(v[i], depth, maxDepth)) return false;
        return true;
      }
      const obj = v as Record<string, unknown>;
      // for...in also visits inherited enumerable keys (a polluted prototype): they count as keys,
      // so the member count no longer matches and the reference decides.
      for (const k in obj) {
        keysSeen++;
        if (isForbiddenKey(k) || !k.isWellFormed()) return false;
        if (!acceptable(obj[k], depth, maxDepth)) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

/** Object members in valid JSON text (as JSON.parse accepted it): the `:` characters outside strings. */
export function countMembers(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x3a) n++;
    else if (c === 0x22) {
      // Jump to the closing quote: the next `"` not escaped by an odd run of backslashes.
      for (;;) {
        const q = s.indexOf('"', i + 1);
        if (q < 0) return -1; // unreachable for text JSON.parse accepted; fails closed anyway
        let b = q - 1;
        while (s.charCodeAt(b) === 0x5c) b--;
        i = q;
        if ((q - 1 - b) % 2 === 0) break;
      }
    }
  }
  return n;
}

/**
 * The reference parser: decides every input, with the typed reason and offset of the first
 * problem. Exported for the equivalence tests of the fast path.
 */
export function parseReference(text: string, maxDepth: number): Result<JsonValue, JsonDecodeError> {
  const p = new Parser(text, maxDepth);
  try {
    p.ws();
    const value = p.value(0);
    p.ws();
    if (p.i !== text.length) p.fail('syntax', 'unexpected data after the json value');
    return ok(value);
  } catch (e) {
    if (e instanceof Fail) return err(e.error);
    // A RangeError from a pathological input (e.g. stack) still fails closed as a syntax error.
    return err({ reason: 'syntax', message: 'json could not be parsed', offset: p.i });
  }
}

class Parser {
  i = 0;
  constructor(
    readonly s: string,
    readonly maxDepth: number,
  ) {}

  fail(reason: JsonDecodeReason, message: string): never {
    throw new Fail({ reason, message, offset: this.i });
  }

  ws(): void {
    const s = this.s;
    let i = this.i;
    for (;;) {
      const c = s.charCodeAt(i);
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) i++;
      else break;
    }
    this.i = i;
  }

  value(depth: number): JsonValue {
    const c = this.s.charCodeAt(this.i);
    switch (c) {
      case 0x7b /* { */:
        return this.object(depth + 1);
      case 0x5b /* [ */:
        return this.array(depth + 1);
      case 0x22 /* " */:
        return this.string();
      case 0x74 /* t */:
        return this.literal('true', true);
      case 0x66 /* f */:
        return this.literal('false', false);
      case 0x6e /* n */:
        return this.literal('null', null);
      default:
        if (c === 0x2d || (c >= 0x30 && c <= 0x39)) return this.number();
        return this.fail('syntax', Number.isNaN(c) ? 'unexpected end of json' : 'unexpected character');
    }
  }

  literal<T extends JsonValue>(word: string, v: T): T {
    if (this.s.startsWith(word, this.i)) {
      this.i += word.length;
      return v;
    }
    return this.fail('syntax', 'invalid literal');
  }

  object(depth: number): JsonObject {
    if (depth > this.maxDepth) this.fail('too_deep', `nesting deeper than ${this.maxDepth}`);
    this.i++;
    const out: JsonObject = {};
    this.ws();
    if (this.s.charCodeAt(this.i) === 0x7d) {
      this.i++;
      return out;
    }
    for (;;) {
      this.ws();
      if (this.s.charCodeAt(this.i) !== 0x22) this.fail('syntax', 'expected a string key');
      const keyAt = this.i;
      const key = this.string();
      if (isForbiddenKey(key)) {
        this.i = keyAt;
        this.fail('forbidden_key', `key "${key}" is not allowed`);
      }
      // `__proto__` is refused above, so an own property of `out` is exactly a key already seen.
      if (Object.hasOwn(out, key)) {
        this.i = keyAt;
        this.fail('duplicate_key', `duplicate key "${key}"`);
      }
      this.ws();
      if (this.s.charCodeAt(this.i) !== 0x3a) this.fail('syntax', 'expected ":"');
      this.i++;
      this.ws();
      out[key] = this.value(depth);
      this.ws();
      const c = this.s.charCodeAt(this.i);
      if (c === 0x2c) {
        this.i++;
        continue;
      }
      if (c === 0x7d) {
        this.i++;
        return out;
      }
      this.fail('syntax', 'expected "," or "}"');
    }
  }

  array(depth: number): JsonValue[] {
    if (depth > this.maxDepth) this.fail('too_deep', `nesting deeper than ${this.maxDepth}`);
    this.i++;
    const out: JsonValue[] = [];
    this.ws();
    if (this.s.charCodeAt(this.i) === 0x5d) {
      this.i++;
      return out;
    }
    for (;;) {
      this.ws();
      out.push(this.value(depth));
      this.ws();
      const c = this.s.charCodeAt(this.i);
      if (c === 0x2c) {
        this.i++;
        continue;
      }
      if (c === 0x5d) {
        this.i++;
        return out;
      }
      this.fail('syntax', 'expected "," or "]"');
    }
  }

  string(): string {
    const s = this.s;
    let i = this.i + 1;
    let out = '';
    let start = i;
    for (;;) {
      if (i >= s.length) {
        this.i = i;
        this.fail('syntax', 'unterminated string');
      }
      const c = s.charCodeAt(i);
      if (c === 0x22) {
        out += s.slice(start, i);
        this.i = i + 1;
        break;
      }
      if (c < 0x20) {
        this.i = i;
        this.fail('syntax', 'unescaped control character in string');
      }
      if (c >= 0xd800 && c <= 0xdfff) {
        // Raw surrogates only occur in JS-string input; UTF-8 input cannot carry them.
        const d = s.charCodeAt(i + 1);
        if (c <= 0xdbff && d >= 0xdc00 && d <= 0xdfff) {
          i += 2;
          continue;
        }
        this.i = i;
        this.fail('lone_surrogate', 'lone surrogate in string');
      }
      if (c === 0x5c) {
        out += s.slice(start, i);
        i++;
        const e = s.charCodeAt(i);
        switch (e) {
          case 0x22:
            out += '"';
            break;
          case 0x5c:
            out += '\\';
            break;
          case 0x2f:
            out += '/';
            break;
          case 0x62:
            out += '\b';
            break;
          case 0x66:
            out += '\f';
            break;
          case 0x6e:
            out += '\n';
            break;
          case 0x72:
            out += '\r';
            break;
          case 0x74:
            out += '\t';
            break;
          case 0x75: {
            const hi = this.hex4(i + 1);
            i += 4;
            if (hi >= 0xd800 && hi <= 0xdbff) {
              if (s.charCodeAt(i + 1) === 0x5c && s.charCodeAt(i + 2) === 0x75) {
                const lo = this.hex4(i + 3);
                if (lo >= 0xdc00 && lo <= 0xdfff) {
                  out += String.fromCharCode(hi, lo);
                  i += 6;
                  break;
                }
              }
              this.i = i;
              this.fail('lone_surrogate', 'lone surrogate escape in string');
            }
            if (hi >= 0xdc00 && hi <= 0xdfff) {
              this.i = i;
              this.fail('lone_surrogate', 'lone surrogate escape in string');
            }
            out += String.fromCharCode(hi);
            break;
          }
          default:
            this.i = i;
            this.fail('syntax', 'invalid escape in string');
        }
        i++;
        start = i;
        continue;
      }
      i++;
    }
    return out;
  }

  hex4(at: number): number {
    const h = this.s.slice(at, at + 4);
    if (!/^[0-9a-fA-F]{4}$/.test(h)) {
      this.i = at;
      this.fail('syntax', 'invalid \\u escape');
    }
    return parseInt(h, 16);
  }

  number(): number {
    const s = this.s;
    const start = this.i;
    let i = start;
    let isInteger = true;
    if (s.charCodeAt(i) === 0x2d) i++;
    const first = s.charCodeAt(i);
    if (first === 0x30) i++;
    else if (first >= 0x31 && first <= 0x39) {
      while (isDigit(s.charCodeAt(i))) i++;
    } else {
      this.i = i;
      this.fail('syntax', 'invalid number');
    }
    if (s.charCodeAt(i) === 0x2e) {
      isInteger = false;
      i++;
      if (!isDigit(s.charCodeAt(i))) {
        this.i = i;
        this.fail('syntax', 'invalid number');
      }
      while (isDigit(s.charCodeAt(i))) i++;
    }
    const e = s.charCodeAt(i);
    if (e === 0x65 || e === 0x45) {
      isInteger = false;
      i++;
      const sign = s.charCodeAt(i);
      if (sign === 0x2b || sign === 0x2d) i++;
      if (!isDigit(s.charCodeAt(i))) {
        this.i = i;
        this.fail('syntax', 'invalid number');
      }
      while (isDigit(s.charCodeAt(i))) i++;
    }
    const n = Number(s.slice(start, i));
    if (!Number.isFinite(n)) {
      this.i = start;
      this.fail('non_finite_number', 'number is out of the finite range');
    }
    // An integer literal that cannot round-trip would silently change meaning (ids, amounts).
    if (isInteger && !Number.isSafeInteger(n)) {
      this.i = start;
      this.fail('unsafe_integer', 'integer is outside the safe range');
    }
    this.i = i;
    return n;
  }
}

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}
