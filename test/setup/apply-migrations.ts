import { applyD1Migrations } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { allShards, shardBinding } from '../../src/platform/shards.js';

// Setup files run before each test file, against that file's fresh storage: every shard gets the
// same migrations (src/platform/shards.ts), as `npm run db:migrate:local` does. A fresh database
// (no migrations table yet) gets all of them in one batch per shard, with the same bookkeeping
// rows `applyD1Migrations` writes: one storage round trip instead of one per migration, which is
// most of a test file's set-up time. A database that already has some (a test's own stale
// replica, say) goes through `applyD1Migrations`, which applies only what is missing.
const TABLE = 'd1_migrations';
await Promise.all(
  allShards(env).map(async (n) => {
    const d1 = shardBinding(env, n);
    if (d1 === null) throw new Error(`D1 shard ${n} is declared in WRIT_D1_SHARDS but not bound`);
    const existing = await d1
      .prepare("SELECT 1 AS found FROM sqlite_master WHERE type = 'table' AND name = ?")
      .bind(TABLE)
      .first<{ found: number }>();
    if (existing !== null) return applyD1Migrations(d1, env.TEST_MIGRATIONS);
    const insert = d1.prepare(`INSERT INTO ${TABLE} (name) VALUES (?)`);
    await d1.batch([
      d1.prepare(`CREATE TABLE ${TABLE} (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        name       TEXT UNIQUE,
        applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL
      )`),
      ...env.TEST_MIGRATIONS.flatMap((m) => [...m.queries.map((q) => d1.prepare(q)), insert.bind(m.name)]),
    ]);
  }),
);
