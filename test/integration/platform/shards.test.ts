/**
 * Shards (docs/scaling.md, "Shards"): tenants are spread over the two D1 shards of wrangler.toml,
 * a key routes its request to its tenant's shard and nowhere else, and a key whose routing part
 * or secret was changed is a 401 that tells nothing.
 */
import { createExecutionContext, waitOnExecutionContext } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseApiKey } from '../../../src/core/identity/identity.js';
import { newId } from '../../../src/db/ids.js';
import { platformStore } from '../../../src/platform/bindings.js';
import { createTenant } from '../../../src/services/admin.js';
import worker from '../../../src/worker.js';
import { ADMIN_TOKEN, BASE, READ_INPUT, call, createRun, seedTenant, shardOf, tenantD1 } from './harness.js';

/** A D1 binding that counts every statement run through it (and every batch). */
function counting(d1: D1Database, counter: { n: number }): D1Database {
  const stmt = (s: D1PreparedStatement): D1PreparedStatement =>
    new Proxy(s, {
      get(t, p) {
        const v: unknown = Reflect.get(t, p, t);
        if (p === 'bind') return (...a: unknown[]) => stmt(t.bind(...a));
        if (p === 'first' || p === 'all' || p === 'run' || p === 'raw') counter.n += 1;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
      },
    });
  return new Proxy(d1, {
    get(t, p) {
      if (p === 'prepare') return (q: string) => stmt(t.prepare(q));
      if (p === 'batch') counter.n += 1;
      if (p === 'withSession') counter.n += 1;
      const v: unknown = Reflect.get(t, p, t);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
    },
  });
}

/** One request through the Worker with the shard `watch` replaced by a counting wrapper. */
async function fetchWatching(watch: 'DB' | 'DB_SHARD_1', path: string, init: RequestInit) {
  const counter = { n: 0 };
  const ctx = createExecutionContext();
  const wrapped = { ...env, [watch]: counting(env[watch], counter) } as Env;
  const res = await worker.fetch(new Request(`${BASE}${path}`, init), wrapped, ctx);
  const text = await res.text();
  await waitOnExecutionContext(ctx);
  return { status: res.status, text, touched: counter.n };
}

describe('placement', () => {
  it('spreads new tenants over both shards and records each in the directory', async () => {
    // Fewest tenants first: of three consecutive creations at least one lands on each shard.
    const seeded = [await seedTenant('place'), await seedTenant('place'), await seedTenant('place')];
    const shards = seeded.map(shardOf);
    expect(new Set(shards)).toEqual(new Set([0, 1]));
    for (const s of seeded) {
      const dir = await env.DB.prepare('SELECT shard FROM tenant_shards WHERE tenant_id = ?')
        .bind(s.tenant_id)
        .first<{ shard: number }>();
      expect(dir?.shard).toBe(shardOf(s));
      // The rows are on that shard and only there.
      const other = shardOf(s) === 0 ? env.DB_SHARD_1 : env.DB;
      const here = await tenantD1(s)
        .prepare('SELECT count(*) AS n FROM principals WHERE tenant_id = ?')
        .bind(s.tenant_id)
        .first<{ n: number }>();
      const there = await other
        .prepare('SELECT count(*) AS n FROM principals WHERE tenant_id = ?')
        .bind(s.tenant_id)
        .first<{ n: number }>();
      expect(here?.n).toBeGreaterThan(0);
      expect(there?.n).toBe(0);
    }
  });

  it('every key a tenant admin issues names the tenant’s shard', async () => {
    const s = await seedTenant('keys');
    for (const key of [s.admin.api_key, s.agent.api_key, s.approver.api_key, s.executor.api_key]) {
      expect(parseApiKey(key)?.shard).toBe(shardOf(s));
    }
  });
});

