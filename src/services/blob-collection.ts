/**
 * Orphan blob collection: objects of the `BLOBS` bucket (`sha256/<hex>`) that no D1 row of any
 * shard refers to any more are deleted by the cron, once they are older than a grace period.
 * Orphans arise when a write puts its evidence (or retention its archive) and the D1 batch that
 * would refer to it then fails or loses a race; they are harmless but cost storage.
 *
 * What refers to an object: a receipt's `evidence_sha256`, an archive manifest's
 * `archive_sha256`, or a line of an archive object (an archived receipt's evidence, indexed into
 * `blob_archive_refs` by reading each archive once). The collector first indexes unread archives
 * on every shard, and deletes nothing in a run that leaves one unread anywhere: an archive R2
 * does not hold (`missing_archives`) stays unread, and halts deletion everywhere until it is back,
 * without stopping the indexing of the others.
 *
 * The race, and how the grace period closes it: a writer puts an object, then commits a row that
 * names it. A collector that looked for references between the two would find none and delete an
 * object about to be referred to. So the collector never deletes an object written less than
 * `BLOB_GRACE_MS` (24 h) ago, and looks at references only after that: by then the writer's
 * request (its put and its commit) is long over, so its row is visible, or its commit failed and
 * the object is a true orphan. A writer that finds the object already there (content addressing:
 * a retry or the same bytes) and about to be referred to again would not write it, so an old
 * orphan could be revived under the collector's feet; the store's `put` therefore writes an object
 * found older than half the grace period again (same bytes), which makes it young, and the
 * collector looks at the upload time once more right before acting. R2 has no conditional
 * delete, so a writer could still refresh an old orphan in the instant between that look and the
 * collector's action; so the collector does not delete an orphan but retires it (moves it to
 * `retired/`), where a read of it (`r2BlobStore.get`) puts it back, and deletes a retired object
 * only after another grace period in which no row came to name it (else it puts it back).
 * Never: deletes an object younger than the grace period, or one retired less than the grace
 * period ago, a key that is not a digest, or anything while a shard has an unread archive.
 */
import type { BlobCursorStore, BlobRefIndex, BlobSweepPort } from './ports.js';

/** Objects listed per run: bounds list, head and delete subrequests. */
export const BLOBS_PER_RUN = 300;
/** Objects per list page and reference check (three IN lists of this many per shard). */
const PAGE = 30;
/** Archives read into the index per run and shard. */
export const ARCHIVES_INDEXED_PER_RUN = 20;

export interface BlobCollectionRun {
  readonly archives_indexed: number;
  /** Live objects looked at. */
  readonly listed: number;
  /** Old unreferenced objects moved aside this run. */
  readonly retired: number;
  /** Retired objects a row named after all, put back. */
  readonly restored: number;
  /** Retired objects deleted for good (retired a grace period ago, still unreferenced). */
  readonly deleted: number;
  /** True when unread archives remain: nothing was deleted (the next run continues indexing). */
  readonly waiting_for_index: boolean;
  /**
   * Archives a manifest names that R2 holds under neither key (lost, or an import's whose objects
   * were never copied into this bucket). Their lines are unknown, so while one is, nothing is
   * deleted (`waiting_for_index`); each is logged, and read again by every run until it is back.
   */
  readonly missing_archives: readonly string[];
}

/** The evidence objects an archive's lines name (src/db/receipts.ts `archiveLine`). */
export function archivedEvidence(text: string): string[] {
  const out: string[] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    // An archive was verified against its digest when read: a line that does not parse is a bug,
    // and the run fails rather than index less than the archive names.
    const v = JSON.parse(line) as { evidence_blob?: { sha256?: unknown } | null };
    const sha = v.evidence_blob?.sha256;
    if (typeof sha === 'string') out.push(sha);
  }
  return out;
}

/** Which of `sha256s` a row of any shard names, or `unindexed` when an archive is unread. */
async function referencedAnywhere(
  shards: readonly BlobRefIndex[],
  sha256s: readonly string[],
): Promise<ReadonlySet<string> | 'unindexed'> {
  const referenced = new Set<string>();
  for (const shard of shards) {
    const r = await shard.referenced(sha256s);
    if (r.unindexed) return 'unindexed';
    for (const sha of r.referenced) referenced.add(sha);
  }
  return referenced;
}

