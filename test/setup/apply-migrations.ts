import { applyD1Migrations } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { allShards, shardBinding } from '../../src/platform/shards.js';

// Setup files run before each test file; applyD1Migrations is idempotent. Every shard gets the
// same migrations (src/platform/shards.ts), as `npm run db:migrate:local` does.
for (const n of allShards(env)) {
  const d1 = shardBinding(env, n);
  if (d1 === null) throw new Error(`D1 shard ${n} is declared in WRIT_D1_SHARDS but not bound`);
  await applyD1Migrations(d1, env.TEST_MIGRATIONS);
}
