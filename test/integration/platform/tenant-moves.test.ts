/**
 * Moving a tenant between shards (src/services/tenant-moves.ts): export as canonical JSON lines,
 * import on the other shard re-keyed, every receipt digest re-verified; any bad line refuses the
 * whole import with nothing written.
 */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { canonicalize } from '../../../src/core/canonical/canonical.js';
import type { JsonValue } from '../../../src/core/canonical/json.js';
import { parseApiKey } from '../../../src/core/identity/identity.js';
import { logSequencerStub } from '../../../durable-objects/log-sequencer.js';
import type { Seeded } from '../../../scripts/seed.js';
import { TENANT_TABLES, tenantTableColumns } from '../../../src/db/tenant-rows.js';
import { decodeSignatureEnvelope, encodeSignatureEnvelope } from '../../../src/db/signature-rows.js';
import { receiptOfRow } from './older-rows.js';
import {
  ADMIN_TOKEN,
  READ_INPUT,
  approvedApproval,
  authorize,
  call,
  createRun,
  exportTenant,
  importTo,
  seedTenant,
  shardD1,
  shardOf,
  tenantRowsOn,
} from './harness.js';

/** The receipts whose signatures `shard` holds for the tenant, in `seq` (log) order. */
async function signatures(shard: number, tenant_id: string): Promise<string[]> {
  const r = await shardD1(shard)
    .prepare('SELECT receipt_sha256 FROM receipt_signatures WHERE tenant_id = ? ORDER BY seq')
    .bind(tenant_id)
    .all<{ receipt_sha256: string }>();
  return r.results.map((x) => x.receipt_sha256);
}

/** A tenant with a run and one stored authorization receipt. */
async function busyTenant(prefix: string): Promise<{ s: Seeded; receipt: string }> {
  const s = await seedTenant(prefix);
  const run = await createRun(s);
  const r = await authorize(s, {
    tool_contract_sha256: s.read_contract_sha256,
    input: READ_INPUT,
    run_id: run,
  });
  expect(r.status).toBe(200);
  return { s, receipt: r.body.receipt.sha256 as string };
}

/** Rewrite the first line of `table` with `f`, keeping every line canonical. */
function tamper(
  text: string,
  table: string,
  f: (row: Record<string, unknown>) => Record<string, unknown>,
  which: (row: Record<string, unknown>) => boolean = () => true,
): string {
  let done = false;
  const out = text
    .split('\n')
    .map((line) => {
      if (done || line === '') return line;
      const v = JSON.parse(line) as { table: string; row: Record<string, unknown> };
      if (v.table !== table || !which(v.row)) return line;
      done = true;
      return canonicalize({ row: f(v.row), table: v.table });
    })
    .join('\n');
  // A case that changed nothing would pass for the wrong reason.
  if (!done) throw new Error(`no ${table} row to tamper with`);
  return out;
}

/** The first receipt row stored in this encoding (src/db/receipts.ts `RECEIPT_ENCODING`). */
const encoded = (n: number) => (row: Record<string, unknown>) => row.receipt_encoding === n;

/**
 * A receipt row re-stored, untampered, in an older encoding (1 wraps `{sha256, body}`, 2 is the
 * body less the tenant and principal): today every authorization is written positionally (3).
 */
function inEncoding(row: Record<string, unknown>, n: 1 | 2): Record<string, unknown> {
  const { sha256, body } = receiptOfRow(row);
  const { tenant_id: _t, principal_id: _p, ...rest } = body as Record<string, unknown>;
  const receipt = n === 1 ? canonicalize({ sha256, body }) : canonicalize(rest as JsonValue);
  return { ...row, receipt, receipt_encoding: n };
}

describe('tenant export', () => {
  it('is one canonical JSON line per row, of that tenant only', async () => {
    const { s } = await busyTenant('export');
    const e = await exportTenant(s.tenant_id);
    expect(e.status).toBe(200);
    const lines = e.text.split('\n');
    expect(lines.pop()).toBe('');
    expect(lines.length).toBe(await tenantRowsOn(shardOf(s), s.tenant_id));
    for (const line of lines) {
      const v = JSON.parse(line) as { table: string; row: { tenant_id: string } };
      expect(canonicalize(v)).toBe(line);
      expect(v.row.tenant_id).toBe(s.tenant_id);
    }
  });

  it('of an unknown tenant is a 404; without the platform admin token a 401', async () => {
    expect((await exportTenant('ten-nobody')).status).toBe(404);
    const s = await seedTenant('export-auth');
    const r = await call('POST', `/v1/tenants/${s.tenant_id}/export`, { key: s.admin.api_key, body: {} });
    expect(r.status).toBe(401);
  });
});

