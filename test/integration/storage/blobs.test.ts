/**
 * Issue 10, "Bounded D1": large evidence lives in R2 by its SHA-256 (create-only, re-hashed on
 * read, a mismatch refused), the authorization path never touches R2, an authorization receipt
 * costs at most 1.5 KB of D1 text, and receipts past their tenant's window move to R2 archives
 * while GET /v1/receipts/{sha256} and replay still work. Deleting a receipt that was not archived
 * stays impossible.
 */
import { createExecutionContext, createScheduledController, waitOnExecutionContext } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { canonicalize, sha256Hex } from '../../../src/core/canonical/canonical.js';
import { BlobIntegrityError, r2BlobStore } from '../../../src/db/blobs.js';
import { INLINE_EVIDENCE_MAX_BYTES } from '../../../src/db/tenant-store.js';
import { runRetention } from '../../../src/platform/bindings.js';
import worker from '../../../src/worker.js';
import type { Seeded } from '../../../scripts/seed.js';
import {
  BASE,
  authorizeBody,
  createRun,
  d1Of,
  READ_INPUT,
  setQuotas,
  tenantD1,
} from '../platform/harness.js';
import { type Json, call, seedTenant, uniqueName } from '../executions/helpers.js';
import { executed as executedRollback, postObservation, rawOutput } from './observation-helpers.js';

const SLOW_MS = 60_000;
const DAY_MS = 86_400_000;

/** A JSON payload well above the in-row evidence limit. */
const BIG_OUTPUT = canonicalize({
  generation: 8,
  status: 'rolled_back',
  notes: 'the deploy rolled back to the previous generation; '.repeat(
    Math.ceil((3 * INLINE_EVIDENCE_MAX_BYTES) / 52),
  ),
});

/** An authorized, claimed and reported rollback whose output was `BIG_OUTPUT`. */
function executed(s: Seeded) {
  return executedRollback(s, 'succeeded', BIG_OUTPUT);
}

interface Row {
  receipt_bytes: number;
  evidence_bytes_in_row: number | null;
  evidence_sha256: string | null;
  evidence_bytes: number | null;
  receipt_encoding: number;
}

// Tenants are spread over two D1 shards: raw SQL goes to the shard holding the tenant.
async function row(tenant_id: string, sha256: string): Promise<Row | null> {
  return (await d1Of(tenant_id))
    .prepare(
      `SELECT length(CAST(receipt AS BLOB)) AS receipt_bytes, length(CAST(evidence AS BLOB)) AS evidence_bytes_in_row,
            evidence_sha256, evidence_bytes, receipt_encoding
       FROM receipts WHERE tenant_id = ? AND sha256 = ?`,
    )
    .bind(tenant_id, sha256)
    .first<Row>();
}

async function storedBytes(tenant_id: string): Promise<number> {
  const r = await (
    await d1Of(tenant_id)
  )
    .prepare('SELECT stored_bytes FROM tenant_quotas WHERE tenant_id = ?')
    .bind(tenant_id)
    .first<{ stored_bytes: number }>();
  return r?.stored_bytes ?? -1;
}

/**
 * An R2 binding whose every operation is recorded and refused: proves a request never uses it.
 * Only R2's operations refuse; reading any other property gives `undefined`, as on a real
 * bucket (the request's D1 session wrapper, src/db/client.ts, probes each binding it is handed
 * for `withSession` to tell D1 bindings from the rest: a probe, not a use of R2).
 */
function unreachableR2(touched: string[]): R2Bucket {
  const refuse = (op: string) => () => {
    touched.push(op);
    throw new Error(`R2 ${op} on a path that must not touch R2`);
  };
  const ops = ['head', 'get', 'put', 'delete', 'list', 'createMultipartUpload', 'resumeMultipartUpload'];
  return Object.fromEntries(ops.map((op) => [op, refuse(op)])) as unknown as R2Bucket;
}

