/**
 * The transparency log's leaf and node hashes with workerd's native SHA-256 (`node:crypto` under
 * nodejs_compat), installed by src/worker.ts through the core's `useMerkleSha256`, which refuses
 * it unless it reproduces the known answers. Synchronous, like the portable one it replaces: the
 * sequencer's pure steps stay synchronous.
 */
import { createHash } from 'node:crypto';
import type { MerkleSha256 } from '../core/log/merkle.js';

export const nativeMerkleSha256: MerkleSha256 = (parts) => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  // A copy: the core keeps hashes as plain Uint8Arrays, never views of a runtime buffer.
  return new Uint8Array(h.digest());
};
