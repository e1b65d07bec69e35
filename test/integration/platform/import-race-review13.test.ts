/**
 * Review 13: two imports of one tenant to two different shards at once. Each read the directory
 * before the other recorded, each went live on its own target, and each recorded. Before the
 * directory write was a compare-and-set on the shard the import read, both answered their keys
 * and both copies stayed live (an API key names its shard, so the loser's keys still
 * authenticated there): two live copies of one tenant, one of them not in the directory. Now the
 * second recording finds the directory moved from the shard its import read, freezes its own copy
 * and answers 409; the keys it issued never work.
 *
 * The imports are interleaved deterministically: the outer import's port runs the inner import to
 * its end when the outer one asks to record, so both have read the directory before either wrote
 * it. A third shard (the test-only binding `DB_THIRD_SHARD` as `DB_SHARD_2`) gives the case of a
 * tenant on shard C imported to A and B at once.
 */
import { applyD1Migrations } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { beforeAll, describe, expect, it } from 'vitest';
import { tenantMovePort } from '../../../src/platform/bindings.js';
import { ServiceError } from '../../../src/services/errors.js';
import type { TenantMovePort } from '../../../src/services/ports.js';
import { importTenant } from '../../../src/services/tenant-moves.js';
import { call, countOn, directoryShard, exportTenant, seedTenant, shardOf } from './harness.js';

const noLog = () => undefined;

/** This deployment's env with a third shard: `DB_SHARD_2` is the test-only `DB_THIRD_SHARD`. */
const threeShards = { ...env, WRIT_D1_SHARDS: '3', DB_SHARD_2: env.DB_THIRD_SHARD } as unknown as Env;
const THIRD = 2;

beforeAll(async () => {
  await applyD1Migrations(env.DB_THIRD_SHARD, env.TEST_MIGRATIONS);
});

/** The raw binding of shard 0, 1 or the third one. */
const d1 = (shard: number): D1Database =>
  shard === THIRD ? env.DB_THIRD_SHARD : shard === 0 ? env.DB : env.DB_SHARD_1;

const livePrincipals = async (shard: number, tenant_id: string): Promise<number> =>
  shard === THIRD
    ? ((
        await d1(THIRD)
          .prepare('SELECT count(*) AS n FROM principals WHERE tenant_id = ? AND revoked_at_unix_ms IS NULL')
          .bind(tenant_id)
          .first<{ n: number }>()
      )?.n ?? 0)
    : countOn(
        shard,
        'SELECT count(*) AS n FROM principals WHERE tenant_id = ? AND revoked_at_unix_ms IS NULL',
        tenant_id,
      );

/** Key digests a port set on staged principals: the keys its import issued before recording. */
const issuedDigests = async (shard: number, tenant_id: string, digests: readonly string[]) => {
  const rows = await d1(shard)
    .prepare('SELECT key_sha256, revoked_at_unix_ms FROM principals WHERE tenant_id = ?')
    .bind(tenant_id)
    .all<{ key_sha256: string; revoked_at_unix_ms: number | null }>();
  return rows.results.filter((r) => digests.includes(r.key_sha256));
};

/**
 * The three-shard port whose `record` first runs `inner` to its end (another import of the same
 * tenant, which read the directory after this one did), and which notes the key digests it issued.
 */
function racingPort(inner: () => Promise<unknown>): { port: TenantMovePort; digests: string[] } {
  const real = tenantMovePort(threeShards);
  const digests: string[] = [];
  let ran = false;
  return {
    digests,
    port: {
      ...real,
      async keyPrincipals(shard, s, keys) {
        digests.push(...keys.map((k) => k.key_sha256));
        return real.keyPrincipals(shard, s, keys);
      },
      async record(t) {
        if (!ran) {
          ran = true;
          await inner();
        }
        return real.record(t);
      },
    },
  };
}