async function fetchWith(e: Env, path: string, key: string, body: unknown) {
  const ctx = createExecutionContext();
  const res = await worker.fetch(
    new Request(`${BASE}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }),
    e,
    ctx,
  );
  await waitOnExecutionContext(ctx);
  return { status: res.status, body: (await res.json()) as Json };
}

describe('authorization receipts in D1', { timeout: SLOW_MS }, () => {
  it('cost at most 1.1 KB of receipt, evidence and signature text, and replay from the positional encodings', async () => {
    const s = await seedTenant('bytes');
    const run = await createRun(s);
    const r = await call('POST', '/v1/authorize', {
      key: s.agent.api_key,
      body: authorizeBody(s, run, { tool_contract_sha256: s.read_contract_sha256, input: READ_INPUT }),
    });
    expect(r.status).toBe(200);
    const sha = r.body.receipt.sha256 as string;
    const stored = await row(s.tenant_id, sha);
    expect(stored?.receipt_encoding).toBe(3);
    expect(stored?.evidence_sha256).toBeNull();
    // The evidence positional too (src/db/evidence-encoding.ts): 47 bytes instead of 225.
    expect(stored?.evidence_bytes_in_row).toBeLessThanOrEqual(60);
    const bytes = (stored?.receipt_bytes ?? 0) + (stored?.evidence_bytes_in_row ?? 0);
    // Measured and stated in docs/storage.md ("Bytes per receipt"): 641 (818 with the evidence
    // stored as an object).
    console.info(`authorization receipt row: ${bytes} bytes of receipt and evidence`);
    expect(bytes).toBeLessThanOrEqual(700);
    // Since issue 11 every receipt also has its signature row (the log leaf's bytes), written in
    // the same batch: the whole text an authorization adds to D1 (docs/storage.md states both).
    const signature = await (
      await d1Of(s.tenant_id)
    )
      .prepare(
        'SELECT length(CAST(envelope AS BLOB)) AS n FROM receipt_signatures WHERE tenant_id = ? AND receipt_sha256 = ?',
      )
      .bind(s.tenant_id, sha)
      .first<{ n: number }>();
    expect(signature?.n).toBeGreaterThan(0);
    console.info(`with its signature row: ${bytes + (signature?.n ?? 0)} bytes of text`);
    expect(bytes + (signature?.n ?? 0)).toBeLessThanOrEqual(1100);
    // The API serves the receipt exactly as issued (its digest re-checked on read) and replays it.
    const got = await call('GET', `/v1/receipts/${sha}`, { key: s.admin.api_key });
    expect(got.status).toBe(200);
    expect(got.body.receipt).toEqual(r.body.receipt);
    expect(got.body.replay).toEqual({ ok: true, differences: [] });
  });

  it('grow the database by about 2 KB per authorization on disk, rows, index entries and page slack included', async () => {
    // D1's own figure (`meta.size_after`, the database file's size) over 90 authorizations of one
    // tenant: the receipt row, its signature row, every index entry and B-tree page slack.
    // Measured and stated in docs/storage.md ("Bytes per receipt"); encoding 2 measured ~2,960,
    // positional evidence 1,911 to 1,957 (this figure moves by whole 4 KiB pages, and free pages
    // left by other tests are reused first; `npm run bench:storage` measures each table exactly).
    const s = await seedTenant('bytes-disk');
    const runs: string[] = [];
    for (let i = 0; i < 5; i++) runs.push(await createRun(s, { max_calls: 100 }));
    const d1 = await d1Of(s.tenant_id);
    const size = async () => Number((await d1.prepare('SELECT 1').run()).meta.size_after);
    const before = await size();
    const n = 90; // within the principal's burst of 100 writes
    for (let i = 0; i < n; i++) {
      const r = await call('POST', '/v1/authorize', {
        key: s.agent.api_key,
        body: authorizeBody(s, runs[i % runs.length] as string, {
          tool_contract_sha256: s.read_contract_sha256,
          input: READ_INPUT,
        }),
      });
      expect(r.status).toBe(200);
    }
    const perAuthorization = ((await size()) - before) / n;
    console.info(`database growth: ${Math.round(perAuthorization)} bytes per authorization`);
    expect(before).toBeGreaterThan(0);
    expect(perAuthorization).toBeLessThanOrEqual(2050);
  });

  it('a column edit that changes the decoded receipt is refused on read (500), not served', async () => {
    const s = await seedTenant('bytes-tamper');
    const run = await createRun(s);
    const r = await call('POST', '/v1/authorize', {
      key: s.agent.api_key,
      body: authorizeBody(s, run, { tool_contract_sha256: s.read_contract_sha256, input: READ_INPUT }),
    });
    const sha = r.body.receipt.sha256 as string;
    // The compact encoding takes principal_id from its column: moving the receipt to another
    // principal must not produce a receipt that names them. (Receipts refuse updates, so the
    // tamper goes around the trigger the way an operator with raw access would.)
    const db = tenantD1(s);
    await db.batch([
      db.prepare('DROP TRIGGER receipts_no_update'),
      db
        .prepare('UPDATE receipts SET principal_id = ? WHERE tenant_id = ? AND sha256 = ?')
        .bind(s.admin.principal_id, s.tenant_id, sha),
      db.prepare(
        "CREATE TRIGGER `receipts_no_update` BEFORE UPDATE ON `receipts` BEGIN SELECT RAISE(ABORT, 'receipt_immutable'); END",
      ),
    ]);
    const got = await call('GET', `/v1/receipts/${sha}`, { key: s.admin.api_key });
    expect(got.status).toBe(500);
  });

  it('POST /v1/authorize (allow and deny) never touches R2', async () => {
    const s = await seedTenant('no-r2');
    const run = await createRun(s);
    // The decision path never uses the BLOBS bucket. (Each commit also kicks the tenant's log
    // sequencer through waitUntil; that Durable Object runs with its own env and writes log tiles
    // to the LOG_TILES bucket after the response, never to BLOBS: issue 11.)
    const touched: string[] = [];
    const e = { ...env, BLOBS: unreachableR2(touched) } as Env;
    const allow = await fetchWith(
      e,
      '/v1/authorize',
      s.agent.api_key,
      authorizeBody(s, run, { tool_contract_sha256: s.read_contract_sha256, input: READ_INPUT }),
    );
    expect(allow.status).toBe(200);
    // A rollback without its approval is a denial, receipted.
    const deny = await fetchWith(e, '/v1/authorize', s.agent.api_key, authorizeBody(s, run));
    expect(deny.status).toBe(403);
    expect(deny.body.receipt.body.decision).toBe('denied');
    expect(touched).toEqual([]);
  });
});

describe('observation evidence in R2', { timeout: SLOW_MS }, () => {
  it('keeps the payload-bearing evidence in R2 by digest; GET and a retry read it back', async () => {
    const s = await seedTenant('blob-obs');
    const e = await executed(s);
    const raw = rawOutput(s, e, BIG_OUTPUT);
    const first = await postObservation(s, raw);
    expect(first.status).toBe(201);
    const sha = first.body.receipt.sha256 as string;
    const stored = await row(s.tenant_id, sha);
    // D1 keeps the digest and the size; the text is in R2 under that digest.
    expect(stored?.evidence_bytes_in_row).toBeNull();
    expect(stored?.evidence_sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(stored?.evidence_bytes).toBeGreaterThan(BIG_OUTPUT.length);
    const object = await env.BLOBS.get(`sha256/${stored?.evidence_sha256}`);
    const bytes = new Uint8Array((await object?.arrayBuffer()) ?? new ArrayBuffer(0));
    expect(sha256Hex(bytes)).toBe(stored?.evidence_sha256);
    expect(bytes.byteLength).toBe(stored?.evidence_bytes);

    const got = await call('GET', `/v1/receipts/${sha}`, { key: s.admin.api_key });
    expect(got.status).toBe(200);
    expect(got.body.evidence.observation.payload).toBe(BIG_OUTPUT);
    // The same observation again replays the stored receipt from the evidence in R2.
    const again = await postObservation(s, raw);
    expect(again.status).toBe(200); // 200, not 201: a replay
    expect(again.body.receipt.sha256).toBe(sha);
  });

  it('refuses evidence whose R2 bytes do not hash to the digest D1 holds (500, typed error)', async () => {
    const s = await seedTenant('blob-tamper');
    const e = await executed(s);
    const first = await postObservation(s, rawOutput(s, e, BIG_OUTPUT));
    const sha = first.body.receipt.sha256 as string;
    const digest = (await row(s.tenant_id, sha))?.evidence_sha256 ?? '';
    // Someone with bucket access replaces the object (an unconditional put).
    await env.BLOBS.put(`sha256/${digest}`, '{"observation":"forged"}');
    await expect(r2BlobStore(env.BLOBS).get(digest)).rejects.toBeInstanceOf(BlobIntegrityError);
    const got = await call('GET', `/v1/receipts/${sha}`, { key: s.admin.api_key });
    expect(got.status).toBe(500);
    expect(JSON.stringify(got.body)).not.toContain('forged');
  });

  it('puts are create-only: an existing object is left as it was', async () => {
    const blobs = r2BlobStore(env.BLOBS);
    const bytes = new TextEncoder().encode(`{"n":"${uniqueName('blob')}"}`);
    const ref = await blobs.put(bytes, 'application/json');
    expect(ref).toEqual({ sha256: sha256Hex(bytes), bytes: bytes.byteLength });
    expect(await blobs.put(bytes, 'application/json')).toEqual(ref);
    expect(await blobs.get(ref.sha256)).toEqual(bytes);
    expect(await blobs.get('0'.repeat(64))).toBeNull();
  });

  it('a D1 write refused after the put leaves an orphan blob and no receipt', async () => {
    const s = await seedTenant('blob-orphan');
    const e = await executed(s);
    // Observations are refused at 90% of the bytes quota: the put to R2 happens, the insert does not.
    const used = await storedBytes(s.tenant_id);
    expect((await setQuotas(s.tenant_id, { max_stored_bytes: used + 2000 })).status).toBe(200);
    const raw = rawOutput(s, e, BIG_OUTPUT);
    const refused = await postObservation(s, raw);
    expect(refused.status).toBe(429);
    const n = await tenantD1(s)
      .prepare("SELECT count(*) AS n FROM receipts WHERE tenant_id = ? AND kind = 'observation'")
      .bind(s.tenant_id)
      .first<{ n: number }>();
    expect(n?.n).toBe(0);
    expect(await storedBytes(s.tenant_id)).toBe(used);
    // Once the quota allows it, the same observation stores and refers to the same (orphaned) blob.
    expect((await setQuotas(s.tenant_id, {})).status).toBe(200);
    const stored = await postObservation(s, raw);
    expect(stored.status).toBe(201);
  });
});

describe('retention: receipts past the window move to R2 archives', { timeout: SLOW_MS }, () => {
  it('archives, gives back stored bytes, and still serves and replays archived receipts', async () => {
    const s = await seedTenant('retention');
    const run = await createRun(s);
    const authorized: string[] = [];
    for (let k = 0; k < 3; k++) {
      const r = await call('POST', '/v1/authorize', {
        key: s.agent.api_key,
        body: authorizeBody(s, run, { tool_contract_sha256: s.read_contract_sha256, input: READ_INPUT }),
      });
      expect(r.status).toBe(200);
      authorized.push(r.body.receipt.sha256 as string);
    }
    const ex = await executed(s);
    const obs = await postObservation(s, rawOutput(s, ex, BIG_OUTPUT));
    expect(obs.status).toBe(201);
    const count = async () =>
      (
        await tenantD1(s)
          .prepare('SELECT count(*) AS n FROM receipts WHERE tenant_id = ?')
          .bind(s.tenant_id)
          .first<{ n: number }>()
      )?.n ?? -1;
    const before = await count();
    expect(before).toBeGreaterThanOrEqual(6); // 3 reads, rollback, execution, observation
    const bytesBefore = await storedBytes(s.tenant_id);
    // What the rows count against the quota (migrations/0002 and 0004).
    const counted = await tenantD1(s)
      .prepare(
        `SELECT sum(length(CAST(receipt AS BLOB)) + coalesce(length(CAST(evidence AS BLOB)), 0) + coalesce(evidence_bytes, 0) + 200) AS n
         FROM receipts WHERE tenant_id = ?`,
      )
      .bind(s.tenant_id)
      .first<{ n: number }>();

    // The window is a platform-admin setting; 0 days is not a window.
    expect((await setQuotas(s.tenant_id, { receipt_retention_days: 0 })).status).toBe(400);
    expect((await setQuotas(s.tenant_id, { receipt_retention_days: 1 })).status).toBe(200);
    // Inside the window nothing moves.
    await runRetention(env, Date.now());
    expect(await count()).toBe(before);
    // Two days on, every receipt of this tenant is past its one-day window (other tenants keep 90).
    const later = Date.now() + 2 * DAY_MS;
    const done = await runRetention(env, later);
    expect(done.receipts).toBeGreaterThanOrEqual(before);
    expect(await count()).toBe(0);
    // Each receipt gives back what it counted; its archive entry keeps 200 bytes.
    expect(await storedBytes(s.tenant_id)).toBe(bytesBefore - (counted?.n ?? 0) + 200 * before);

    // The manifest records each archive's digest; the R2 object hashes to it and is canonical lines.
    const manifests = await tenantD1(s)
      .prepare('SELECT archive_sha256, day, receipts, bytes FROM receipt_archives WHERE tenant_id = ?')
      .bind(s.tenant_id)
      .all<{ archive_sha256: string; day: number; receipts: number; bytes: number }>();
    expect(manifests.results.reduce((n, m) => n + m.receipts, 0)).toBe(before);
    for (const m of manifests.results) {
      const object = await env.BLOBS.get(`sha256/${m.archive_sha256}`);
      const bytes = new Uint8Array((await object?.arrayBuffer()) ?? new ArrayBuffer(0));
      expect(sha256Hex(bytes)).toBe(m.archive_sha256);
      expect(bytes.byteLength).toBe(m.bytes);
      const lines = new TextDecoder().decode(bytes).split('\n');
      expect(lines.pop()).toBe('');
      expect(lines).toHaveLength(m.receipts);
      for (const line of lines) {
        const parsed = JSON.parse(line) as Json;
        expect(canonicalize(parsed)).toBe(line);
        expect(parsed.tenant_id).toBe(s.tenant_id);
        expect(Math.floor(parsed.created_at_unix_ms / DAY_MS)).toBe(m.day);
      }
    }

    // Archived receipts are still served, with their evidence, and authorizations still replay.
    for (const sha of authorized) {
      const got = await call('GET', `/v1/receipts/${sha}`, { key: s.admin.api_key });
      expect(got.status).toBe(200);
      expect(got.body.receipt.sha256).toBe(sha);
      expect(got.body.replay).toEqual({ ok: true, differences: [] });
    }
    const o = await call('GET', `/v1/receipts/${obs.body.receipt.sha256}`, { key: s.admin.api_key });
    expect(o.status).toBe(200);
    expect(o.body.evidence.observation.payload).toBe(BIG_OUTPUT);
    // Another tenant still cannot read them.
    const other = await seedTenant('retention-other');
    const stranger = await call('GET', `/v1/receipts/${authorized[0]}`, { key: other.admin.api_key });
    expect(stranger.status).toBe(404);
    // A second run finds nothing more to do.
    expect((await runRetention(env, later)).receipts).toBe(0);
  });

  it('refuses to delete a receipt that was not archived, and archive records are append-only', async () => {
    const s = await seedTenant('retention-guard');
    const run = await createRun(s);
    const r = await call('POST', '/v1/authorize', {
      key: s.agent.api_key,
      body: authorizeBody(s, run, { tool_contract_sha256: s.read_contract_sha256, input: READ_INPUT }),
    });
    const sha = r.body.receipt.sha256 as string;
    const db = tenantD1(s);
    await expect(
      db.prepare('DELETE FROM receipts WHERE tenant_id = ?').bind(s.tenant_id).run(),
    ).rejects.toThrow(/receipt_immutable/);
    // An entry naming an archive with no manifest proves nothing, and is refused.
    await expect(
      db
        .prepare('INSERT INTO receipt_archive_entries (tenant_id, sha256, archive_sha256) VALUES (?, ?, ?)')
        .bind(s.tenant_id, sha, 'f'.repeat(64))
        .run(),
    ).rejects.toThrow(/receipt_archive_unknown/);
    expect(await row(s.tenant_id, sha)).not.toBeNull();

    expect((await setQuotas(s.tenant_id, { receipt_retention_days: 1 })).status).toBe(200);
    await runRetention(env, Date.now() + 2 * DAY_MS);
    expect(await row(s.tenant_id, sha)).toBeNull();
    await expect(
      db.prepare('DELETE FROM receipt_archive_entries WHERE tenant_id = ?').bind(s.tenant_id).run(),
    ).rejects.toThrow(/receipt_archive_immutable/);
    await expect(
      db.prepare('UPDATE receipt_archives SET receipts = 0 WHERE tenant_id = ?').bind(s.tenant_id).run(),
    ).rejects.toThrow(/receipt_archive_immutable/);
  });

  it('the scheduled handler of the Worker (wrangler.toml cron) runs the same archiving', async () => {
    const s = await seedTenant('retention-cron');
    const run = await createRun(s);
    const r = await call('POST', '/v1/authorize', {
      key: s.agent.api_key,
      body: authorizeBody(s, run, { tool_contract_sha256: s.read_contract_sha256, input: READ_INPUT }),
    });
    const sha = r.body.receipt.sha256 as string;
    expect((await setQuotas(s.tenant_id, { receipt_retention_days: 1 })).status).toBe(200);
    const ctx = createExecutionContext();
    await worker.scheduled(createScheduledController({ scheduledTime: Date.now() + 2 * DAY_MS }), env, ctx);
    await waitOnExecutionContext(ctx);
    expect(await row(s.tenant_id, sha)).toBeNull();
    const got = await call('GET', `/v1/receipts/${sha}`, { key: s.admin.api_key });
    expect(got.status).toBe(200);
    expect(got.body.replay).toEqual({ ok: true, differences: [] });
  });
});
