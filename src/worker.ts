/**
 * Worker entry point: the HTTP app and the Durable Object classes wrangler.toml binds.
 */
import { createHash } from 'node:crypto';
import { useSha256 } from './core/canonical.js';
import { app } from './http/app.js';

// Hash with the runtime's native SHA-256 (BoringSSL under nodejs_compat) instead of the portable
// @noble/hashes. The core installs it only after it reproduces the known answers; otherwise the
// portable implementation stays. Either way every digest is byte-identical.
useSha256((data) => createHash('sha256').update(data).digest('hex'));

export { IdempotencyObject } from '../durable-objects/idempotency.js';

export default {
  fetch: app.fetch,
} satisfies ExportedHandler<Env>;
