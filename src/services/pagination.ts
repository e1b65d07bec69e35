/**
 * Cursor pagination for every list: `limit` (1-100) and an opaque `cursor`, answered with the
 * page and `next_cursor` (null on the last page).
 *
 * Guarantees: a cursor is the base64url (no padding) of a JSON array `[list, ...filter, ...key]`
 * naming the list it belongs to, the filter it was issued under and the last row's sort key; it
 * is decoded strictly (alphabet, length, canonical spelling, strict JSON, exact tuple shape) and
 * refused as a 400 `invalid_request` on `cursor` otherwise. A cursor grants nothing: it is only a
 * position, every list query is scoped to the caller's tenant, so a forged cursor can at most
 * page through the caller's own rows.
 * Never: carries a row, a tenant or anything authority-bearing.
 */
import { z } from 'zod';
import { decodeJsonText } from '../core/canonical/json.js';
import { ServiceError } from './errors.js';

export const MAX_PAGE_SIZE = 100;
export const DEFAULT_PAGE_SIZE = 50;
const MAX_CURSOR_LENGTH = 512;

/** Query parameters shared by every list: `limit` 1-100 and an opaque `cursor`. */
export const PageQuery = {
  limit: z
    .string()
    .regex(/^[1-9][0-9]{0,2}$/, 'must be an integer from 1 to 100')
    .transform(Number)
    .pipe(z.number().int().min(1).max(MAX_PAGE_SIZE))
    .optional(),
  cursor: z
    .string()
    .min(1)
    .max(MAX_CURSOR_LENGTH)
    .regex(/^[A-Za-z0-9_-]+$/, 'must be a cursor from a previous page')
    .optional(),
};

export function encodeCursor(parts: readonly (string | number)[]): string {
  return btoa(JSON.stringify(parts)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

const invalidCursor = () =>
  new ServiceError('invalid_request', 'cursor is not valid', [
    { path: 'cursor', message: 'must be the next_cursor of a previous page of this list' },
  ]);

/**
 * The parts of `cursor`, validated by `shape` (a tuple starting with the list's name and filter
 * as literals, so a cursor of another list or filter is refused).
 */
export function decodeCursor<T extends readonly unknown[]>(cursor: string, shape: z.ZodType<T>): T {
  let text: string;
  try {
    text = atob(cursor.replace(/-/g, '+').replace(/_/g, '/'));
  } catch {
    throw invalidCursor();
  }
  const json = decodeJsonText(text, { maxBytes: MAX_CURSOR_LENGTH, maxDepth: 2 });
  if (!json.ok) throw invalidCursor();
  const parsed = shape.safeParse(json.value);
  // One spelling per position: a re-encoded cursor must be the same text.
  if (!parsed.success || encodeCursor(parsed.data as readonly (string | number)[]) !== cursor) {
    throw invalidCursor();
  }
  return parsed.data;
}

/** The page of `rows` (fetched with `limit + 1`) and the cursor after its last row. */
export function page<R>(
  rows: readonly R[],
  limit: number,
  cursorOf: (last: R) => readonly (string | number)[],
): { readonly items: readonly R[]; readonly next_cursor: string | null } {
  if (rows.length <= limit) return { items: rows, next_cursor: null };
  const items = rows.slice(0, limit);
  return { items, next_cursor: encodeCursor(cursorOf(items[items.length - 1] as R)) };
}
