/**
 * The transparency-log verifier for receipt bundles and checkpoints: proves a receipt's leaf (its
 * canonical signature envelope) is in its tenant's log, and that two checkpoints of a log are
 * consistent (docs/transparency-log.md). Runs offline, in Node, a browser or a Worker.
 *
 * Trust: the log of tenant T of issuer I has origin `I/log/T` and its checkpoints are signed by the
 * issuer's receipt keys under that name (src/platform/receipt-keys.ts). A checkpoint is accepted
 * only with a valid signature by one of the keys the caller trusts (pinned, or the bundle's own),
 * for exactly that origin: another tenant's or issuer's checkpoint never proves anything here.
 * Signatures by other keys are ignored. Witness cosignatures (C2SP tlog-cosignature) are required
 * only by a verifier built with `witnessedLogVerifier(policy)`: the caller's options decide, never
 * the bundle; with a policy, the checkpoint the proof was checked against must carry valid
 * cosignatures of at least `quorum` of the named witnesses.
 * Never: fetches anything, reads a clock, or accepts a proof whose checkpoint differs from the one
 * the bundle shows.
 */
import { verifyCosignatures, type WitnessPolicy } from '../core/log/cosignature.js';
import { ed25519Verifier, type NoteVerifier, verifierKey } from '../core/log/note.js';
import { decodeBase64 } from '../core/log/encoding.js';
import { parseTlogProof, verifyCheckpointConsistency, verifyTlogProof } from '../core/log/proof.js';
import type { TrustedKeys } from '../core/receipts/keys.js';
import { err, ok, type Result } from '../core/result.js';
import type { LogFailure, LogVerifier } from './bundle.js';

/** A tenant log's origin (checkpoint first line and log key name): `<issuer>/log/<tenant_id>`. */
export function logOrigin(issuer: string, tenant_id: string): string {
  return `${issuer}/log/${tenant_id}`;
}

/** Note verifiers for a log: every trusted key, under the log's origin as key name. */
export function logVerifiers(keys: TrustedKeys, origin: string): NoteVerifier[] {
  const out: NoteVerifier[] = [];
  for (const k of keys.keys.values()) {
    const v = ed25519Verifier(origin, k.public_key);
    if (v.ok) out.push(v.value);
  }
  return out;
}

/**
 * The C2SP signed-note verifier keys (`<origin>+<key ID>+<base64(0x01 || public key)>`, the
 * golang.org/x/mod/sumdb/note form witnesses and `note.NewVerifier` read) of a tenant's log: one
 * per key of the issuer's published set (`GET /.well-known/writ-keys`), by key id, with the time
 * the key stopped signing (`null`: it still signs). A checkpoint carries no time, so a note
 * verifier cannot tell when it was signed: a witness or monitor that checks **new** checkpoints
 * configures only the keys that still sign, for the origin `<issuer>/log/<tenant_id>`, and drops
 * a key once it is retired (a checkpoint signed before is already witnessed, and every later one
 * must be consistent with it); the retired ones stay listed to check checkpoints kept from before.
 */
export function logVerifierKeys(
  keys: TrustedKeys,
  tenant_id: string,
): { readonly key_id: string; readonly vkey: string; readonly signing_until_unix_ms: number | null }[] {
  const origin = logOrigin(keys.issuer, tenant_id);
  return [...keys.keys.values()].map((k) => ({
    key_id: k.key_id,
    vkey: verifierKey({ name: origin, publicKey: k.public_key }),
    signing_until_unix_ms: k.signing_until_unix_ms,
  }));
}

const failure = (reason: string, message: string): Result<never, LogFailure> => err({ reason, message });

/** The bundle log verifier (`writ verify`, `verifyBundle`). */
export const receiptLogVerifier: LogVerifier = (leaf, log, context) => {
  const origin = logOrigin(context.issuer, context.tenant_id);
  const parsed = parseTlogProof(log.proof);
  if (!parsed.ok) return failure(parsed.error.reason, `log: ${parsed.error.message}`);
  // The checkpoint shown beside the proof must be the one the proof is checked against.
  if (parsed.value.checkpoint !== log.checkpoint) {
    return failure('checkpoint_mismatch', 'log: the checkpoint differs from the proof’s');
  }
  const verifiers = logVerifiers(context.keys, origin);
  const proven = verifyTlogProof(log.proof, { data: leaf }, verifiers, origin);
  if (!proven.ok) return failure(proven.error.reason, `log: ${proven.error.message}`);
  return ok({ index: proven.value.index, tree_size: proven.value.checkpoint.size, origin });
};

/**
 * The receipt log verifier with a witness policy: after the inclusion proof and the log's own
 * signature verify, the same checkpoint must carry valid cosignatures of at least `policy.quorum`
 * of `policy.witnesses`. A cosignature by a configured witness that fails to verify fails the
 * bundle; cosignatures by other keys are ignored. Which witnesses cosigned is in the inclusion.
 */
export function witnessedLogVerifier(policy: WitnessPolicy): LogVerifier {
  return (leaf, log, context) => {
    const included = receiptLogVerifier(leaf, log, context);
    if (!included.ok) return included;
    // log.checkpoint is the checkpoint the proof was verified against (checked above).
    const c = verifyCosignatures(log.checkpoint, policy);
    if (!c.ok) {
      const who = c.error.cosigned.map((w) => JSON.stringify(w.name)).join(', ');
      return failure(
        c.error.reason,
        `log: witnesses: ${c.error.message}${who === '' ? '' : `; cosigned by ${who}`}`,
      );
    }
    return ok({ ...included.value, witnesses: c.value });
  };
}

/**
 * Check that `newer` extends `older` (two signed checkpoints of one tenant's log) with the base64
 * consistency proof `GET /v1/log/consistency` returns. A fork, a rewrite, a reorder or a dropped
 * entry fails.
 */
export function verifyLogConsistency(
  older: string,
  newer: string,
  proof: readonly string[],
  keys: TrustedKeys,
  tenant_id: string,
): Result<{ readonly from: number; readonly to: number }, LogFailure> {
  const hashes: Uint8Array[] = [];
  for (const line of proof) {
    const h = decodeBase64(line);
    if (h === undefined) return failure('malformed_proof', 'consistency proof hashes must be base64');
    hashes.push(h);
  }
  const origin = logOrigin(keys.issuer, tenant_id);
  const r = verifyCheckpointConsistency(older, newer, hashes, logVerifiers(keys, origin), origin);
  if (!r.ok) return failure(r.error.reason, r.error.message);
  return ok({ from: r.value.older.size, to: r.value.newer.size });
}
