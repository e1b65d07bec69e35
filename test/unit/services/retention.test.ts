/**
 * Retention (src/services/retention.ts): one tenant whose archive cannot be committed must not
 * stop the run for the tenants after it (review 7: a receipt archived twice failed its tenant's
 * commit on every run, and the error ended every run before the later tenants and shards).
 */
import { describe, expect, it, vi } from 'vitest';
import { archiveExpiredReceipts } from '../../../src/services/retention.js';
import type { ArchiveManifest, BlobStore, RetentionStore } from '../../../src/services/ports.js';

function tenantStore(tenant_id: string, due: string[], fail: boolean) {
  const committed: ArchiveManifest[] = [];
  const store: RetentionStore = {
    tenant_id,
    expiredReceipts: () =>
      Promise.resolve(
        due.length === 0 ? null : { day: 1, sha256s: [...due], lines: due.map((sha256) => ({ sha256 })) },
      ),
    commitArchive: (m) => {
      if (fail) return Promise.reject(new Error('D1_ERROR: UNIQUE constraint failed'));
      committed.push(m);
      due.length = 0;
      return Promise.resolve();
    },
  };
  return { store, committed };
}

const blobs: BlobStore = {
  put: (bytes) => Promise.resolve({ sha256: 'f'.repeat(64), bytes: bytes.byteLength }),
  get: () => Promise.resolve(null),
};

describe('archiveExpiredReceipts', () => {
  it('archives the other tenants when one tenant fails, and reports the failure', async () => {
    const error = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    const bad = tenantStore('ten-a', ['a'.repeat(64)], true);
    const good = tenantStore('ten-b', ['b'.repeat(64)], false);
    const stores = new Map([
      ['ten-a', bad.store],
      ['ten-b', good.store],
    ]);
    const run = await archiveExpiredReceipts(
      {
        platform: {
          retentionWindows: (after) =>
            Promise.resolve(
              after === null
                ? [
                    { tenant_id: 'ten-a', receipt_retention_days: 1 },
                    { tenant_id: 'ten-b', receipt_retention_days: 1 },
                  ]
                : [],
            ),
        },
        tenant: (id) => stores.get(id) as RetentionStore,
        blobs,
      },
      10 * 86_400_000,
    );
    expect(good.committed).toHaveLength(1);
    expect(run).toMatchObject({ archives: 1, receipts: 1, failed: 1, more: false });
    expect(error).toHaveBeenCalledTimes(1);
    expect(String(error.mock.calls[0]?.[0])).toContain('ten-a');
    error.mockRestore();
  });
});
