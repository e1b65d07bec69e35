/**
 * Worker entry point: the HTTP app and the Durable Object classes wrangler.toml binds.
 */
import { createHash, hash } from 'node:crypto';
import { useSha256 } from './core/canonical/canonical.js';
import { useMerkleSha256 } from './core/log/merkle.js';
import { nativeMerkleSha256 } from './platform/merkle-sha256.js';
import { app } from './http/app.js';
import { runBlobCollection, runRetention } from './platform/bindings.js';

// Hash with the runtime's native SHA-256 (BoringSSL under nodejs_compat) instead of the portable
// @noble/hashes: the one-shot `hash`, else a `Hash` object. The core installs an implementation
// only after it reproduces the known answers; otherwise the portable one stays. Either way every
// digest is byte-identical.
if (typeof hash !== 'function' || !useSha256((data) => hash('sha256', data, 'hex'))) {
  useSha256((data) => createHash('sha256').update(data).digest('hex'));
}
// The same for the transparency log's leaf and node hashes (the sequencer hashes every entry of
// a drain on its object's thread); refused, and the portable one kept, unless it matches.
useMerkleSha256(nativeMerkleSha256);

export { IdempotencyObject } from '../durable-objects/idempotency.js';
export { RateLimiterObject } from '../durable-objects/rate-limiter.js';
export { LogSequencerObject } from '../durable-objects/log-sequencer.js';

export default {
  fetch: app.fetch,
  // Retention (wrangler.toml `[triggers]`): receipts past their tenant's window move to R2
  // archives. Each run does a bounded amount of work; the next run continues.
  scheduled(controller, env, ctx) {
    ctx.waitUntil(
      runRetention(env, controller.scheduledTime).then((r) => {
        console.log(JSON.stringify({ retention: r }));
      }),
    );
    // Orphan blobs (src/services/blob-collection.ts): independent of retention's outcome; it only
    // deletes objects older than a day that no row of any shard refers to.
    ctx.waitUntil(
      runBlobCollection(env, controller.scheduledTime).then((r) => {
        console.log(JSON.stringify({ blob_collection: r }));
      }),
    );
  },
} satisfies ExportedHandler<Env>;
