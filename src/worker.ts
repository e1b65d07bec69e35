/**
 * Worker entry point: the HTTP app and the Durable Object classes wrangler.toml binds.
 */
import { app } from './http/app.js';

export { IdempotencyObject } from '../durable-objects/idempotency.js';

export default {
  fetch: app.fetch,
} satisfies ExportedHandler<Env>;
