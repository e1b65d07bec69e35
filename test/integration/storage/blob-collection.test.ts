/**
 * Orphan blob collection (src/services/blob-collection.ts, migrations/0011): objects of `BLOBS`
 * that no row of any shard refers to are deleted once older than the grace period; evidence of a
 * live or an archived receipt, and archives, are kept; nothing is deleted while an archive is
 * unread or missing; a put that re-uses an old object refreshes it.
 */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { canonicalize, sha256HexOfText } from '../../../src/core/canonical/canonical.js';
import { BLOB_GRACE_MS, r2BlobStore, r2BlobSweep } from '../../../src/db/blobs.js';
import { INLINE_EVIDENCE_MAX_BYTES } from '../../../src/db/tenant-store.js';
import { runBlobCollection, runRetention } from '../../../src/platform/bindings.js';
import { collectOrphanBlobs } from '../../../src/services/blob-collection.js';
import type { BlobRefIndex, BlobSweepPort } from '../../../src/services/ports.js';
import type { Seeded } from '../../../scripts/seed.js';
import { d1Of, setQuotas } from '../platform/harness.js';
import { call, seedTenant, uniqueName } from '../executions/helpers.js';
import { executed, postObservation, rawOutput } from './observation-helpers.js';

const SLOW_MS = 60_000;
const DAY_MS = 86_400_000;

const BIG_OUTPUT = canonicalize({
  status: 'rolled_back',
  notes: 'rolled back to the previous generation; '.repeat(Math.ceil((3 * INLINE_EVIDENCE_MAX_BYTES) / 40)),
});

/** A stored observation receipt whose evidence (above the in-row limit) lives in R2. */
async function evidenceInR2(s: Seeded): Promise<{ evidence: string; receipt: string }> {
  const e = await executed(s, 'succeeded', BIG_OUTPUT);
  const posted = await postObservation(s, rawOutput(s, e, BIG_OUTPUT));
  expect(posted.status).toBe(201);
  const row = await (
    await d1Of(s.tenant_id)
  )
    .prepare('SELECT evidence_sha256 FROM receipts WHERE tenant_id = ? AND sha256 = ?')
    .bind(s.tenant_id, posted.body.receipt.sha256)
    .first<{ evidence_sha256: string | null }>();
  expect(row?.evidence_sha256).toMatch(/^[0-9a-f]{64}$/);
  return { evidence: row?.evidence_sha256 as string, receipt: posted.body.receipt.sha256 as string };
}

const present = async (sha: string) => (await env.BLOBS.head(`sha256/${sha}`)) !== null;
const retired = async (sha: string) => (await env.BLOBS.head(`retired/sha256/${sha}`)) !== null;
const orphan = async (label: string) =>
  (
    await r2BlobStore(env.BLOBS).put(
      new TextEncoder().encode(`{"orphan":"${uniqueName(label)}"}`),
      'application/json',
    )
  ).sha256;

/** Runs until the walk over the bucket has come round once (the cursor is kept between runs). */
async function collectAll(now: number) {
  let deleted = 0;
  for (let i = 0; i < 20; i++) {
    const r = await runBlobCollection(env, now);
    deleted += r.deleted;
    if (r.waiting_for_index) continue;
    const cursor = await env.DB.prepare(
      'SELECT start_after, retired_after FROM blob_collection WHERE id = 0',
    ).first<{ start_after: string | null; retired_after: string | null }>();
    if (cursor?.start_after === null && cursor.retired_after === null) return deleted;
  }
  throw new Error('the collector did not come round');
}

