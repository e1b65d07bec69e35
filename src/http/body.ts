/**
 * Request bodies: bounded, strictly decoded, strictly parsed, in that order.
 *
 * Guarantees: the byte bound is enforced twice before a single character is decoded, once on
 * `Content-Length` and once on the bytes actually read (a lying or absent header cannot smuggle a
 * larger body); duplicate keys, prototype keys and lone surrogates are rejected by the strict
 * decoder; unknown fields are rejected by the route's `z.strictObject` schema. Every failure is a
 * typed `ApiError` raised before the route writes anything.
 * Never: uses `c.req.json()` (JSON.parse keeps the last duplicate key) or logs the body.
 */
import type { Context } from 'hono';
import type { z } from 'zod';
import { fromJsonError, fromZodError } from '../core/errors.js';
import { decodeJsonBytes, type JsonValue } from '../core/canonical/json.js';
import type { AppEnv } from './env.js';
import { fromCoreError, ServiceError } from '../services/errors.js';

export const DEFAULT_MAX_BODY_BYTES = 256 * 1024;
export const MAX_JSON_DEPTH = 32;

export interface ReadJsonOptions {
  /** Treat a request with no body as `{}` (action endpoints whose fields are all optional). */
  readonly allowEmpty?: boolean;
  /**
   * Also accept a body sent without `Content-Type` (a present one must still be JSON). Only for
   * routes that authenticate by bearer key, which a cross-site form cannot send: Docker MCP
   * Gateway's HTTP interceptor posts its JSON without the header.
   */
  readonly allowMissingContentType?: boolean;
}

export function maxBodyBytes(env: Env): number {
  const n = Number(env.WRIT_MAX_BODY_BYTES);
  return Number.isSafeInteger(n) && n > 0 ? n : DEFAULT_MAX_BODY_BYTES;
}

/** Bounded, strictly decoded JSON value; callers that parse with a core parser use this. */
export async function readJsonValue(c: Context<AppEnv>, options: ReadJsonOptions = {}): Promise<JsonValue> {
  return decodeJsonBody(c, await readBodyBytes(c), options);
}

/**
 * The body's bytes, bounded (413 past the limit) and not yet decoded: for a door that must check
 * a signature over the exact bytes before it decodes them (signed webhooks).
 */
export function readBodyBytes(c: Context<AppEnv>): Promise<Uint8Array> {
  return readBytes(c, maxBodyBytes(c.env));
}

/** Bytes read with `readBodyBytes`, strictly decoded as JSON (with the content-type check). */
export function decodeJsonBody(
  c: Context<AppEnv>,
  bytes: Uint8Array,
  options: ReadJsonOptions = {},
): JsonValue {
  let value: JsonValue;
  if (bytes.byteLength === 0) {
    if (!options.allowEmpty) throw new ServiceError('malformed_json', 'a json body is required');
    value = {};
  } else {
    // A form or text body parsed as JSON would let a cross-site form post reach the API.
    const type = c.req.header('content-type');
    const missingOk = type === undefined && options.allowMissingContentType === true;
    if (!missingOk && !/^application\/json\s*(;|$)/i.test(type ?? '')) {
      throw new ServiceError('unsupported_media_type', 'content-type must be application/json');
    }
    const decoded = decodeJsonBytes(bytes, { maxBytes: maxBodyBytes(c.env), maxDepth: MAX_JSON_DEPTH });
    if (!decoded.ok) {
      if (decoded.error.reason === 'too_large')
        throw new ServiceError('payload_too_large', decoded.error.message);
      throw fromCoreError(fromJsonError(decoded.error));
    }
    value = decoded.value;
  }
  return value;
}

/** Bounded, strictly decoded JSON, parsed by a strict zod schema (400 `invalid_request`). */
export async function readJson<S extends z.ZodType>(
  c: Context<AppEnv>,
  schema: S,
  options: ReadJsonOptions = {},
): Promise<z.output<S>> {
  return parseWith(schema, await readJsonValue(c, options));
}

/** A decoded value parsed by a strict zod schema (400 `invalid_request`). */
export function parseWith<S extends z.ZodType>(schema: S, value: JsonValue): z.output<S> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw fromCoreError(fromZodError('invalid_request', '', parsed.error));
  return parsed.data;
}

/** Read at most `max` bytes of the body; one byte more is a 413, and the stream is cancelled. */
export async function readBytes(c: Context<AppEnv>, max: number): Promise<Uint8Array> {
  const declared = c.req.header('content-length');
  if (declared !== undefined) {
    const n = Number(declared);
    if (!/^[0-9]+$/.test(declared) || !Number.isSafeInteger(n)) {
      throw new ServiceError('invalid_request', 'content-length is not a valid length');
    }
    if (n > max) throw new ServiceError('payload_too_large', `body is ${n} bytes, limit is ${max}`);
  }
  const stream = c.req.raw.body;
  if (stream === null) return new Uint8Array(0);
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > max) {
      await reader.cancel();
      throw new ServiceError('payload_too_large', `body exceeds ${max} bytes`);
    }
    chunks.push(value);
  }
  if (chunks.length === 1) return chunks[0] as Uint8Array;
  const out = new Uint8Array(total);
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.byteLength;
  }
  return out;
}
