/**
 * `GET /.well-known/writ-keys` (public, issue 11): the issuer's receipt and log public keys with
 * their validity windows, in the format `parsePublicKeySet` reads (docs/receipts.md). No tenant
 * data and no secret: verifiers fetch it once and pin it (`writ verify --keys`).
 */
import { Hono } from 'hono';
import { keysPort } from '../../platform/bindings.js';
import { publishedKeySet } from '../../services/log.js';
import type { AppEnv } from '../env.js';

export const wellKnownRoutes = new Hono<AppEnv>();

wellKnownRoutes.get('/.well-known/writ-keys', (c) => {
  // Short: a rotation must reach verifiers within minutes, and the statuses depend on the time.
  c.header('cache-control', 'public, max-age=300');
  return c.json(publishedKeySet(keysPort(c.env), c.var.now));
});
