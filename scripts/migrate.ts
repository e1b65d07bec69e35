/**
 * `npm run db:migrate:local` / `npm run db:migrate:remote`: apply migrations/ to every D1 shard
 * declared in wrangler.toml (`DB` is shard 0, `DB_SHARD_N` shard N; docs/scaling.md, "Shards").
 * Extra arguments are passed to `wrangler d1 migrations apply` (e.g. `--persist-to DIR`).
 *
 * Each shard has its own `d1_migrations` table, so a shard added later is brought up to date by
 * the same command, and a shard already current is left alone.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const WRANGLER = path.join(ROOT, 'node_modules', '.bin', 'wrangler');

/** The shard bindings wrangler.toml declares, in shard order, checked against WRIT_D1_SHARDS. */
export function shardBindings(): string[] {
  const toml = readFileSync(path.join(ROOT, 'wrangler.toml'), 'utf8');
  const bindings = [...toml.matchAll(/^binding = "(DB(?:_SHARD_[1-9][0-9]*)?)"$/gm)].map(
    (m) => m[1] as string,
  );
  const declared = /^WRIT_D1_SHARDS = "([0-9]+)"$/m.exec(toml)?.[1];
  const expected = Array.from({ length: Number(declared ?? 1) }, (_, i) =>
    i === 0 ? 'DB' : `DB_SHARD_${i}`,
  );
  // A shard the Worker would route to but no migration reaches would fail at its first request.
  if (bindings.join(',') !== expected.join(',')) {
    throw new Error(
      `wrangler.toml declares D1 bindings ${bindings.join(', ')} but WRIT_D1_SHARDS expects ${expected.join(', ')}`,
    );
  }
  return bindings;
}

/** Apply the migrations to every shard; returns wrangler's output, throws on the first failure. */
export function applyMigrations(args: readonly string[]): string {
  const env = { ...process.env, CI: 'true', WRANGLER_SEND_METRICS: 'false' };
  let out = '';
  for (const binding of shardBindings()) {
    const r = spawnSync(WRANGLER, ['d1', 'migrations', 'apply', binding, ...args], {
      cwd: ROOT,
      env,
      encoding: 'utf8',
    });
    out += `${binding}:\n${r.stdout.trim().split('\n').slice(-3).join('\n')}\n`;
    if (r.status !== 0) throw new Error(`migrations failed on ${binding}:\n${r.stdout}\n${r.stderr}`);
  }
  return out;
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  if (!args.includes('--local') && !args.includes('--remote')) {
    console.error('usage: tsx scripts/migrate.ts --local|--remote [wrangler d1 migrations apply flags]');
    process.exit(2);
  }
  try {
    console.log(applyMigrations(args));
  } catch (e) {
    console.error(e instanceof Error ? e.message : e);
    process.exit(1);
  }
}