describe('orphan blob collection', { timeout: SLOW_MS }, () => {
  it('deletes old unreferenced objects only; keeps young ones and live and archived evidence', async () => {
    const s = await seedTenant('gc');
    const { evidence, receipt } = await evidenceInR2(s);
    const lost = await orphan('lost');

    // Inside the grace period nothing goes, referenced or not.
    await collectAll(Date.now());
    expect(await present(lost)).toBe(true);

    // Past it: the orphan is retired, then (retired a grace period before this run's clock)
    // deleted; the live receipt's evidence stays.
    const later = Date.now() + 2 * BLOB_GRACE_MS;
    expect(await collectAll(later)).toBeGreaterThanOrEqual(1);
    expect(await present(lost)).toBe(false);
    expect(await retired(lost)).toBe(false);
    expect(await present(evidence)).toBe(true);

    // The race's last instant: the collector retired an object a row names (here, by hand).
    // The next run finds the row and puts it back, and a read in between puts it back too.
    await r2BlobSweep(env.BLOBS).retire(evidence);
    expect([await present(evidence), await retired(evidence)]).toEqual([false, true]);
    const r = await runBlobCollection(env, Date.now() + 3 * BLOB_GRACE_MS);
    expect(r.restored).toBe(1);
    expect([await present(evidence), await retired(evidence)]).toEqual([true, false]);
    await r2BlobSweep(env.BLOBS).retire(evidence);
    const viaRead = await call('GET', `/v1/receipts/${receipt}`, { key: s.admin.api_key });
    expect(viaRead.status).toBe(200);
    expect(viaRead.body.evidence.observation.payload).toBe(BIG_OUTPUT);
    expect(await present(evidence)).toBe(true);
    await r2BlobSweep(env.BLOBS).purge(evidence);

    // Retention moves the receipts to an archive: the evidence is now named only by a line of the
    // archive object, which the collector reads into its index before deleting anything.
    const quotas = await setQuotas(s.tenant_id, { receipt_retention_days: 1 });
    expect(quotas.status).toBe(200);
    expect((await runRetention(env, Date.now() + 2 * DAY_MS)).receipts).toBeGreaterThan(0);
    const d1 = await d1Of(s.tenant_id);
    const left = await d1
      .prepare('SELECT count(*) AS n FROM receipts WHERE tenant_id = ? AND evidence_sha256 = ?')
      .bind(s.tenant_id, evidence)
      .first<{ n: number }>();
    expect(left?.n).toBe(0);
    const archives = await d1
      .prepare('SELECT archive_sha256 FROM receipt_archives WHERE tenant_id = ?')
      .bind(s.tenant_id)
      .all<{ archive_sha256: string }>();
    expect(archives.results.length).toBeGreaterThan(0);

    await collectAll(Date.now() + 4 * BLOB_GRACE_MS);
    expect(await present(evidence)).toBe(true);
    for (const a of archives.results) expect(await present(a.archive_sha256)).toBe(true);
    const indexed = await d1
      .prepare('SELECT count(*) AS n FROM blob_archive_refs WHERE evidence_sha256 = ?')
      .bind(evidence)
      .first<{ n: number }>();
    expect(indexed?.n).toBe(1);
    // The archived receipt still reads back with its evidence.
    const got = await call('GET', `/v1/receipts/${receipt}`, { key: s.admin.api_key });
    expect(got.status).toBe(200);
    expect(got.body.evidence.observation.payload).toBe(BIG_OUTPUT);
  });

  it('deletes nothing while an archive named by a manifest is missing from R2, and says which', async () => {
    const kept = await orphan('kept');
    const missing = '7'.repeat(64);
    await env.DB.prepare('INSERT INTO blob_archives_unindexed (archive_sha256) VALUES (?)')
      .bind(missing)
      .run();
    const r = await runBlobCollection(env, Date.now() + 2 * BLOB_GRACE_MS);
    expect(r).toMatchObject({ waiting_for_index: true, missing_archives: [missing], retired: 0, deleted: 0 });
    expect(await present(kept)).toBe(true);
    // Still unread: every later run halts deletion again until the object is back.
    expect(
      await env.DB.prepare('SELECT count(*) AS n FROM blob_archives_unindexed WHERE archive_sha256 = ?')
        .bind(missing)
        .first<{ n: number }>(),
    ).toEqual({ n: 1 });
    await env.DB.prepare('DELETE FROM blob_archives_unindexed WHERE archive_sha256 = ?').bind(missing).run();
  });

  it('puts back and indexes an archive a manifest names that was retired as an orphan before', async () => {
    // An aborted import's manifest went, its archive was retired; the same file imported again
    // names it once more. The bytes are under retired/: not lost.
    const bytes = new TextEncoder().encode(
      `${canonicalize({ evidence_blob: null, sha256: uniqueName('line') })}\n`,
    );
    const archive = (await r2BlobStore(env.BLOBS).put(bytes, 'application/jsonl')).sha256;
    await r2BlobSweep(env.BLOBS).retire(archive);
    expect([await present(archive), await retired(archive)]).toEqual([false, true]);
    // The manifest (its trigger marks the archive unread).
    await env.DB.prepare(
      'INSERT INTO receipt_archives (tenant_id, archive_sha256, day, receipts, bytes, created_at_unix_ms) VALUES (?, ?, 0, 1, ?, 0)',
    )
      .bind(uniqueName('ten-reimported'), archive, bytes.byteLength)
      .run();
    const r = await runBlobCollection(env, Date.now() + 2 * BLOB_GRACE_MS);
    expect(r.missing_archives).toEqual([]);
    expect(r.archives_indexed).toBeGreaterThanOrEqual(1);
    expect([await present(archive), await retired(archive)]).toEqual([true, false]);
    expect(
      await env.DB.prepare('SELECT count(*) AS n FROM blob_archives_unindexed WHERE archive_sha256 = ?')
        .bind(archive)
        .first<{ n: number }>(),
    ).toEqual({ n: 0 });
  });
});

