/**
 * The public read path of a tenant's log (docs/transparency-log.md, "Public logs"): the request
 * path `/log/<tenant_id>/<resource>`, where `https://<host>/log/<tenant_id>/` is the log's C2SP
 * tlog-tiles URL prefix and `<resource>` is `checkpoint`, `tile/<L>/<N>[.p/<W>]` or
 * `tile/entries/<N>[.p/<W>]`.
 *
 * Guarantees: one spelling per resource (the tile part is `parseTilePath`'s exact C2SP encoding),
 * a bounded length checked before anything is split, and a tenant segment that is one path element
 * of identifier characters without `+` (a log origin is a note key name, which `+` cannot be in)
 * and without `%`: an encoded `/` or `.` never reaches storage as a second spelling of a key.
 * Never: decodes percent-escapes, does I/O, or says whether a tenant exists.
 */
import { parseTilePath } from './tiles.js';

/** Longest public path accepted: `/log/`, a 128-character tenant id, `/`, a 64-character tile path. */
export const MAX_PUBLIC_LOG_PATH = 5 + 128 + 1 + 64;

/** One path element of identifier characters (src/core/schema.ts's pattern without `/` and `+`). */
const TENANT_SEGMENT = /^[A-Za-z0-9][A-Za-z0-9._:@=-]{0,127}$/;

export type PublicLogResource =
  | { readonly tenant_id: string; readonly kind: 'checkpoint' }
  /** `path` is the resource below the prefix, as the R2 key suffix: `tile/...`. */
  | { readonly tenant_id: string; readonly kind: 'tile'; readonly path: string };

/**
 * Parse a request target (the URL's raw pathname and any query); `null` for anything that names no
 * resource, a query included (no resource spelling has `?`).
 */
export function parsePublicLogPath(pathname: string): PublicLogResource | null {
  if (pathname.length > MAX_PUBLIC_LOG_PATH || !pathname.startsWith('/log/')) return null;
  const rest = pathname.slice('/log/'.length);
  const slash = rest.indexOf('/');
  if (slash < 0) return null;
  const tenant_id = rest.slice(0, slash);
  // Starts with a letter or digit, so `.` and `..` (path steps) never name a tenant.
  if (!TENANT_SEGMENT.test(tenant_id)) return null;
  const resource = rest.slice(slash + 1);
  if (resource === 'checkpoint') return { tenant_id, kind: 'checkpoint' };
  // The exact C2SP spelling only: a second spelling of a tile would be a second cache entry.
  if (!parseTilePath(resource).ok) return null;
  return { tenant_id, kind: 'tile', path: resource };
}