describe('moving a tenant to the other shard', () => {
  it('keeps its receipts, re-keys its principals and freezes the old copy', async () => {
    const { s, receipt } = await busyTenant('move');
    const from = shardOf(s);
    const to = 1 - from;
    const before = await call('GET', `/v1/receipts/${receipt}`, { key: s.admin.api_key });
    expect(before.status).toBe(200);

    const e = await exportTenant(s.tenant_id, true);
    expect(e.status).toBe(200);
    // Frozen: no key of the old copy authenticates any more.
    expect((await call('GET', '/v1/policy', { key: s.admin.api_key })).status).toBe(401);

    const imported = await importTo(to, e.text);
    expect(imported.status).toBe(201);
    expect(imported.body).toMatchObject({ tenant_id: s.tenant_id, shard: to, previous_shard: from });
    const keys = imported.body.keys as { principal_id: string; api_key: string }[];
    expect(keys.map((k) => k.principal_id).sort()).toEqual(
      [s.admin, s.agent, s.approver, s.executor].map((p) => p.principal_id).sort(),
    );
    for (const k of keys) expect(parseApiKey(k.api_key)?.shard).toBe(to);
    const admin = keys.find((k) => k.principal_id === s.admin.principal_id)?.api_key as string;
    const agent = keys.find((k) => k.principal_id === s.agent.principal_id)?.api_key as string;

    // The same receipt, byte for byte, now served from the other shard.
    const after = await call('GET', `/v1/receipts/${receipt}`, { key: admin });
    expect(after.status).toBe(200);
    expect(after.body.receipt).toEqual(before.body.receipt);
    // Grants and runs came along: the agent (same principal, new key) is authorized again.
    const run = await call('POST', '/v1/runs', {
      key: agent,
      body: { max_calls: 5, max_external_writes: 1, max_duration_ms: 600_000 },
    });
    expect(run.status).toBe(201);
    const again = await call('POST', '/v1/authorize', {
      key: agent,
      body: { tool_contract_sha256: s.read_contract_sha256, input: READ_INPUT, run_id: run.body.run_id },
    });
    expect(again.status).toBe(200);
    // The signatures came along, in their order (the log's order; `seq` itself is renumbered).
    expect(await signatures(from, s.tenant_id)).toEqual([receipt]);
    expect(await signatures(to, s.tenant_id)).toEqual([receipt, again.body.receipt.sha256]);
    // The directory points at the new shard; old keys still fail.
    const dir = await env.DB.prepare('SELECT shard FROM tenant_shards WHERE tenant_id = ?')
      .bind(s.tenant_id)
      .first<{ shard: number }>();
    expect(dir?.shard).toBe(to);
    expect((await call('GET', '/v1/policy', { key: s.agent.api_key })).status).toBe(401);
    // Importing it again onto the same shard is refused.
    expect((await importTo(to, e.text)).status).toBe(409);
  });
});

describe('an approval input the store could not read back', () => {
  // `1e20` is an integer-valued number past 2^53 that the JSON boundary accepts (an exponent), but
  // its canonical text is the integer literal 100000000000000000000, which the strict decoder
  // refuses: stored, the row failed every read of it (500) and every import of the tenant.
  const raw = (s: Seeded) =>
    `{"tool_contract_sha256":"${s.rollback_contract_sha256}","input":{"environment":"production",` +
    `"from_version":"v42","service":"api","to_version":"v41","units":1e20}}`;

  it('is refused at request (400), nothing stored, so the tenant still moves', async () => {
    const s = await seedTenant('approval-unreadable');
    const r = await call('POST', '/v1/approval-requests', { key: s.agent.api_key, raw: raw(s) });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('invalid_request');
    const stored = await shardD1(shardOf(s))
      .prepare('SELECT count(*) AS n FROM approvals WHERE tenant_id = ?')
      .bind(s.tenant_id)
      .first<{ n: number }>();
    expect(stored?.n).toBe(0);
    const pending = await call('GET', '/v1/approval-requests', { key: s.approver.api_key });
    expect(pending.status).toBe(200);
    const e = await exportTenant(s.tenant_id);
    expect(e.status).toBe(200);
    expect((await importTo(1 - shardOf(s), e.text)).status).toBe(201);
  });
});