describe('the collector fails safe', () => {
  const now = 10 * BLOB_GRACE_MS;
  /** One old live object; `deleted` records what was retired or purged. */
  const sweep = (uploaded: number, deleted: string[]): BlobSweepPort => ({
    list: async () => ({ objects: [{ sha256: 'a'.repeat(64), uploaded_unix_ms: uploaded }], next: null }),
    listRetired: async () => ({ objects: [], next: null }),
    uploadedAt: async () => uploaded,
    read: async () => null,
    retire: async (sha) => {
      deleted.push(sha);
    },
    restore: async () => undefined,
    purge: async (sha) => {
      deleted.push(sha);
    },
  });
  const shard = (over: Partial<BlobRefIndex>): BlobRefIndex => ({
    unindexedArchives: async () => [],
    indexArchive: async () => undefined,
    referenced: async () => ({ referenced: new Set(), unindexed: false }),
    ...over,
  });
  const cursor = { get: async () => ({ live: null, retired: null }), set: async () => undefined };

  it('when an archive appears unread between indexing and the reference check', async () => {
    const deleted: string[] = [];
    const r = await collectOrphanBlobs(
      {
        shards: [shard({}), shard({ referenced: async () => ({ referenced: new Set(), unindexed: true }) })],
        cursor,
        bucket: sweep(0, deleted),
        grace_ms: BLOB_GRACE_MS,
      },
      now,
    );
    expect(r.waiting_for_index).toBe(true);
    expect(deleted).toEqual([]);
  });

  it('when a manifest names an archive R2 does not hold, still indexing every other archive', async () => {
    const deleted: string[] = [];
    const [lost, p0, p1] = ['c', 'd', 'e'].map((c) => c.repeat(64)) as [string, string, string];
    const indexed: string[] = [];
    const indexing = (pending: string[]) =>
      shard({
        unindexedArchives: async () => pending,
        indexArchive: async (a) => {
          indexed.push(a);
        },
      });
    const errors: unknown[] = [];
    const original = console.error;
    console.error = (line: unknown) => errors.push(line);
    let r;
    try {
      r = await collectOrphanBlobs(
        {
          // The lost archive comes first on shard 0; the others behind it, and on shard 1.
          shards: [indexing([lost, p0]), indexing([p1])],
          cursor,
          bucket: { ...sweep(0, deleted), read: async (sha) => (sha === lost ? null : new Uint8Array()) },
          grace_ms: BLOB_GRACE_MS,
        },
        now,
      );
    } finally {
      console.error = original;
    }
    // Its lines are unknown, and any unreferenced object could be evidence one of them names:
    // nothing is deleted anywhere. But the run answers, names it, and indexed the others.
    expect(r).toMatchObject({ waiting_for_index: true, missing_archives: [lost], archives_indexed: 2 });
    expect(indexed).toEqual([p0, p1]);
    expect(deleted).toEqual([]);
    expect(errors.map((e) => JSON.parse(String(e)) as unknown)).toEqual([
      expect.objectContaining({ level: 'error', shard: 0, archive_sha256: lost }),
    ]);
  });

  it('when any shard refers to the object, or it was refreshed after the listing', async () => {
    const deleted: string[] = [];
    const refd = shard({ referenced: async (x) => ({ referenced: new Set(x), unindexed: false }) });
    await collectOrphanBlobs(
      { shards: [shard({}), refd], cursor, bucket: sweep(0, deleted), grace_ms: BLOB_GRACE_MS },
      now,
    );
    expect(deleted).toEqual([]);
    // Listed as old, but a writer re-put it since: the second look sees it young.
    const refreshed: BlobSweepPort = { ...sweep(0, deleted), uploadedAt: async () => now - 1 };
    await collectOrphanBlobs(
      { shards: [shard({})], cursor, bucket: refreshed, grace_ms: BLOB_GRACE_MS },
      now,
    );
    expect(deleted).toEqual([]);
    // The control: old, unreferenced, not refreshed — deleted.
    await collectOrphanBlobs(
      { shards: [shard({})], cursor, bucket: sweep(0, deleted), grace_ms: BLOB_GRACE_MS },
      now,
    );
    expect(deleted).toEqual(['a'.repeat(64)]);
  });
});

