/**
 * Shared wire primitives for every transport object (snake_case, spec field names).
 *
 * Guarantees: every object schema built from `strict` rejects unknown fields at every level;
 * identifiers, digests and times are bounded before anything else looks at them.
 * Never: coerces types, fills defaults for authority-bearing fields, or reads a clock.
 */
import { z } from 'zod';
import type { JsonValue } from './canonical/json.js';
import { CONTROL_CHARS } from './text.js';

// The patterns and bounds are shared with the hand-written hot-path parser (`invocation.ts`), so
// the two can never disagree about what a valid field is.
export const SHA256_PATTERN = /^[0-9a-f]{64}$/;
export const IDENTIFIER_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:@/+=-]*$/;
export const IDENTIFIER_MAX = 128;

/** Lowercase hex SHA-256. Uppercase is rejected so one digest has one spelling. */
export const Sha256 = z.string().regex(SHA256_PATTERN, 'must be a lowercase hex sha-256');

/** Opaque identifier: printable ASCII subset, bounded, no whitespace. */
export const Identifier = z
  .string()
  .min(1)
  .max(IDENTIFIER_MAX)
  .regex(IDENTIFIER_PATTERN, 'must be an identifier ([A-Za-z0-9._:@/+=-], 1-128 chars)');

/** Milliseconds since the Unix epoch, a safe non-negative integer. */
export const UnixMs = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

/** A count of bytes or items: safe non-negative integer. */
export const Count = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

/** Free text shown to people: no C0, DEL or C1 control character (`CONTROL_CHARS`). */
export const LABEL_PATTERN = new RegExp(`^[^${CONTROL_CHARS}]+$`);

/** Short human or release label (release names, tool names). */
export const Label = z
  .string()
  .min(1)
  .max(200)
  // C1 too: a raw CSI (U+009B) redraws a terminal that shows the label, as ESC [ does.
  .regex(LABEL_PATTERN, 'must not contain control characters')
  // A lone surrogate has no UTF-8 form: it could not be canonicalized or hashed.
  .refine((s) => s.isWellFormed(), 'must be well-formed unicode');

export const strict = z.strictObject;

/** Any JSON value; the strict decoder at the boundary already rejected everything that is not one. */
export const JsonInput = z.custom<JsonValue>((v) => v !== undefined, 'is required');
