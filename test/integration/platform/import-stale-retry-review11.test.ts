/**
 * Review 11: a retry of an import that went live but whose directory write failed must not finish
 * it when the directory has since come to name a third copy, neither the one the import noted when
 * it went live (migrations/0014) nor its target. Finishing it would freeze that live copy, whose
 * delivered keys stop working, and point the directory at the stale import.
 */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { tenantMovePort } from '../../../src/platform/bindings.js';
import type { TenantMovePort } from '../../../src/services/ports.js';
import { importTenant } from '../../../src/services/tenant-moves.js';
import {
  authorize,
  call,
  countOn,
  createRun,
  directoryShard,
  exportTenant,
  importTo,
  READ_INPUT,
  seedTenant,
  shardOf,
} from './harness.js';

const noLog = () => undefined;

/** The real port whose first `record` throws before it reaches D1. */
function failingRecord(): TenantMovePort {
  const real = tenantMovePort(env);
  let failed = false;
  return {
    ...real,
    async record(t) {
      if (!failed) {
        failed = true;
        throw new Error('injected failure of the directory write');
      }
      return real.record(t);
    },
  };
}

describe('a retry of an unrecorded import after the directory moved on', () => {
  it('is refused, and the copy the directory names stays live', async () => {
    const s = await seedTenant('stale-retry');
    const r = await authorize(s, {
      tool_contract_sha256: s.read_contract_sha256,
      input: READ_INPUT,
      run_id: await createRun(s),
    });
    expect(r.status).toBe(200);
    const { status, text } = await exportTenant(s.tenant_id, false);
    expect(status).toBe(200);
    const here = shardOf(s);
    const to = 1 - here;
    // The file comes from another deployment: this one's directory does not know the tenant.
    await env.DB.prepare('DELETE FROM tenant_shards WHERE tenant_id = ?').bind(s.tenant_id).run();

    // Its import goes live on `to`, noting a tenant new here; the directory write fails.
    await expect(importTenant(failingRecord(), to, text, Date.now(), noLog)).rejects.toThrow(/injected/);
    expect(await directoryShard(s.tenant_id)).toBeUndefined();

    // Meanwhile another import of the tenant is recorded on `here` (its copy there is the tenant,
    // its keys delivered and in use).
    expect(
      await tenantMovePort(env).record({
        tenant_id: s.tenant_id,
        name: s.tenant_name,
        shard: here,
        expected: null,
        created_at_unix_ms: Date.now(),
        now: Date.now(),
      }),
    ).toBe('recorded');
    expect((await call('GET', '/v1/policy', { key: s.admin.api_key })).status).toBe(200);

    // The first file again: it must not freeze the live copy nor take the directory.
    const retry = await importTo(to, text);
    expect(retry.status).toBe(409);
    expect(await directoryShard(s.tenant_id)).toBe(here);
    expect((await call('GET', '/v1/policy', { key: s.admin.api_key })).status).toBe(200);
    expect(
      await countOn(
        here,
        'SELECT count(*) AS n FROM principals WHERE tenant_id = ? AND revoked_at_unix_ms IS NULL',
        s.tenant_id,
      ),
    ).toBeGreaterThan(0);
    // Review 13: the stale copy's keys (issued before its recording failed, never delivered) are
    // revoked by the refusal, so they never work either.
    expect(
      await countOn(
        to,
        'SELECT count(*) AS n FROM principals WHERE tenant_id = ? AND revoked_at_unix_ms IS NULL',
        s.tenant_id,
      ),
    ).toBe(0);
  });
});
