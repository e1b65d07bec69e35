/**
 * `npm run bench:storage` (issue 10, "Measure D1 bytes per authorization receipt"): what one
 * authorization adds to its shard's D1 database on disk, table by table and index by index.
 *
 * Starts the Worker in workerd (bench/direct-worker.ts: local D1 over every shard, a throwaway
 * state directory), seeds the demo tenant and opens a run, stops the Worker, and reads every
 * local D1 database file with SQLite's `dbstat` (node:sqlite, read-only): the pages each table
 * and index holds. Then it starts the Worker again on the same state, sends BENCH_AUTHORIZATIONS
 * allowed `POST /v1/authorize` calls (read-only contract, so each stores one authorization receipt
 * and its signature row), stops it and reads the files again. The growth over the calls, divided
 * by their number, is printed per table and index (bytes of whole pages, and of the rows' payload
 * in them), grouped into the receipt row with its index entries and the signature row (issue 11,
 * the log leaf) with its own, beside the growth of the databases' size (page count times page
 * size, as D1's `meta.size_after` reports it). What `dbstat` counts is what D1 bills as
 * database size: the file's pages, B-tree slack included.
 *
 * Environment: BENCH_AUTHORIZATIONS (default 1,000, 100..20,000).
 * Not part of `npm test`: local D1 is SQLite as D1 runs it, but page fill depends on row order.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { ensureDevVars } from '../scripts/dev.js';
import { startDirectWorker } from './direct-worker.js';
import { seedAuthorizeTarget } from './local-authorize.js';

const N = Math.min(20_000, Math.max(100, Number(process.env.BENCH_AUTHORIZATIONS ?? 1000)));

/** The local D1 database files under a wrangler state directory (one per shard). */
function d1Files(state: string): string[] {
  const dir = path.join(state, 'v3', 'd1', 'miniflare-D1DatabaseObject');
  return readdirSync(dir)
    .filter((f) => f.endsWith('.sqlite') && f !== 'metadata.sqlite')
    .map((f) => path.join(dir, f));
}

interface Usage {
  readonly pages: number;
  readonly bytes: number;
  readonly payload: number;
}

/** Per table or index name, summed over every shard's file; `#file` is the files' total size. */
function snapshot(state: string): Map<string, Usage> {
  const out = new Map<string, Usage>();
  const add = (name: string, u: Usage) => {
    const had = out.get(name) ?? { pages: 0, bytes: 0, payload: 0 };
    out.set(name, {
      pages: had.pages + u.pages,
      bytes: had.bytes + u.bytes,
      payload: had.payload + u.payload,
    });
  };
  for (const file of d1Files(state)) {
    const db = new DatabaseSync(file, { readOnly: true });
    try {
      const rows = db
        .prepare(
          'SELECT name, count(*) AS pages, sum(pgsize) AS bytes, sum(payload) AS payload FROM dbstat GROUP BY name',
        )
        .all() as unknown as { name: string; pages: number; bytes: number; payload: number }[];
      for (const r of rows) add(r.name, r);
      // The database's size as SQLite (and D1's `meta.size_after`) states it: pages times page
      // size, those still in the write-ahead log included, free pages too.
      const size = db
        .prepare('SELECT page_count * page_size AS bytes FROM pragma_page_count(), pragma_page_size()')
        .get() as unknown as { bytes: number };
      add('#file', { pages: 0, bytes: size.bytes, payload: 0 });
    } finally {
      db.close();
    }
  }
  return out;
}

/** Which record an index or table belongs to, for the grouped totals. */
const GROUPS: readonly (readonly [string, readonly string[]])[] = [
  [
    'receipt row and its index entries',
    ['receipts', 'sqlite_autoindex_receipts_1', 'receipts_kind', 'receipts_created'],
  ],
  [
    'signature row (log leaf) and its index entries',
    ['receipt_signatures', 'receipt_signatures_receipt', 'receipt_signatures_drain'],
  ],
];

async function main(): Promise<void> {
  const adminToken = ensureDevVars();
  // Every call must be admitted: the limits are not what this measures.
  const unlimited = Object.fromEntries(
    [
      'WRIT_RATE_LIMIT_PER_SECOND',
      'WRIT_RATE_LIMIT_BURST',
      'WRIT_TENANT_RATE_LIMIT_PER_SECOND',
      'WRIT_TENANT_RATE_LIMIT_BURST',
    ].map((name) => [name, '1000000']),
  );
  const vars = { WRIT_ADMIN_TOKEN: adminToken, ...unlimited };
  const state = mkdtempSync(path.join(os.tmpdir(), 'writ-bench-storage-'));
  try {
    console.log('seeding the demo tenant in workerd ...');
    let worker = await startDirectWorker({ state, vars });
    let target;
    try {
      target = await seedAuthorizeTarget(worker.base, adminToken);
    } finally {
      await worker.dispose();
    }
    const before = snapshot(state);
    console.log(`${N} allowed authorizations ...`);
    worker = await startDirectWorker({ state, vars });
    try {
      for (let i = 0; i < N; i++) {
        const r = await fetch(`${worker.base}/v1/authorize`, {
          method: 'POST',
          headers: target.agent,
          body: target.body,
        });
        const text = await r.text();
        if (r.status !== 200) throw new Error(`authorize answered ${r.status}: ${text}`);
      }
    } finally {
      await worker.dispose();
    }
    const after = snapshot(state);
    const grown = (name: string) => {
      const a = after.get(name) ?? { pages: 0, bytes: 0, payload: 0 };
      const b = before.get(name) ?? { pages: 0, bytes: 0, payload: 0 };
      return { bytes: (a.bytes - b.bytes) / N, payload: (a.payload - b.payload) / N };
    };
    const names = [...after.keys()].filter((n) => n !== '#file' && grown(n).bytes !== 0).sort();
    const pad = (s: string, n: number) => s.padEnd(n);
    const num = (x: number) => x.toFixed(0).padStart(8);
    console.log(`\nD1 growth per authorization over ${N} calls (pages of 4 KiB, bytes per call)`);
    console.log(`${pad('table or index', 52)}${'pages'.padStart(8)}${'payload'.padStart(8)}`);
    for (const n of names) console.log(`${pad(n, 52)}${num(grown(n).bytes)}${num(grown(n).payload)}`);
    let grouped = 0;
    for (const [label, members] of GROUPS) {
      const sum = members.reduce((s, m) => s + grown(m).bytes, 0);
      grouped += sum;
      console.log(`${pad(label, 52)}${num(sum)}`);
    }
    const other = names.reduce((s, n) => s + grown(n).bytes, 0) - grouped;
    console.log(`${pad('anything else', 52)}${num(other)}`);
    const file = grown('#file').bytes;
    console.log(`${pad('database size (page_count x page_size, every shard)', 52)}${num(file)}`);
    const receipt = GROUPS[0] === undefined ? 0 : GROUPS[0][1].reduce((s, m) => s + grown(m).bytes, 0);
    console.log(
      `\ngoal: at most 1.5 KB (1,536 bytes) of D1 per authorization receipt: the receipt row with its index entries ${receipt.toFixed(0)} bytes (${receipt <= 1536 ? 'met' : 'not met'}); with its signature row, the whole authorization ${file.toFixed(0)} bytes of database (${file <= 1536 ? 'met' : 'not met'})`,
    );
  } finally {
    rmSync(state, { recursive: true, force: true });
  }
}

await main();