describe('routing', () => {
  it('a request of a tenant never touches the other shard (reads, authorize with a run)', async () => {
    const seeded = [await seedTenant('route'), await seedTenant('route'), await seedTenant('route')];
    for (const s of seeded) {
      const elsewhere = shardOf(s) === 0 ? 'DB_SHARD_1' : 'DB';
      const run = await createRun(s);
      const auth = { authorization: `Bearer ${s.agent.api_key}`, 'content-type': 'application/json' };
      const policy = await fetchWatching(elsewhere, '/v1/policy', {
        headers: { authorization: auth.authorization },
      });
      expect(policy.status).toBe(200);
      expect(policy.touched).toBe(0);
      const decided = await fetchWatching(elsewhere, '/v1/authorize', {
        method: 'POST',
        headers: auth,
        body: JSON.stringify({
          tool_contract_sha256: s.read_contract_sha256,
          input: READ_INPUT,
          run_id: run,
        }),
      });
      expect(decided.status).toBe(200);
      expect(decided.touched).toBe(0);
    }
  });

  it('a key naming an unconfigured shard is a 401 like any unknown key, touching no shard', async () => {
    const s = await seedTenant('far');
    const route = parseApiKey(s.agent.api_key);
    if (route === null) throw new Error('unparsable key');
    const far = s.agent.api_key.replace(/^writ_[0-9]+_/, 'writ_7_');
    const r = await fetchWatching('DB', '/v1/policy', { headers: { authorization: `Bearer ${far}` } });
    expect(r.status).toBe(401);
    expect(r.touched).toBe(0);
  });
});

describe('tampered keys', () => {
  /** The error a key nobody holds gets: code and message (the request id differs). */
  async function unknownKeyAnswer() {
    const r = await call('GET', '/v1/policy', { key: `writ_0_${'Q'.repeat(43)}` });
    return { status: r.status, code: r.body.error.code, message: r.body.error.message };
  }

  it('any change to the routing part or the secret is a 401 that tells nothing (property)', async () => {
    const s = await seedTenant('tamper');
    const other = await seedTenant('tamper');
    const good = s.agent.api_key;
    expect((await call('GET', '/v1/policy', { key: good })).status).toBe(200);
    const baseline = await unknownKeyAnswer();
    expect(baseline.status).toBe(401);
    const route = parseApiKey(good);
    if (route === null) throw new Error('unparsable key');
    const secret = good.slice(good.length - 43);
    const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const mutation = fc.oneof(
      // Route the same secret to another shard (configured or not).
      fc
        .integer({ min: 0, max: 999 })
        .filter((n) => n !== route.shard)
        .map((n) => `writ_${n}_${secret}`),
      // Strip the routing part: an earlier-format key with the same secret (it routes to shard 0).
      fc.constant(`writ_${secret}`),
      // Change one character of the secret.
      fc.tuple(fc.integer({ min: 0, max: 42 }), fc.integer({ min: 0, max: 63 })).map(([i, c]) => {
        const ch = B64[c] as string;
        const next = ch === secret[i] ? (B64[(c + 1) % 64] as string) : ch;
        return `writ_${route.shard}_${secret.slice(0, i)}${next}${secret.slice(i + 1)}`;
      }),
      // Another tenant's routing part in front of this secret.
      fc.constant(`writ_${shardOf(other)}_${secret}`).filter((k) => k !== good),
    );
    await fc.assert(
      fc.asyncProperty(mutation, async (key) => {
        const r = await call('GET', '/v1/policy', { key });
        expect({ status: r.status, code: r.body.error.code, message: r.body.error.message }).toEqual(
          baseline,
        );
      }),
      { numRuns: 40 },
    );
  });

  it('an earlier-format key (no routing part) still authenticates, on shard 0', async () => {
    // A principal created before shards: its key has no routing part; its tenant is on shard 0.
    let s = await seedTenant('legacy');
    if (shardOf(s) !== 0) s = await seedTenant('legacy');
    expect(shardOf(s)).toBe(0);
    const legacy = `writ_${newId('principal').slice(4, 30)}${'L'.repeat(17)}`;
    const route = parseApiKey(legacy);
    expect(route).toMatchObject({ shard: 0, legacy: true });
    await env.DB.prepare(
      `INSERT INTO principals (principal_id, tenant_id, name, roles, executor_release, key_sha256, created_by, created_at_unix_ms)
       VALUES (?, ?, 'legacy admin', '["tenant_admin"]', NULL, ?, NULL, ?)`,
    )
      .bind(newId('principal'), s.tenant_id, route?.key_sha256, Date.now())
      .run();
    const r = await call('GET', '/v1/policy', { key: legacy });
    expect(r.status).toBe(200);
    // The same secret routed explicitly is another key: nothing stored has its digest.
    expect((await call('GET', '/v1/policy', { key: legacy.replace(/^writ_/, 'writ_0_') })).status).toBe(401);
  });
});

