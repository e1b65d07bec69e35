/**
 * A tenant import larger than one D1 batch (src/services/tenant-moves.ts `importTenant`,
 * src/db/tenant-rows.ts, migrations/0011): the file is verified whole, written in bounded chunks
 * while the tenant is invisible, and made live by one last batch. A failure in the middle leaves
 * nothing visible, and sending the same file again resumes and succeeds.
 */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { apiKeyDigest } from '../../../src/core/identity/identity.js';
import { tenantMovePort } from '../../../src/platform/bindings.js';
import { d1PlatformStore } from '../../../src/db/platform-store.js';
import { database } from '../../../src/db/client.js';
import type { TenantMovePort } from '../../../src/services/ports.js';
import { importTenant } from '../../../src/services/tenant-moves.js';
import { sha256HexOfText } from '../../../src/core/canonical/canonical.js';
import {
  ADMIN_TOKEN,
  call,
  countOn,
  directoryShard,
  tenantRowsOn,
  shardD1,
  shardOf,
  exportedTenant,
} from './harness.js';

/** The real port, with every chunk call counted and chunk number `failAt` (1-based) failing. */
function countingPort(failAt: number | null) {
  const real = tenantMovePort(env);
  const seen = { chunks: 0, froms: [] as number[] };
  const port: TenantMovePort = {
    ...real,
    async importChunk(shard, s, chunk, now) {
      seen.chunks += 1;
      seen.froms.push(chunk.from);
      // The injected failure: the batch never reaches D1, as when the Worker dies mid-import.
      if (seen.chunks === failAt) throw new Error('injected failure in the middle chunk');
      return real.importChunk(shard, s, chunk, now);
    },
  };
  return { port, seen };
}

const noLog = () => undefined;

describe('an import larger than one batch', () => {
  it('is written in several chunks and goes live whole', async () => {
    const { s, receipts, text, lines } = await exportedTenant('chunked');
    const to = 1 - shardOf(s);
    const { port, seen } = countingPort(null);
    const fields: Record<string, unknown> = {};
    const imported = await importTenant(port, to, text, Date.now(), (f) => Object.assign(fields, f), {
      chunk_rows: 4,
    });
    expect(lines).toBeGreaterThan(12);
    expect(seen.chunks).toBe(Math.ceil(lines / 4));
    expect(fields).toMatchObject({ chunks: seen.chunks, resumed_at_row: 0 });
    expect(await tenantRowsOn(to, s.tenant_id)).toBe(lines);
    // Nothing staged is left behind.
    expect(
      await countOn(to, 'SELECT count(*) AS n FROM tenant_imports WHERE tenant_id = ?', s.tenant_id),
    ).toBe(0);
    expect(
      await countOn(
        to,
        'SELECT count(*) AS n FROM tenant_import_principals WHERE tenant_id = ?',
        s.tenant_id,
      ),
    ).toBe(0);
    const admin = imported.keys.find((k) => k.principal_id === s.admin.principal_id)?.api_key as string;
    for (const sha of receipts)
      expect((await call('GET', `/v1/receipts/${sha}`, { key: admin })).status).toBe(200);
    expect(await directoryShard(s.tenant_id)).toBe(to);
  });

  it('that fails in the middle chunk leaves nothing visible, and the same file again finishes it', async () => {
    const { s, receipts, text, lines } = await exportedTenant('failmid');
    const from = shardOf(s);
    const to = 1 - from;
    const chunk_rows = 5;
    const middle = Math.ceil(Math.ceil(lines / chunk_rows) / 2);
    expect(middle).toBeGreaterThan(1);
    const failing = countingPort(middle);
    await expect(importTenant(failing.port, to, text, Date.now(), noLog, { chunk_rows })).rejects.toThrow(
      /injected failure/,
    );
    // Invisible: the directory still names the old shard, no principal of it exists on the
    // target (so no key can authenticate there), and retention does not see it.
    expect(await directoryShard(s.tenant_id)).toBe(from);
    expect(await countOn(to, 'SELECT count(*) AS n FROM principals WHERE tenant_id = ?', s.tenant_id)).toBe(
      0,
    );
    expect(
      await countOn(to, 'SELECT rows_done AS n FROM tenant_imports WHERE tenant_id = ?', s.tenant_id),
    ).toBe((middle - 1) * chunk_rows);
    const windows = await d1PlatformStore(database({ DB: shardD1(to) })).retentionWindows(null, 10_000);
    expect(windows.map((w) => w.tenant_id)).not.toContain(s.tenant_id);

    // Another file for the staged tenant is refused; the staging is untouched.
    const other = `${text.trimEnd().split('\n').slice(0, -1).join('\n')}\n`;
    await expect(importTenant(tenantMovePort(env), to, other, Date.now(), noLog)).rejects.toMatchObject({
      reason: 'conflict',
    });

    // The same file again, over HTTP with the default chunk size: resumes after the last chunk
    // that committed, writes every remaining row once, and goes live.
    const retry = await call('POST', `/v1/tenants/import?shard=${to}`, {
      key: ADMIN_TOKEN,
      raw: text,
      headers: { 'content-type': 'application/x-ndjson' },
    });
    expect(retry.status).toBe(201);
    expect(await tenantRowsOn(to, s.tenant_id)).toBe(lines);
    expect(
      await countOn(to, 'SELECT count(*) AS n FROM tenant_imports WHERE tenant_id = ?', s.tenant_id),
    ).toBe(0);
    const keys = retry.body.keys as { principal_id: string; api_key: string }[];
    const admin = keys.find((k) => k.principal_id === s.admin.principal_id)?.api_key as string;
    for (const sha of receipts)
      expect((await call('GET', `/v1/receipts/${sha}`, { key: admin })).status).toBe(200);
    const order = await shardD1(to)
      .prepare('SELECT receipt_sha256 FROM receipt_signatures WHERE tenant_id = ? ORDER BY seq')
      .bind(s.tenant_id)
      .all<{ receipt_sha256: string }>();
    expect(order.results.map((r) => r.receipt_sha256)).toEqual(receipts);
    expect(await directoryShard(s.tenant_id)).toBe(to);
  });
});