describe("a moved tenant's transparency log", () => {
  it('goes on on the new shard: each receipt logged once, in order, though the old shard counted seq higher', async () => {
    const s = await seedTenant('move-log');
    const from = shardOf(s);
    const to = 1 - from;
    // The old shard's AUTOINCREMENT ahead of the new one's (a busier shard): the sequencer's
    // cursor, a seq of the old shard, is then above any seq the new shard would assign next.
    const top = async (shard: number) =>
      (
        await shardD1(shard)
          .prepare('SELECT coalesce(max(seq), 0) AS m FROM receipt_signatures')
          .first<{ m: number }>()
      )?.m ?? 0;
    // An execution signature: the quota triggers (migrations/0010) count it, never refuse it, so
    // the padding row needs no tenant quota row.
    await shardD1(from)
      .prepare(
        `INSERT INTO receipt_signatures (seq, tenant_id, receipt_sha256, envelope, created_at_unix_ms) VALUES (?, 'ten-seqpad', ?, '{"receipt_kind":"execution"}', 0)`,
      )
      .bind(Math.max(await top(from), await top(to)) + 1000, crypto.randomUUID())
      .run();
    const first = await authorize(s, {
      tool_contract_sha256: s.read_contract_sha256,
      input: READ_INPUT,
      run_id: await createRun(s),
    });
    expect(first.status).toBe(200);
    const log = logSequencerStub(env, s.tenant_id);
    await log.drain(s.tenant_id);
    expect(await log.inclusion(s.tenant_id, first.body.receipt.sha256)).toMatchObject({ index: 0, size: 1 });

    const e = await exportTenant(s.tenant_id, true);
    const imported = await importTo(to, e.text);
    expect(imported.status).toBe(201);
    const keys = imported.body.keys as { principal_id: string; api_key: string }[];
    const agent = keys.find((k) => k.principal_id === s.agent.principal_id)?.api_key as string;
    const run = await call('POST', '/v1/runs', {
      key: agent,
      body: { max_calls: 5, max_external_writes: 1, max_duration_ms: 600_000 },
    });
    const second = await call('POST', '/v1/authorize', {
      key: agent,
      body: { tool_contract_sha256: s.read_contract_sha256, input: READ_INPUT, run_id: run.body.run_id },
    });
    expect(second.status).toBe(200);
    await log.drain(s.tenant_id);
    for (const [index, sha] of [first.body.receipt.sha256, second.body.receipt.sha256].entries()) {
      expect(await log.inclusion(s.tenant_id, sha as string)).toMatchObject({
        status: 'included',
        index,
        size: 2,
      });
    }
    expect((await log.drain(s.tenant_id)).appended).toBe(0);
  });
});

/** The tenant's signature rows on `shard` as stored, in `seq` order. */
async function storedSignatures(shard: number, tenant_id: string) {
  const r = await shardD1(shard)
    .prepare('SELECT receipt_sha256, envelope FROM receipt_signatures WHERE tenant_id = ? ORDER BY seq')
    .bind(tenant_id)
    .all<{ receipt_sha256: string; envelope: string }>();
  return r.results;
}