export async function collectOrphanBlobs(
  deps: {
    readonly shards: readonly BlobRefIndex[];
    readonly cursor: BlobCursorStore;
    readonly bucket: BlobSweepPort;
    readonly grace_ms: number;
  },
  now: number,
  budget = BLOBS_PER_RUN,
): Promise<BlobCollectionRun> {
  const run = {
    archives_indexed: 0,
    listed: 0,
    retired: 0,
    restored: 0,
    deleted: 0,
    waiting_for_index: false,
    missing_archives: [] as readonly string[],
  };
  const missing: string[] = [];
  let unread = false;
  for (const [n, shard] of deps.shards.entries()) {
    const pending = await shard.unindexedArchives(ARCHIVES_INDEXED_PER_RUN + 1);
    for (const archive of pending.slice(0, ARCHIVES_INDEXED_PER_RUN)) {
      let bytes = await deps.bucket.read(archive);
      if (bytes === null) {
        // Retired as an orphan before a manifest named it again (an aborted import's archive,
        // imported once more): a row names it now, so it goes back, as a read through a row does.
        await deps.bucket.restore(archive);
        bytes = await deps.bucket.read(archive);
      }
      if (bytes === null) {
        // Lost evidence, not an orphan question. Which objects its lines name is unknowable, and
        // in a content-addressed bucket shared by every shard any unreferenced object could be
        // one of them: nothing is deleted anywhere while it stays unread (its mark is kept). The
        // other archives are still indexed, and the run answers which one is missing.
        missing.push(archive);
        console.error(
          JSON.stringify({
            level: 'error',
            what: 'a receipt archive a manifest names is missing from R2; no blob is deleted until it is back',
            shard: n,
            archive_sha256: archive,
          }),
        );
        continue;
      }
      await shard.indexArchive(archive, archivedEvidence(new TextDecoder().decode(bytes)));
      run.archives_indexed++;
    }
    if (pending.length > ARCHIVES_INDEXED_PER_RUN) unread = true;
  }
  if (unread || missing.length > 0) return { ...run, waiting_for_index: true, missing_archives: missing };

  const cutoff = now - deps.grace_ms;
  const cursor = await deps.cursor.get();

  // Live objects: an old one no row names is retired (moved aside, still recoverable).
  let start = cursor.live;
  while (run.listed < budget) {
    const page = await deps.bucket.list(start, Math.min(PAGE, budget - run.listed));
    run.listed += page.objects.length;
    const old = page.objects.filter((o) => o.uploaded_unix_ms < cutoff).map((o) => o.sha256);
    if (old.length > 0) {
      const referenced = await referencedAnywhere(deps.shards, old);
      // An archive committed since the indexing above: its lines are unknown, touch nothing.
      if (referenced === 'unindexed') return { ...run, waiting_for_index: true };
      for (const sha of old) {
        if (referenced.has(sha)) continue;
        // Look again right before: a writer may have refreshed it since the listing.
        const uploaded = await deps.bucket.uploadedAt(sha);
        if (uploaded === null || uploaded >= cutoff) continue;
        await deps.bucket.retire(sha);
        run.retired++;
      }
    }
    start = page.next;
    await deps.cursor.set('live', start, now);
    if (start === null) break;
  }

  // Retired objects: after a further grace period, put back if a row names one now (a writer
  // re-used it in the instant between the check above and its retirement), else deleted.
  let after = cursor.retired;
  for (let seen = 0; seen < budget;) {
    const page = await deps.bucket.listRetired(after, Math.min(PAGE, budget - seen));
    seen += page.objects.length;
    const due = page.objects.filter((o) => o.uploaded_unix_ms < cutoff).map((o) => o.sha256);
    if (due.length > 0) {
      const referenced = await referencedAnywhere(deps.shards, due);
      if (referenced === 'unindexed') return { ...run, waiting_for_index: true };
      for (const sha of due) {
        if (referenced.has(sha)) {
          await deps.bucket.restore(sha);
          run.restored++;
        } else {
          await deps.bucket.purge(sha);
          run.deleted++;
        }
      }
    }
    after = page.next;
    await deps.cursor.set('retired', after, now);
    if (after === null) break;
  }
  return run;
}
