import type { D1Migration } from '@cloudflare/vitest-plugin';

// Test-only bindings, declared apart from the generated Worker Env.
declare global {
  namespace Cloudflare {
    interface Env {
      TEST_MIGRATIONS: D1Migration[];
      /** Only for test/support/d1-routing.ts: a stale snapshot of `DB` (vitest.config.ts). */
      DB_STALE_REPLICA: D1Database;
      /** The same for shard 1, `DB_SHARD_1` (tenants are spread over both shards). */
      DB_STALE_REPLICA_1: D1Database;
      /** A third shard, empty until a test migrates it (test/integration/platform/import-race-review13.test.ts). */
      DB_THIRD_SHARD: D1Database;
    }
  }
}
export {};