describe('signature rows in both stored forms (issue 10)', () => {
  it('export the canonical envelopes; the import stores them positionally; the log keeps its leaves', async () => {
    const { s, receipt: a } = await busyTenant('move-sigforms');
    const second = await authorize(s, {
      tool_contract_sha256: s.read_contract_sha256,
      input: READ_INPUT,
      run_id: await createRun(s),
    });
    expect(second.status).toBe(200);
    const b = second.body.receipt.sha256 as string;
    const from = shardOf(s);
    const to = 1 - from;
    // Both rows positional; `a` re-stored as a release before issue 10 wrote it: the object.
    const leaves = new Map<string, string>();
    for (const r of await storedSignatures(from, s.tenant_id)) {
      expect(r.envelope[0]).toBe('[');
      leaves.set(r.receipt_sha256, decodeSignatureEnvelope(r.envelope, { tenant_id: s.tenant_id, ...r }));
    }
    const d1 = shardD1(from);
    const trigger = await d1
      .prepare(
        "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'receipt_signatures_no_update'",
      )
      .first<{ sql: string }>();
    await d1.batch([
      d1.prepare('DROP TRIGGER receipt_signatures_no_update'),
      d1
        .prepare('UPDATE receipt_signatures SET envelope = ? WHERE tenant_id = ? AND receipt_sha256 = ?')
        .bind(leaves.get(a), s.tenant_id, a),
      d1.prepare(trigger!.sql),
    ]);
    expect((await storedSignatures(from, s.tenant_id)).map((r) => r.envelope[0])).toEqual(['{', '[']);
    const log = logSequencerStub(env, s.tenant_id);
    await log.drain(s.tenant_id);
    const before = await log.checkpoint(s.tenant_id);
    expect(before.size).toBe(2);

    const e = await exportTenant(s.tenant_id, true);
    expect(e.status).toBe(200);
    // The file carries each canonical envelope, whichever form the row had.
    const exported = signatureLines(e.text);
    expect(exported).toEqual([
      [a, leaves.get(a)],
      [b, leaves.get(b)],
    ]);
    expect((await importTo(to, e.text)).status).toBe(201);
    // Stored positionally on the new shard, and read back as the same leaves.
    const moved = await storedSignatures(to, s.tenant_id);
    expect(moved.map((r) => r.envelope[0])).toEqual(['[', '[']);
    for (const r of moved) {
      expect(decodeSignatureEnvelope(r.envelope, { tenant_id: s.tenant_id, ...r })).toBe(
        leaves.get(r.receipt_sha256),
      );
    }
    // The log drains the new shard without a new leaf: same checkpoint size, same inclusion.
    expect((await log.drain(s.tenant_id)).appended).toBe(0);
    expect((await log.checkpoint(s.tenant_id)).checkpoint).toBe(before.checkpoint);
    // And a file exported from the new shard carries the same envelopes again.
    expect(signatureLines((await exportTenant(s.tenant_id)).text)).toEqual(exported);
  });
});

/** Each signature line's receipt and envelope, in file order. */
const signatureLines = (text: string) =>
  text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as { table: string; row: Record<string, unknown> })
    .filter((l) => l.table === 'receipt_signatures')
    .map((l) => [l.row.receipt_sha256, l.row.envelope]);

