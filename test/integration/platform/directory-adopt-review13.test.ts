/**
 * Review 13: `shardDirectory(...).adopt` (src/platform/shards.ts) was a read and then an insert, in
 * two calls. A row of the same tenant written between the two (a concurrent adoption, as two
 * imports of a tenant new to the deployment recording at once) made the insert fail on the
 * `tenant_id` primary key: an internal error, or `name_taken` when the name collided too, instead
 * of `exists`. The adoption is now one batch (an insert that does nothing on a conflict, and a read
 * in the same transaction telling which constraint held). The race is made deterministic by a
 * shard 0 binding that writes the competing row just before the first statement inserting into
 * `tenant_shards`.
 */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { shardDirectory } from '../../../src/platform/shards.js';
import { uniqueName } from './harness.js';

/**
 * Shard 0's binding, whose first statement inserting into `tenant_shards` (alone or in a batch)
 * is preceded by `first()`: another request's write landing between a read and the insert.
 */
function interposedDb(first: () => Promise<unknown>): D1Database {
  const real = env.DB;
  let fired = false;
  const fire = async (sqlText: string) => {
    if (fired || !/^\s*insert\s+into\s+"?tenant_shards"?/i.test(sqlText)) return;
    fired = true;
    await first();
  };
  const sqlOf = new WeakMap<D1PreparedStatement, string>();
  const wrap = (stmt: D1PreparedStatement, sqlText: string): D1PreparedStatement => {
    const w = {
      bind: (...args: unknown[]) => wrap(stmt.bind(...args), sqlText),
      first: async (col?: string) => {
        await fire(sqlText);
        return col === undefined ? stmt.first() : stmt.first(col);
      },
      run: async () => {
        await fire(sqlText);
        return stmt.run();
      },
      all: async () => {
        await fire(sqlText);
        return stmt.all();
      },
      raw: async (o?: { columnNames?: boolean }) => {
        await fire(sqlText);
        return o?.columnNames === true ? stmt.raw({ columnNames: true }) : stmt.raw();
      },
    } as unknown as D1PreparedStatement;
    sqlOf.set(w, sqlText);
    realOf.set(w, stmt);
    return w;
  };
  const realOf = new WeakMap<D1PreparedStatement, D1PreparedStatement>();
  return {
    prepare: (sqlText: string) => wrap(real.prepare(sqlText), sqlText),
    batch: async (stmts: D1PreparedStatement[]) => {
      for (const st of stmts) await fire(sqlOf.get(st) ?? '');
      return real.batch(stmts.map((st) => realOf.get(st) ?? st));
    },
    exec: (q: string) => real.exec(q),
    withSession: () => {
      throw new Error('not used');
    },
    dump: () => real.dump(),
  } as unknown as D1Database;
}

const envWithShard0 = (db: D1Database) => ({ ...env, DB: db }) as unknown as Env;

const entry = async (tenant_id: string) =>
  env.DB.prepare('SELECT name, shard FROM tenant_shards WHERE tenant_id = ?')
    .bind(tenant_id)
    .first<{ name: string; shard: number }>();

describe('shardDirectory().adopt racing another adoption of the same tenant', () => {
  const adoptee = () => ({
    tenant_id: `ten-${uniqueName('adopt')}`,
    name: uniqueName('adopted'),
    shard: 1,
    now: Date.now(),
    created_at_unix_ms: Date.now(),
  });
  const insertRow = (t: { tenant_id: string; name: string; shard: number }) =>
    env.DB.prepare(
      'INSERT INTO tenant_shards (tenant_id, name, shard, created_at_unix_ms, updated_at_unix_ms) VALUES (?, ?, ?, 0, 0)',
    )
      .bind(t.tenant_id, t.name, t.shard)
      .run();

  it('answers exists when the row lands between its read and its write, and keeps that row', async () => {
    const t = adoptee();
    const dir = shardDirectory(envWithShard0(interposedDb(() => insertRow({ ...t, shard: 0 }))));
    expect(await dir.adopt(t)).toBe('exists');
    expect(await entry(t.tenant_id)).toEqual({ name: t.name, shard: 0 });
  });

  it('answers exists when the racing row holds the same tenant under another name', async () => {
    const t = adoptee();
    const otherName = uniqueName('renamed');
    const dir = shardDirectory(
      envWithShard0(interposedDb(() => insertRow({ tenant_id: t.tenant_id, name: otherName, shard: 0 }))),
    );
    expect(await dir.adopt(t)).toBe('exists');
    expect(await entry(t.tenant_id)).toEqual({ name: otherName, shard: 0 });
  });

  it('answers name_taken when another tenant takes the name in between, and adds nothing', async () => {
    const t = adoptee();
    const dir = shardDirectory(
      envWithShard0(
        interposedDb(() => insertRow({ tenant_id: `ten-${uniqueName('x')}`, name: t.name, shard: 0 })),
      ),
    );
    expect(await dir.adopt(t)).toBe('name_taken');
    expect(await entry(t.tenant_id)).toBeNull();
  });

  it('adopts a new tenant, and answers exists for one already there', async () => {
    const t = adoptee();
    expect(await shardDirectory(env).adopt(t)).toBe('adopted');
    expect(await entry(t.tenant_id)).toEqual({ name: t.name, shard: 1 });
    expect(await shardDirectory(env).adopt({ ...t, shard: 0 })).toBe('exists');
    expect(await entry(t.tenant_id)).toEqual({ name: t.name, shard: 1 });
  });
});