describe('two imports of one tenant to two shards at once', () => {
  it('leave one live copy: the directory names it, the other import answers 409 and its copy is frozen', async () => {
    const s = await seedTenant('race-3');
    const from = shardOf(s);
    const other = 1 - from;
    const { status, text } = await exportTenant(s.tenant_id, false);
    expect(status).toBe(200);

    // The outer import (to the third shard) reads the directory (tenant on `from`) and goes live;
    // before it records, the inner import (to `other`) reads the same directory and finishes.
    let inner: Awaited<ReturnType<typeof importTenant>> | undefined;
    const { port, digests } = racingPort(async () => {
      inner = await importTenant(tenantMovePort(threeShards), other, text, Date.now(), noLog);
    });
    const outer = importTenant(port, THIRD, text, Date.now(), noLog);
    await expect(outer).rejects.toBeInstanceOf(ServiceError);
    await expect(outer).rejects.toMatchObject({ reason: 'conflict' });
    await expect(outer).rejects.toThrow(/moved to shard/);

    // One live copy: the inner import's, named by the directory; its keys work, the old ones not.
    expect(inner?.shard).toBe(other);
    expect(await directoryShard(s.tenant_id)).toBe(other);
    const admin = inner?.keys.find((k) => k.principal_id === s.admin.principal_id)?.api_key;
    expect((await call('GET', '/v1/policy', { key: admin as string })).status).toBe(200);
    expect((await call('GET', '/v1/policy', { key: s.admin.api_key })).status).toBe(401);
    expect(await livePrincipals(from, s.tenant_id)).toBe(0);
    expect(await livePrincipals(other, s.tenant_id)).toBeGreaterThan(0);

    // The loser's copy is frozen: every key it issued before recording matches only revoked rows.
    expect(digests.length).toBeGreaterThan(0);
    expect(await livePrincipals(THIRD, s.tenant_id)).toBe(0);
    const issued = await issuedDigests(THIRD, s.tenant_id, digests);
    expect(issued).toHaveLength(digests.length);
    expect(issued.every((r) => r.revoked_at_unix_ms !== null)).toBe(true);

    // The same file again on the loser's shard finishes nothing: the directory moved on.
    await expect(importTenant(tenantMovePort(threeShards), THIRD, text, Date.now(), noLog)).rejects.toThrow(
      /moved to shard/,
    );
    expect(await directoryShard(s.tenant_id)).toBe(other);
    expect((await call('GET', '/v1/policy', { key: admin as string })).status).toBe(200);
    expect(await livePrincipals(THIRD, s.tenant_id)).toBe(0);
  });

  it('of a tenant new to the deployment: the first to record adopts it, the other answers 409 and is frozen', async () => {
    const s = await seedTenant('race-new');
    const other = 1 - shardOf(s);
    const { status, text } = await exportTenant(s.tenant_id, true);
    expect(status).toBe(200);
    // The file comes from another deployment: this one's directory does not know the tenant.
    await env.DB.prepare('DELETE FROM tenant_shards WHERE tenant_id = ?').bind(s.tenant_id).run();

    let inner: Awaited<ReturnType<typeof importTenant>> | undefined;
    const { port, digests } = racingPort(async () => {
      inner = await importTenant(tenantMovePort(threeShards), other, text, Date.now(), noLog);
    });
    const outer = importTenant(port, THIRD, text, Date.now(), noLog);
    await expect(outer).rejects.toMatchObject({ reason: 'conflict' });
    await expect(outer).rejects.toThrow(/moved to shard/);

    expect(inner?.previous_shard).toBeNull();
    expect(await directoryShard(s.tenant_id)).toBe(other);
    const admin = inner?.keys.find((k) => k.principal_id === s.admin.principal_id)?.api_key;
    expect((await call('GET', '/v1/policy', { key: admin as string })).status).toBe(200);
    expect(digests.length).toBeGreaterThan(0);
    expect(await livePrincipals(THIRD, s.tenant_id)).toBe(0);
    expect(
      (await issuedDigests(THIRD, s.tenant_id, digests)).every((r) => r.revoked_at_unix_ms !== null),
    ).toBe(true);
  });
});