describe('an import is refused whole, writing nothing', () => {
  const cases: [string, (text: string) => string][] = [
    [
      'a wrapped receipt whose body no longer hashes to its digest',
      (t) =>
        tamper(t, 'receipts', (row) => {
          const wrapped = inEncoding(row, 1);
          const stored = JSON.parse(String(wrapped.receipt)) as {
            sha256: string;
            body: Record<string, unknown>;
          };
          return {
            ...wrapped,
            receipt: canonicalize({ ...stored, body: { ...stored.body, outcome: 'denied' } } as JsonValue),
          };
        }),
    ],
    [
      'a compact receipt whose body was changed',
      (t) =>
        tamper(t, 'receipts', (row) => {
          // The stored text is the body less tenant_id and principal_id (encoding 2).
          const compact = inEncoding(row, 2);
          const body = JSON.parse(String(compact.receipt)) as Record<string, unknown>;
          return { ...compact, receipt: canonicalize({ ...body, outcome: 'denied' } as JsonValue) };
        }),
    ],
    [
      'a positional receipt whose decision was changed',
      (t) =>
        tamper(
          t,
          'receipts',
          (row) => {
            // Encoding 3: [version, ...values in the layout's order]; 'decision' is the second member.
            const values = JSON.parse(String(row.receipt)) as unknown[];
            expect(['authorized', 'denied']).toContain(values[2]);
            values[2] = values[2] === 'authorized' ? 'denied' : 'authorized';
            return { ...row, receipt: canonicalize(values) };
          },
          encoded(3),
        ),
    ],
    [
      'a compact receipt moved to another principal (the body is completed from the columns)',
      (t) => tamper(t, 'receipts', (row) => ({ ...inEncoding(row, 2), principal_id: 'prn-someoneelse' })),
    ],
    [
      'a positional receipt moved to another principal',
      (t) => tamper(t, 'receipts', (row) => ({ ...row, principal_id: 'prn-someoneelse' }), encoded(3)),
    ],
    [
      'a positional receipt stored under another kind',
      (t) => tamper(t, 'receipts', (row) => ({ ...row, kind: 'execution' }), encoded(3)),
    ],
    [
      'evidence in R2 named by a malformed digest',
      (t) =>
        tamper(t, 'receipts', (row) => ({
          ...row,
          evidence: null,
          evidence_sha256: 'x',
          evidence_bytes: 2048,
        })),
    ],
    [
      'a signature envelope of another receipt',
      (t) => tamper(t, 'receipt_signatures', (row) => ({ ...row, receipt_sha256: 'f'.repeat(64) })),
    ],
    [
      'a signature of a receipt the file does not hold',
      (t) =>
        tamper(t, 'receipt_signatures', (row) => {
          const e = JSON.parse(String(row.envelope)) as Record<string, unknown>;
          const other = 'e'.repeat(64);
          return { ...row, receipt_sha256: other, envelope: canonicalize({ ...e, receipt_sha256: other }) };
        }),
    ],
    [
      // An export carries the canonical envelope, never the storage form (src/db/signature-rows.ts).
      'a signature envelope in its positional storage form',
      (t) =>
        tamper(t, 'receipt_signatures', (row) => ({
          ...row,
          envelope: encodeSignatureEnvelope(String(row.envelope), {
            tenant_id: String(row.tenant_id),
            receipt_sha256: String(row.receipt_sha256),
          }),
        })),
    ],
    [
      'a receipt filed under another digest',
      (t) => tamper(t, 'receipts', (row) => ({ ...row, sha256: 'f'.repeat(64) })),
    ],
    [
      'a grant document changed',
      (t) => tamper(t, 'grants', (row) => ({ ...row, grant_sha256: '0'.repeat(64) })),
    ],
    // Each of these went live before the import compared the columns with their document.
    [
      'a contract filed under another tool name than its document names',
      (t) => tamper(t, 'contracts', (row) => ({ ...row, tool_name: 'another_tool' })),
    ],
    [
      'a contract filed under another effect class than its document names',
      (t) =>
        tamper(t, 'contracts', (row) => ({
          ...row,
          effect: row.effect === 'read_only' ? 'irreversible' : 'read_only',
        })),
    ],
    [
      "a grant filed under another principal than its document's",
      (t) => tamper(t, 'grants', (row) => ({ ...row, principal_id: 'prn-someoneelse' })),
    ],
    [
      'an approval whose input is not the bytes its digest binds',
      (t) =>
        tamper(t, 'approvals', (row) => {
          const input = JSON.parse(String(row.input)) as Record<string, unknown>;
          return { ...row, input: canonicalize({ ...input, reason: 'approved for something else' }) };
        }),
    ],
    [
      'an approval whose input_bytes is not its input length',
      (t) => tamper(t, 'approvals', (row) => ({ ...row, input_bytes: Number(row.input_bytes) + 1 })),
    ],
    [
      'a run whose budget column is larger than its envelope grants',
      (t) => tamper(t, 'runs', (row) => ({ ...row, max_calls: Number(row.max_calls) + 100 })),
    ],
    [
      'a run envelope changed (its budget raised with the column)',
      (t) =>
        tamper(t, 'runs', (row) => {
          const e = JSON.parse(String(row.envelope)) as Record<string, unknown>;
          const max_calls = Number(row.max_calls) + 100;
          return { ...row, max_calls, envelope: canonicalize({ ...e, max_calls }) };
        }),
    ],
    [
      'an approval of an unknown status',
      (t) => tamper(t, 'approvals', (row) => ({ ...row, status: 'approvedish' })),
    ],
    ['an unknown column', (t) => tamper(t, 'runs', (row) => ({ ...row, extra: 1 }))],
    // Each of these three failed the chunk holding the row (null) or went live as another type
    // (SQLite's affinity) before the import checked values against their columns.
    ['a null in a NOT NULL column', (t) => tamper(t, 'runs', (row) => ({ ...row, writes_used: null }))],
    [
      'text in an INTEGER column (SQLite would have stored it as a number)',
      (t) => tamper(t, 'runs', (row) => ({ ...row, writes_used: '0' })),
    ],
    [
      'an integer in a TEXT column (SQLite would have stored it as text)',
      (t) => tamper(t, 'principals', (row) => ({ ...row, name: 7 })),
    ],
    [
      'a missing column',
      (t) =>
        tamper(t, 'runs', (row) => {
          const { writes_used: _dropped, ...rest } = row;
          return rest;
        }),
    ],
    ['an unknown table', (t) => `${t}${canonicalize({ row: { tenant_id: 'x' }, table: 'secrets' })}\n`],
    [
      'a row of another tenant',
      (t) => tamper(t, 'runs', (row) => ({ ...row, tenant_id: 'ten-someoneelse' })),
    ],
    ['a line not in canonical form', (t) => t.replace(/^\{"row":\{/, '{ "row":{')],
    ['a line that is not json', (t) => `${t}{"row":\n`],
    [
      'no tenants row',
      (t) =>
        t
          .split('\n')
          .filter((l) => !l.endsWith('"table":"tenants"}'))
          .join('\n'),
    ],
  ];

  for (const [what, change] of cases) {
    it(what, async () => {
      const { s } = await busyTenant('refuse');
      await approvedApproval(s);
      const to = 1 - shardOf(s);
      const e = await exportTenant(s.tenant_id);
      const bad = change(e.text);
      expect(bad).not.toBe(e.text);
      const r = await importTo(to, bad);
      expect(r.status).toBe(400);
      expect(r.body.error.message).toMatch(/^import refused, nothing written/);
      expect(await tenantRowsOn(to, s.tenant_id)).toBe(0);
      // The tenant still lives where it was, and its keys still work.
      expect((await call('GET', '/v1/policy', { key: s.admin.api_key })).status).toBe(200);
    });
  }

  for (const encoding of [1, 2] as const) {
    it(`accepts the same receipts re-stored untampered in encoding ${encoding} (the cases above change only what they name)`, async () => {
      const { s } = await busyTenant(`encoding${encoding}`);
      await approvedApproval(s);
      const to = 1 - shardOf(s);
      const e = await exportTenant(s.tenant_id);
      let n = 0;
      const older = e.text
        .split('\n')
        .map((line) => {
          if (line === '') return line;
          const v = JSON.parse(line) as { table: string; row: Record<string, unknown> };
          if (v.table !== 'receipts') return line;
          expect(v.row.receipt_encoding).toBe(3);
          n += 1;
          return canonicalize({ row: inEncoding(v.row, encoding), table: v.table } as JsonValue);
        })
        .join('\n');
      expect(n).toBeGreaterThan(0);
      const r = await importTo(to, older);
      expect(r.status).toBe(201);
      expect(await tenantRowsOn(to, s.tenant_id)).toBe(await tenantRowsOn(shardOf(s), s.tenant_id));
    });
  }

  it('the columns it checks values against are the ones the migrations made, on every shard', async () => {
    const byName = (a: { name: string }, b: { name: string }) => (a.name < b.name ? -1 : 1);
    for (const shard of [0, 1]) {
      for (const table of Object.keys(TENANT_TABLES)) {
        const { results } = await shardD1(shard)
          .prepare('SELECT name, type, "notnull" AS nn FROM pragma_table_info(?)')
          .bind(table)
          .all<{ name: string; type: string; nn: number }>();
        const made = results.map((r) => ({ name: r.name, type: r.type.toLowerCase(), notNull: r.nn === 1 }));
        expect(made.length).toBeGreaterThan(1);
        expect(made.sort(byName)).toEqual([...(tenantTableColumns(table) ?? [])].sort(byName));
      }
    }
  });

  it('onto an unconfigured shard, or without the ndjson media type', async () => {
    const { s } = await busyTenant('refuse-shard');
    const e = await exportTenant(s.tenant_id);
    expect((await importTo(7, e.text)).status).toBe(400);
    const wrongType = await call('POST', '/v1/tenants/import?shard=0', { key: ADMIN_TOKEN, raw: e.text });
    expect(wrongType.status).toBe(415);
  });
});