describe('a retired object', () => {
  const now = 10 * BLOB_GRACE_MS;
  const cursor = { get: async () => ({ live: null, retired: null }), set: async () => undefined };
  const bucket = (retired_at: number, acted: string[]): BlobSweepPort => ({
    list: async () => ({ objects: [], next: null }),
    listRetired: async () => ({
      objects: [{ sha256: 'b'.repeat(64), uploaded_unix_ms: retired_at }],
      next: null,
    }),
    uploadedAt: async () => null,
    read: async () => null,
    retire: async () => undefined,
    restore: async (sha) => {
      acted.push(`restore ${sha.slice(0, 4)}`);
    },
    purge: async (sha) => {
      acted.push(`purge ${sha.slice(0, 4)}`);
    },
  });
  const shard = (named: boolean): BlobRefIndex => ({
    unindexedArchives: async () => [],
    indexArchive: async () => undefined,
    referenced: async (x) => ({ referenced: new Set(named ? x : []), unindexed: false }),
  });

  it('stays retired for the grace period, then is put back if a row names it, else deleted', async () => {
    const acted: string[] = [];
    const run = (retired_at: number, named: boolean) =>
      collectOrphanBlobs(
        {
          shards: [shard(false), shard(named)],
          cursor,
          bucket: bucket(retired_at, acted),
          grace_ms: BLOB_GRACE_MS,
        },
        now,
      );
    await run(now - 1, false);
    expect(acted).toEqual([]);
    await run(0, true);
    expect(acted).toEqual(['restore bbbb']);
    await run(0, false);
    expect(acted).toEqual(['restore bbbb', 'purge bbbb']);
  });
});

describe('a put that re-uses an object', () => {
  /** A bucket whose one object was uploaded at `uploaded`; records the puts. */
  function bucketAt(uploaded: number, puts: unknown[]): R2Bucket {
    return {
      head: async () => ({ uploaded: new Date(uploaded) }),
      put: async (_key: string, _bytes: unknown, options: unknown) => {
        puts.push(options);
        return null;
      },
    } as unknown as R2Bucket;
  }

  it('writes an object older than half the grace period again, and leaves a young one alone', async () => {
    const bytes = new TextEncoder().encode('{"same":"bytes"}');
    const young: unknown[] = [];
    await r2BlobStore(bucketAt(Date.now(), young)).put(bytes, 'application/json');
    expect(young).toEqual([]);
    const old: unknown[] = [];
    await r2BlobStore(bucketAt(Date.now() - BLOB_GRACE_MS, old)).put(bytes, 'application/json');
    expect(old).toHaveLength(1);
    // Same bytes, checked by R2 against the digest.
    expect(old[0]).toMatchObject({ sha256: sha256HexOfText('{"same":"bytes"}') });
  });
});
