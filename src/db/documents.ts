/**
 * Stored JSON documents back into validated values. Rows hold RFC 8785 text written by this
 * service; a row that does not parse, or does not hash to its key, is corruption and fails the
 * request closed (500), never "best effort".
 */
import type { z } from 'zod';
import { canonicalize, digestOf } from '../core/canonical/canonical.js';
import { deepFreeze } from '../core/canonical/digest-cache.js';
import { decodeJsonText, type JsonValue } from '../core/canonical/json.js';

/** Limits for stored documents: they were bounded on the way in, so this is only a backstop. */
const STORED_LIMITS = { maxBytes: 16 * 1024 * 1024, maxDepth: 64 } as const;

export class StoredDocumentError extends Error {
  override readonly name = 'StoredDocumentError';
}

export function toCanonicalText(value: unknown): string {
  return canonicalize(value);
}

/**
 * Whether canonical text about to be stored will read back through `parseStoredJson`. Not every
 * value the JSON boundary accepts does: an integer-valued number of 2^53 or more written with an
 * exponent (`1e20`) canonicalizes to an integer literal the strict decoder refuses.
 */
export function storedJsonReadsBack(text: string): boolean {
  return decodeJsonText(text, STORED_LIMITS).ok;
}

export function parseStoredJson(what: string, text: string): JsonValue {
  const decoded = decodeJsonText(text, STORED_LIMITS);
  if (!decoded.ok) throw new StoredDocumentError(`stored ${what} is not valid json: ${decoded.error.reason}`);
  return decoded.value;
}

export function parseStored<S extends z.ZodType>(what: string, schema: S, text: string): z.output<S> {
  const parsed = schema.safeParse(parseStoredJson(what, text));
  if (!parsed.success) throw new StoredDocumentError(`stored ${what} does not match its schema`);
  return parsed.data;
}

/**
 * Immutable documents by content digest (contracts, policies, grants): parsed once per isolate,
 * deep-frozen so their digests are cached too. Keyed by the digest the row is stored under, and
 * checked against it, so a cache hit can never be a different document.
 */
export class DocumentCache<T> {
  readonly #entries = new Map<string, T>();
  constructor(
    readonly what: string,
    readonly schema: z.ZodType<T>,
    readonly capacity = 512,
  ) {}

  get(sha256: string, text: string): T {
    const hit = this.#entries.get(sha256);
    if (hit !== undefined) return hit;
    const value = deepFreeze(parseStored(this.what, this.schema, text));
    if (digestOf(value) !== sha256)
      throw new StoredDocumentError(`stored ${this.what} does not hash to its key`);
    if (this.#entries.size >= this.capacity) {
      const oldest = this.#entries.keys().next();
      if (!oldest.done) this.#entries.delete(oldest.value);
    }
    this.#entries.set(sha256, value);
    return value;
  }
}