describe('an import that lost its recording and could not freeze its copy', () => {
  it('answers its error; the same file again is refused and freezes that copy', async () => {
    const s = await seedTenant('race-readback');
    const other = 1 - shardOf(s);
    const { status, text } = await exportTenant(s.tenant_id, false);
    expect(status).toBe(200);

    // As the race above, but the outer import's read-back of the directory fails (shard 0
    // unreachable at that moment): it cannot tell whose recording won, so it freezes nothing.
    const { port: racing, digests } = racingPort(async () => {
      await importTenant(tenantMovePort(threeShards), other, text, Date.now(), noLog);
    });
    const port: TenantMovePort = {
      ...racing,
      recordedShard: () => Promise.reject(new Error('injected failure of the read-back')),
    };
    await expect(importTenant(port, THIRD, text, Date.now(), noLog)).rejects.toThrow(/injected/);
    expect(await directoryShard(s.tenant_id)).toBe(other);
    expect(await livePrincipals(THIRD, s.tenant_id)).toBe(digests.length);

    // The same file again on that shard: the directory moved on (confirmed at the primary), so the
    // import is refused and its copy frozen; the live copy is untouched.
    const live = await livePrincipals(other, s.tenant_id);
    await expect(importTenant(tenantMovePort(threeShards), THIRD, text, Date.now(), noLog)).rejects.toThrow(
      /moved to shard .*this copy is frozen/,
    );
    expect(await livePrincipals(THIRD, s.tenant_id)).toBe(0);
    expect(await livePrincipals(other, s.tenant_id)).toBe(live);
    expect(await directoryShard(s.tenant_id)).toBe(other);
  });
});

describe('an import that loses the name to another tenant while it goes live', () => {
  it('answers 409 and freezes its copy: the keys it issued never work', async () => {
    const s = await seedTenant('race-name');
    const { status, text } = await exportTenant(s.tenant_id, true);
    expect(status).toBe(200);
    await env.DB.prepare('DELETE FROM tenant_shards WHERE tenant_id = ?').bind(s.tenant_id).run();
    // After the import checked the name, another tenant is recorded under it.
    const { port, digests } = racingPort(() =>
      env.DB.prepare(
        'INSERT INTO tenant_shards (tenant_id, name, shard, created_at_unix_ms, updated_at_unix_ms) VALUES (?, ?, 0, 0, 0)',
      )
        .bind(`ten-${s.tenant_id.slice(4, 12)}other`, s.tenant_name)
        .run(),
    );
    await expect(importTenant(port, THIRD, text, Date.now(), noLog)).rejects.toThrow(/took the name/);
    expect(await directoryShard(s.tenant_id)).toBeUndefined();
    expect(digests.length).toBeGreaterThan(0);
    expect(await livePrincipals(THIRD, s.tenant_id)).toBe(0);
  });
});

describe('a retry whose directory read is behind the primary', () => {
  it('goes on from what the primary names: the move is finished, not refused', async () => {
    const s = await seedTenant('race-behind');
    const from = shardOf(s);
    const { status, text } = await exportTenant(s.tenant_id, true);
    expect(status).toBe(200);
    // The import to the third shard goes live (noting `from`) and its directory write fails.
    const real = tenantMovePort(threeShards);
    await expect(
      importTenant(
        { ...real, record: () => Promise.reject(new Error('injected failure of the directory write')) },
        THIRD,
        text,
        Date.now(),
        noLog,
      ),
    ).rejects.toThrow(/injected/);
    expect(await directoryShard(s.tenant_id)).toBe(from);
    // The retry's directory read answers a shard the tenant never was on (a lagging read); the
    // primary still names `from`, the copy the import noted: the retry finishes the move.
    const behind: TenantMovePort = { ...real, shardOf: () => Promise.resolve(1 - from) };
    const finished = await importTenant(behind, THIRD, text, Date.now(), noLog);
    expect(finished).toMatchObject({ shard: THIRD, previous_shard: from, rows: 0 });
    expect(await directoryShard(s.tenant_id)).toBe(THIRD);
    expect(await livePrincipals(THIRD, s.tenant_id)).toBe(finished.keys.length);
    expect(await livePrincipals(from, s.tenant_id)).toBe(0);
  });
});
