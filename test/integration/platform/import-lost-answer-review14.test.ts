/**
 * Review 14: an import whose directory write committed but whose answer was lost, and whose
 * read-back failed too, answers its error and freezes nothing: the directory names its target,
 * and the old copy (whose keys were delivered) still authenticates until the same file is sent
 * again. If another import of the tenant is recorded in between (it reads the directory, which
 * names the first import's target, and freezes that copy, not the old one), the old copy stays
 * live beside the other import's: two live copies. The same file again used to be refused with
 * only its own copy frozen, so the old copy stayed live for good. It now freezes the copy its
 * import noted as the old one too: the directory names neither, so neither is the tenant.
 */
import { applyD1Migrations } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { beforeAll, describe, expect, it } from 'vitest';
import { tenantMovePort } from '../../../src/platform/bindings.js';
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

const LIVE = 'SELECT count(*) AS n FROM principals WHERE tenant_id = ? AND revoked_at_unix_ms IS NULL';
const livePrincipals = async (shard: number, tenant_id: string): Promise<number> =>
  shard === THIRD
    ? ((await env.DB_THIRD_SHARD.prepare(LIVE).bind(tenant_id).first<{ n: number }>())?.n ?? 0)
    : countOn(shard, LIVE, tenant_id);

describe('an import whose recording committed unanswered, then another import of the tenant', () => {
  it('leaves no live copy but the one the directory names once the first file is sent again', async () => {
    const s = await seedTenant('lost-answer');
    const from = shardOf(s);
    const other = 1 - from;
    const { status, text } = await exportTenant(s.tenant_id, false);
    expect(status).toBe(200);

    // Import A to the third shard: its directory write commits, its answer is lost, and the
    // read-back at the primary fails too. Nothing is frozen; the old copy's keys still work.
    const real = tenantMovePort(threeShards);
    const lossy: TenantMovePort = {
      ...real,
      async record(t) {
        await real.record(t);
        throw new Error('injected loss of the directory write answer');
      },
      recordedShard: () => Promise.reject(new Error('injected failure of the read-back')),
    };
    await expect(importTenant(lossy, THIRD, text, Date.now(), noLog)).rejects.toThrow(/injected loss/);
    expect(await directoryShard(s.tenant_id)).toBe(THIRD);
    expect((await call('GET', '/v1/policy', { key: s.admin.api_key })).status).toBe(200);

    // Import B of the tenant to the other shard: it reads the directory (the third shard),
    // records, and freezes the third shard's copy. Its keys work.
    const b = await importTenant(real, other, text, Date.now(), noLog);
    expect(b.previous_shard).toBe(THIRD);
    expect(await directoryShard(s.tenant_id)).toBe(other);
    const bAdmin = b.keys.find((k) => k.principal_id === s.admin.principal_id)?.api_key as string;
    expect((await call('GET', '/v1/policy', { key: bAdmin })).status).toBe(200);

    // A's file again: refused (the directory moved on), and both copies the directory does not
    // name are frozen: A's own and the old one A noted. One live copy is left, B's.
    await expect(importTenant(real, THIRD, text, Date.now(), noLog)).rejects.toThrow(/moved to shard/);
    expect(await livePrincipals(THIRD, s.tenant_id)).toBe(0);
    expect(await livePrincipals(from, s.tenant_id)).toBe(0);
    expect((await call('GET', '/v1/policy', { key: s.admin.api_key })).status).toBe(401);
    expect(await directoryShard(s.tenant_id)).toBe(other);
    expect((await call('GET', '/v1/policy', { key: bAdmin })).status).toBe(200);
  });
});