describe('platform admin', () => {
  it('a quota change finds the tenant’s shard through the directory', async () => {
    const s = await seedTenant('quota-shard');
    const r = await call('PUT', `/v1/tenants/${s.tenant_id}/quotas`, {
      key: ADMIN_TOKEN,
      body: {
        max_stored_bytes: 1_000_000,
        max_receipts_per_day: 1000,
        max_open_approvals: 10,
        max_open_runs: 10,
      },
    });
    expect(r.status).toBe(200);
    const row = await tenantD1(s)
      .prepare('SELECT max_open_runs FROM tenant_quotas WHERE tenant_id = ?')
      .bind(s.tenant_id)
      .first<{ max_open_runs: number }>();
    expect(row?.max_open_runs).toBe(10);
  });
});

/**
 * What the creation's D1 batch does on either shard: `commit` runs it and then throws (the answer
 * lost after the commit, as a dropped connection), `lose` throws without running it. With
 * `reread_fails`, every later read of `tenants` on that binding throws too (the shard unreachable).
 */
interface BatchFault {
  readonly batch: 'commit' | 'lose';
  readonly reread_fails?: boolean;
  tripped?: boolean;
}

function faulty(d1: D1Database, fault: BatchFault): D1Database {
  return new Proxy(d1, {
    get(t, p) {
      if (p === 'batch')
        return async (statements: D1PreparedStatement[]) => {
          if (fault.tripped === true) return t.batch(statements);
          fault.tripped = true;
          if (fault.batch === 'commit') await t.batch(statements);
          throw new Error('Network connection lost.');
        };
      if (p === 'prepare')
        return (q: string) => {
          if (fault.tripped === true && fault.reread_fails === true && /from "tenants"/i.test(q))
            throw new Error('D1_ERROR: shard unreachable');
          return t.prepare(q);
        };
      const v: unknown = Reflect.get(t, p, t);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
    },
  });
}

/** `createTenant` over the real shards, each behind `faulty` with one shared fault. */
function creating(name: string, fault: BatchFault) {
  const wrapped = { ...env, DB: faulty(env.DB, fault), DB_SHARD_1: faulty(env.DB_SHARD_1, fault) } as Env;
  return createTenant(platformStore(wrapped), { name }, Date.now(), () => undefined);
}

const tenantRowOn = async (name: string) => {
  for (const shard of [0, 1]) {
    const row = await (shard === 0 ? env.DB : env.DB_SHARD_1)
      .prepare('SELECT tenant_id FROM tenants WHERE name = ?')
      .bind(name)
      .first<{ tenant_id: string }>();
    if (row !== null) return { shard, tenant_id: row.tenant_id };
  }
  return null;
};

const directoryEntry = (name: string) =>
  env.DB.prepare('SELECT tenant_id, shard FROM tenant_shards WHERE name = ?')
    .bind(name)
    .first<{ tenant_id: string; shard: number }>();

describe('a tenant creation whose batch answered an error', () => {
  it('that had committed keeps its directory entry and answers the tenant', async () => {
    const name = `commit-then-error-${newId('tenant').slice(4, 12)}`;
    const fault: BatchFault = { batch: 'commit' };
    const created = await creating(name, fault);
    expect(fault.tripped).toBe(true);
    const written = await tenantRowOn(name);
    expect(written).not.toBeNull();
    expect(created.tenant.tenant_id).toBe(written?.tenant_id);
    // The directory still names the shard holding the rows, so the tenant resolves and its name
    // cannot be taken again on another shard.
    expect(await directoryEntry(name)).toEqual(written);
    expect((await call('GET', '/v1/policy', { key: created.admin.api_key })).status).toBe(200);
    expect((await call('POST', '/v1/tenants', { key: ADMIN_TOKEN, body: { name } })).status).toBe(409);
  });

  it('that had not committed releases the entry: the name is free again', async () => {
    const name = `lost-batch-${newId('tenant').slice(4, 12)}`;
    await expect(creating(name, { batch: 'lose' })).rejects.toThrow(/connection lost/);
    expect(await tenantRowOn(name)).toBeNull();
    expect(await directoryEntry(name)).toBeNull();
    expect((await call('POST', '/v1/tenants', { key: ADMIN_TOKEN, body: { name } })).status).toBe(201);
  });

  it('whose outcome cannot be read back keeps the entry (fails closed)', async () => {
    const name = `unknown-outcome-${newId('tenant').slice(4, 12)}`;
    await expect(creating(name, { batch: 'commit', reread_fails: true })).rejects.toThrow(/connection lost/);
    const written = await tenantRowOn(name);
    expect(written).not.toBeNull();
    expect(await directoryEntry(name)).toEqual(written);
    expect((await call('POST', '/v1/tenants', { key: ADMIN_TOKEN, body: { name } })).status).toBe(409);
  });
});

