/**
 * `writ tenant export|import|upload|abort-import` against the Worker: the CLI moves a tenant to
 * the other shard (directly and through an upload), aborts a staged import, and refuses without
 * the platform admin token in the environment.
 */
import { env as workerEnv } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import type { CliIo } from '../../../src/cli/io.js';
import { main } from '../../../src/cli/writ.js';
import { sha256HexOfText } from '../../../src/core/canonical/canonical.js';
import { parseApiKey } from '../../../src/core/identity/identity.js';
import { tenantMovePort } from '../../../src/platform/bindings.js';
import { ADMIN_TOKEN, BASE, call, seedTenant, shardOf, workerFetch } from './harness.js';

function cli(env: Record<string, string>, files: Record<string, Uint8Array> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const io: CliIo = {
    readFile: async (p) => {
      const f = files[p];
      if (f === undefined) throw new Error('no such file');
      return f;
    },
    stdout: (t) => out.push(t),
    stderr: (t) => err.push(t),
    env,
    fetch: (r) => workerFetch(r.url, r),
  };
  return { io, out: () => out.join(''), err: () => err.join('') };
}

describe('writ tenant', () => {
  it('exports a tenant and imports it onto the other shard', async () => {
    const s = await seedTenant('cli-move');
    const env = { WRIT_URL: BASE, WRIT_ADMIN_TOKEN: ADMIN_TOKEN };
    const exp = cli(env);
    expect(await main(['tenant', 'export', s.tenant_id, '--freeze'], exp.io)).toBe(0);
    expect(exp.out().split('\n').length).toBeGreaterThan(5);
    const to = 1 - shardOf(s);
    const imp = cli(env, { 'tenant.jsonl': new TextEncoder().encode(exp.out()) });
    expect(await main(['tenant', 'import', '--shard', String(to), 'tenant.jsonl'], imp.io)).toBe(0);
    const answer = JSON.parse(imp.out()) as {
      shard: number;
      keys: { principal_id: string; api_key: string }[];
    };
    expect(answer.shard).toBe(to);
    const admin = answer.keys.find((k) => k.principal_id === s.admin.principal_id)?.api_key as string;
    expect(parseApiKey(admin)?.shard).toBe(to);
    expect((await call('GET', '/v1/policy', { key: admin })).status).toBe(200);
    // A second import of the same file onto the same shard: refused, exit 1, the reason on stderr.
    const again = cli(env, { 'tenant.jsonl': new TextEncoder().encode(exp.out()) });
    expect(await main(['tenant', 'import', '--shard', String(to), 'tenant.jsonl'], again.io)).toBe(1);
    expect(again.err()).toMatch(/already/);
    // Nothing is staged there: aborting is refused (exit 1); without --shard, usage (exit 2).
    const abort = cli(env);
    expect(await main(['tenant', 'abort-import', '--shard', String(to), s.tenant_id], abort.io)).toBe(1);
    expect(abort.err()).toMatch(/live on shard/);
    expect(await main(['tenant', 'abort-import', s.tenant_id], cli(env).io)).toBe(2);
  });

  it('aborts a staged import', async () => {
    const s = await seedTenant('cli-abort');
    const env = { WRIT_URL: BASE, WRIT_ADMIN_TOKEN: ADMIN_TOKEN };
    const exp = cli(env);
    expect(await main(['tenant', 'export', s.tenant_id], exp.io)).toBe(0);
    const to = 1 - shardOf(s);
    // An import opened on the target and never finished (its first batch only).
    const staged = { tenant_id: s.tenant_id, file_sha256: sha256HexOfText(exp.out()), rows_total: 2 };
    expect(await tenantMovePort(workerEnv).beginImport(to, staged, Date.now())).toEqual({ rows_done: 0 });
    const abort = cli(env);
    expect(await main(['tenant', 'abort-import', '--shard', String(to), s.tenant_id], abort.io)).toBe(0);
    expect(JSON.parse(abort.out())).toMatchObject({ tenant_id: s.tenant_id, shard: to, aborted: true });
    const again = cli(env);
    expect(await main(['tenant', 'abort-import', '--shard', String(to), s.tenant_id], again.io)).toBe(1);
    expect(again.err()).toMatch(/not found|staged import/);
  });

  it('uploads a file in parts and imports it from there, calling again while it is part-way', async () => {
    const s = await seedTenant('cli-upload');
    const env = { WRIT_URL: BASE, WRIT_ADMIN_TOKEN: ADMIN_TOKEN };
    const exp = cli(env);
    expect(await main(['tenant', 'export', s.tenant_id, '--freeze'], exp.io)).toBe(0);
    const up = cli(env, { 'tenant.jsonl': new TextEncoder().encode(exp.out()) });
    expect(await main(['tenant', 'upload', 'tenant.jsonl'], up.io)).toBe(0);
    const { upload_id } = JSON.parse(up.out()) as { upload_id: string };
    const to = 1 - shardOf(s);
    const imp = cli(env);
    expect(await main(['tenant', 'import', '--shard', String(to), '--upload', upload_id], imp.io)).toBe(0);
    const answer = JSON.parse(imp.out()) as {
      shard: number;
      keys: { principal_id: string; api_key: string }[];
    };
    expect(answer.shard).toBe(to);
    const admin = answer.keys.find((k) => k.principal_id === s.admin.principal_id)?.api_key as string;
    expect((await call('GET', '/v1/policy', { key: admin })).status).toBe(200);
    const both = cli(env);
    expect(await main(['tenant', 'import', '--shard', '1', '--upload', upload_id, 'x.jsonl'], both.io)).toBe(
      2,
    );
  });

  it('needs the platform admin token in the environment, never as an argument', async () => {
    const s = await seedTenant('cli-token');
    const none = cli({ WRIT_URL: BASE });
    expect(await main(['tenant', 'export', s.tenant_id], none.io)).toBe(2);
    expect(none.err()).toContain('WRIT_ADMIN_TOKEN');
    const asKey = cli({ WRIT_URL: BASE });
    expect(await main(['tenant', 'export', s.tenant_id, '--key', ADMIN_TOKEN], asKey.io)).toBe(2);
    expect(asKey.err()).not.toContain(ADMIN_TOKEN);
    const wrong = cli({ WRIT_URL: BASE, WRIT_ADMIN_TOKEN: `${ADMIN_TOKEN}x` });
    expect(await main(['tenant', 'export', s.tenant_id], wrong.io)).toBe(1);
  });
});
