/**
 * The public read path of tenants' transparency logs (docs/transparency-log.md, "Public logs"):
 * `GET` (and `HEAD`) `/log/<tenant_id>/checkpoint`, `/log/<tenant_id>/tile/<L>/<N>[.p/<W>]` and
 * `/log/<tenant_id>/tile/entries/<N>[.p/<W>]`, the C2SP tlog-tiles API with the URL prefix
 * `https://<host>/log/<tenant_id>/`, for witnesses and monitors without a key. Served only for a
 * log its tenant admin published (`PUT /v1/log/publication`); everything else is one 404.
 *
 * Registered outside `/v1`, before nothing that authenticates: no key is read, no D1 shard or
 * Durable Object is reached, only `LOG_TILES` (the same objects the sequencer writes). The path is
 * the URL's raw pathname with any query, parsed strictly before any storage read (a query is
 * refused: it would be a second cache key for the same object).
 */
import { Hono } from 'hono';
import { publicLogPort } from '../../platform/bindings.js';
import { publicLogResource } from '../../services/log.js';
import type { AppEnv } from '../env.js';

export const publicLogRoutes = new Hono<AppEnv>();

/** C2SP tlog-tiles: the checkpoint is mutable, "headers SHOULD prevent caching beyond a few seconds". */
export const CHECKPOINT_CACHE_CONTROL = 'public, max-age=5';
/** C2SP tlog-tiles: tiles and entry bundles are immutable, "caching headers SHOULD be long-lived". */
export const TILE_CACHE_CONTROL = 'public, max-age=31536000, immutable';

publicLogRoutes.get('/log/*', async (c) => {
  // Errors (the one 404) must not be cached: a tile not written yet exists a moment later.
  c.header('cache-control', 'no-store');
  // Hono answers HEAD with the GET handler, without the body: read only the size then.
  const head = c.req.method === 'HEAD';
  // The path and any query (or bare `?`): a query is a second cache key for the same object, so
  // the parser refuses it as it refuses any other spelling.
  const url = new URL(c.req.url);
  const target = url.href.slice(url.origin.length);
  const r = await publicLogResource(publicLogPort(c.env), target, !head);
  const checkpoint = r.kind === 'checkpoint';
  c.header('cache-control', checkpoint ? CHECKPOINT_CACHE_CONTROL : TILE_CACHE_CONTROL);
  c.header('content-type', checkpoint ? 'text/plain; charset=utf-8' : 'application/octet-stream');
  c.header('x-content-type-options', 'nosniff');
  if (r.object.bytes === null) {
    c.header('content-length', String(r.object.size));
    return c.body(null);
  }
  return c.body(r.object.bytes.slice().buffer);
});
