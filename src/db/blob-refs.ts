/**
 * The D1 side of orphan blob collection (src/services/blob-collection.ts, migrations/0011): which
 * `BLOBS` objects a shard's rows refer to, the index of archived receipts' evidence, and the
 * collector's place in the bucket.
 *
 * Guarantees: `referenced` answers from one batch (one snapshot of the shard): the receipt
 * evidence column, the archive manifests, the archived-evidence index, and whether any archive is
 * still unindexed. An archive is marked indexed in the same batch that records its references.
 * Never: writes a tenant's rows, or deletes anything but its own index's pending marks.
 */
import { count, eq, inArray } from 'drizzle-orm';
import type { BlobCursorStore, BlobRefIndex } from '../services/ports.js';
import type { Db } from './client.js';
import {
  blobArchiveRefs,
  blobArchivesUnindexed,
  blobCollection,
  receiptArchives,
  receipts,
} from './schema.js';

/** Rows per insert statement: two bound values each, under D1's 100 per statement. */
const REFS_PER_STATEMENT = 40;

export function d1BlobRefs(db: Db): BlobRefIndex {
  return {
    async unindexedArchives(limit) {
      const rows = await db
        .select({ archive_sha256: blobArchivesUnindexed.archive_sha256 })
        .from(blobArchivesUnindexed)
        .limit(limit)
        .all();
      return rows.map((r) => r.archive_sha256);
    },

    async indexArchive(archive_sha256, evidence) {
      const unique = [...new Set(evidence)];
      const statements = [];
      for (let i = 0; i < unique.length; i += REFS_PER_STATEMENT) {
        statements.push(
          db
            .insert(blobArchiveRefs)
            .values(
              unique.slice(i, i + REFS_PER_STATEMENT).map((e) => ({ evidence_sha256: e, archive_sha256 })),
            )
            .onConflictDoNothing(),
        );
      }
      await db.batch([
        ...statements,
        db.delete(blobArchivesUnindexed).where(eq(blobArchivesUnindexed.archive_sha256, archive_sha256)),
      ] as unknown as Parameters<Db['batch']>[0]);
    },

    async referenced(sha256s) {
      const list = [...sha256s];
      if (list.length === 0) {
        const [pending] = await db.select({ n: count() }).from(blobArchivesUnindexed).all();
        return { referenced: new Set(), unindexed: (pending?.n ?? 0) > 0 };
      }
      const [inReceipts, inArchives, inArchived, pending] = await db.batch([
        db
          .selectDistinct({ sha256: receipts.evidence_sha256 })
          .from(receipts)
          .where(inArray(receipts.evidence_sha256, list)),
        db
          .selectDistinct({ sha256: receiptArchives.archive_sha256 })
          .from(receiptArchives)
          .where(inArray(receiptArchives.archive_sha256, list)),
        db
          .selectDistinct({ sha256: blobArchiveRefs.evidence_sha256 })
          .from(blobArchiveRefs)
          .where(inArray(blobArchiveRefs.evidence_sha256, list)),
        db.select({ n: count() }).from(blobArchivesUnindexed),
      ]);
      const referenced = new Set<string>();
      for (const r of [...inReceipts, ...inArchives, ...inArchived])
        if (r.sha256 !== null) referenced.add(r.sha256);
      return { referenced, unindexed: (pending[0]?.n ?? 0) > 0 };
    },
  };
}

export function d1BlobCursor(db: Db): BlobCursorStore {
  return {
    async get() {
      const row = await db.select().from(blobCollection).where(eq(blobCollection.id, 0)).get();
      return { live: row?.start_after ?? null, retired: row?.retired_after ?? null };
    },
    async set(walk, after, now) {
      const set =
        walk === 'live'
          ? { start_after: after, updated_at_unix_ms: now }
          : { retired_after: after, updated_at_unix_ms: now };
      await db
        .insert(blobCollection)
        .values({ id: 0, ...set })
        .onConflictDoUpdate({ target: blobCollection.id, set })
        .run();
    },
  };
}
