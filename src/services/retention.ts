/**
 * Retention: receipts older than their tenant's window (`tenant_quotas.receipt_retention_days`)
 * leave D1 for R2 archives. Run by the Worker's `scheduled` handler (wrangler.toml `[triggers]`)
 * and called directly by the tests.
 *
 * Guarantees: an archive is canonical JSON lines (one receipt row per line, one tenant, one UTC
 * day, oldest first) stored create-only in R2 under its SHA-256; its manifest (digest, day, count,
 * size) and an entry per receipt are written in the same D1 batch as the deletion, and the
 * `receipts_no_delete` trigger lets a row go only when its entry is there. The put comes first:
 * if the batch then fails, the archive is an orphan object (harmless: nothing refers to it, and
 * the next run writes the same bytes under the same key) and every receipt is still in D1.
 * `GET /v1/receipts/{sha256}` and replay read archived receipts through the entries.
 * A tenant whose archiving fails (a D1 or R2 error, a row that cannot be archived) is logged,
 * counted in `failed` and skipped for this run, with nothing of its failed batch written: it
 * never stops the run for the tenants after it (nor, in `runRetention`, for the later shards).
 * Never: deletes a receipt it has not archived, or one younger than the window.
 */
import { canonicalize } from '../core/canonical/canonical.js';
import type { BlobStore, RetentionDirectory, RetentionStore } from './ports.js';

/** Receipts per archive object: bounds a run's memory (~2 KB a line) and one batch's work. */
export const ARCHIVE_MAX_RECEIPTS = 500;

/** Archive objects written per run and shard: bounds subrequests (3 per archive) and CPU time. */
export const ARCHIVES_PER_RUN = 50;

const TENANT_PAGE = 100;
const DAY_MS = 86_400_000;

export interface RetentionRun {
  readonly archives: number;
  readonly receipts: number;
  readonly bytes: number;
  /** True when the run stopped at its budget with receipts still due (the next run continues). */
  readonly more: boolean;
  /** Tenants (or, from `runRetention`, shards) whose archiving failed this run and was skipped. */
  readonly failed: number;
}

/**
 * Archive every receipt due at `now` on one shard, within `budget` archive objects. Tenants are
 * visited in id order and each tenant's oldest day first, so repeated runs make steady progress.
 */
export async function archiveExpiredReceipts(
  deps: {
    readonly platform: RetentionDirectory;
    readonly tenant: (tenant_id: string) => RetentionStore;
    readonly blobs: BlobStore;
  },
  now: number,
  budget = ARCHIVES_PER_RUN,
): Promise<RetentionRun> {
  let archives = 0;
  let receipts = 0;
  let bytes = 0;
  let failed = 0;
  let after: string | null = null;
  for (;;) {
    const page = await deps.platform.retentionWindows(after, TENANT_PAGE);
    for (const w of page) {
      const store = deps.tenant(w.tenant_id);
      const before = now - w.receipt_retention_days * DAY_MS;
      try {
        for (;;) {
          if (archives >= budget) return { archives, receipts, bytes, more: true, failed };
          const due = await store.expiredReceipts(before, ARCHIVE_MAX_RECEIPTS);
          if (due === null || due.sha256s.length === 0) break;
          const text = due.lines.map((l) => `${canonicalize(l)}\n`).join('');
          const ref = await deps.blobs.put(new TextEncoder().encode(text), 'application/jsonl');
          await store.commitArchive(
            { archive_sha256: ref.sha256, day: due.day, bytes: ref.bytes, sha256s: due.sha256s },
            now,
          );
          archives++;
          receipts += due.sha256s.length;
          bytes += ref.bytes;
        }
      } catch (e) {
        // The failed batch wrote nothing (an uncommitted archive is an orphan object); this
        // tenant is tried again next run, and the tenants after it are not held up.
        failed++;
        console.error(
          JSON.stringify({
            level: 'error',
            what: 'retention failed for a tenant; skipped until the next run',
            tenant_id: w.tenant_id,
            error: e instanceof Error ? e.name : 'unknown',
          }),
        );
      }
    }
    const last = page.at(-1);
    if (page.length < TENANT_PAGE || last === undefined) break;
    after = last.tenant_id;
  }
  return { archives, receipts, bytes, more: false, failed };
}