/**
 * What the name reservation (the `tenant_shards` insert on shard 0) does: `commit` runs it and
 * then throws (the answer lost after the commit), `lose` throws without running it. With
 * `reread_fails`, every later read of the directory through that binding throws too.
 */
interface ReservationFault {
  readonly insert: 'commit' | 'lose';
  readonly reread_fails?: boolean;
  tripped?: boolean;
}

function reservationFaulty(d1: D1Database, fault: ReservationFault): D1Database {
  const afterRun = (stmt: D1PreparedStatement): D1PreparedStatement =>
    new Proxy(stmt, {
      get(t, p) {
        if (p === 'bind') return (...args: unknown[]) => afterRun(t.bind(...args));
        if (p === 'run' || p === 'all' || p === 'raw' || p === 'first')
          return async () => {
            fault.tripped = true;
            if (fault.insert === 'commit') await t.run();
            throw new Error('Network connection lost.');
          };
        const v: unknown = Reflect.get(t, p, t);
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
      },
    });
  return new Proxy(d1, {
    get(t, p) {
      if (p === 'prepare')
        return (q: string) => {
          if (fault.tripped !== true && /^insert into "tenant_shards"/i.test(q))
            return afterRun(t.prepare(q));
          if (fault.tripped === true && fault.reread_fails === true && /from "tenant_shards"/i.test(q))
            throw new Error('D1_ERROR: shard 0 unreachable');
          return t.prepare(q);
        };
      const v: unknown = Reflect.get(t, p, t);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
    },
  });
}

/** `createTenant` over the real shards, the directory's binding behind `reservationFaulty`. */
function reserving(name: string, fault: ReservationFault) {
  const wrapped = { ...env, DB: reservationFaulty(env.DB, fault) } as Env;
  return createTenant(platformStore(wrapped), { name }, Date.now(), () => undefined);
}

describe('a tenant creation whose name reservation answered an error', () => {
  it('that had committed goes on with its reservation and answers the tenant', async () => {
    const name = `reserved-then-error-${newId('tenant').slice(4, 12)}`;
    const fault: ReservationFault = { insert: 'commit' };
    const created = await reserving(name, fault);
    expect(fault.tripped).toBe(true);
    const written = await tenantRowOn(name);
    expect(written?.tenant_id).toBe(created.tenant.tenant_id);
    expect(await directoryEntry(name)).toEqual(written);
    expect((await call('GET', '/v1/policy', { key: created.admin.api_key })).status).toBe(200);
    expect((await call('POST', '/v1/tenants', { key: ADMIN_TOKEN, body: { name } })).status).toBe(409);
  });

  it('that had not committed reserves nothing: the name is free', async () => {
    const name = `lost-reservation-${newId('tenant').slice(4, 12)}`;
    await expect(reserving(name, { insert: 'lose' })).rejects.toThrow(/tenant_shards/);
    expect(await directoryEntry(name)).toBeNull();
    expect(await tenantRowOn(name)).toBeNull();
    expect((await call('POST', '/v1/tenants', { key: ADMIN_TOKEN, body: { name } })).status).toBe(201);
  });

  it('whose outcome cannot be read back keeps the entry and writes no tenant (fails closed)', async () => {
    const name = `unknown-reservation-${newId('tenant').slice(4, 12)}`;
    await expect(reserving(name, { insert: 'commit', reread_fails: true })).rejects.toThrow(/tenant_shards/);
    expect(await directoryEntry(name)).not.toBeNull();
    expect(await tenantRowOn(name)).toBeNull();
    expect((await call('POST', '/v1/tenants', { key: ADMIN_TOKEN, body: { name } })).status).toBe(409);
  });
});