describe('a staged batch commits only against the progress it was cut for', () => {
  it('a chunk cut for stale progress, and a flip before every row is written, write nothing', async () => {
    const { s, text, lines } = await exportedTenant('guard');
    const to = 1 - shardOf(s);
    const port = tenantMovePort(env);
    const staged = { tenant_id: s.tenant_id, file_sha256: sha256HexOfText(text), rows_total: lines };
    expect(await port.beginImport(to, staged, Date.now())).toEqual({ rows_done: 0 });
    const rows = text
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as { table: string; row: Record<string, string | number | null> });
    const chunk = { from: 0, rows: rows.slice(0, 3), exported_max_seq: 0 };
    expect(await port.importChunk(to, staged, chunk, Date.now())).toBe('written');
    const before = await tenantRowsOn(to, s.tenant_id);
    // A second importer still at row 0 (two importers of one file): refused, nothing written.
    expect(await port.importChunk(to, staged, chunk, Date.now())).toBe('moved');
    // Another file's progress does not count.
    expect(
      await port.importChunk(
        to,
        { ...staged, file_sha256: '0'.repeat(64) },
        { ...chunk, from: 3 },
        Date.now(),
      ),
    ).toBe('moved');
    // Going live (or keying principals) before the last row is written: refused.
    const quota = rows.find((r) => r.table === 'tenant_quotas');
    expect(quota).toBeDefined();
    if (quota === undefined) return;
    expect(await port.goLive(to, staged, quota, 1 - to, Date.now())).toBe('moved');
    expect(
      await port.keyPrincipals(to, staged, [
        { principal_id: s.admin.principal_id, key_sha256: apiKeyDigest('x') },
      ]),
    ).toBe('moved');
    expect(await tenantRowsOn(to, s.tenant_id)).toBe(before);
    expect(await countOn(to, 'SELECT count(*) AS n FROM principals WHERE tenant_id = ?', s.tenant_id)).toBe(
      0,
    );
  });

  it('a flip with a live principal never keyed fails whole: nothing goes live', async () => {
    const { s, text, lines } = await exportedTenant('unkeyed');
    const to = 1 - shardOf(s);
    const port = tenantMovePort(env);
    const staged = { tenant_id: s.tenant_id, file_sha256: sha256HexOfText(text), rows_total: lines };
    await port.beginImport(to, staged, Date.now());
    const rows = text
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as { table: string; row: Record<string, string | number | null> });
    const exported_max_seq = Math.max(
      0,
      ...rows.filter((r) => r.table === 'receipt_signatures').map((r) => Number(r.row.seq)),
    );
    expect(await port.importChunk(to, staged, { from: 0, rows, exported_max_seq }, Date.now())).toBe(
      'written',
    );
    const quota = rows.find((r) => r.table === 'tenant_quotas');
    if (quota === undefined) throw new Error('no quota row');
    // The staged principals have no key digest: copying them into `principals` fails the batch.
    await expect(port.goLive(to, staged, quota, 1 - to, Date.now())).rejects.toThrow();
    expect(await countOn(to, 'SELECT count(*) AS n FROM principals WHERE tenant_id = ?', s.tenant_id)).toBe(
      0,
    );
    expect(
      await countOn(to, 'SELECT count(*) AS n FROM tenant_imports WHERE tenant_id = ?', s.tenant_id),
    ).toBe(1);
    // The old keys do not reach the staged copy (they name the other shard, and were frozen).
    expect((await call('GET', '/v1/policy', { key: s.admin.api_key })).status).toBe(401);
  });
});
