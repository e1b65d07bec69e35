/**
 * Signed receipts and bundles for the verification tests: a fixed key ring, the v2 rollback
 * receipt, and a fake log verifier that binds the leaf to a checkpoint-like digest.
 */
import { sha256Hex } from '../../../src/core/canonical/canonical.js';
import type { AuthorizationReceipt } from '../../../src/core/model.js';
import {
  generateKeyRing,
  type KeyRing,
  type KeyRingDocument,
  parseKeyRing,
  publicKeySet,
  trustedKeysOfRing,
} from '../../../src/core/receipts/keys.js';
import {
  signReceipt,
  type SignableReceipt,
  type SignatureEnvelope,
} from '../../../src/core/receipts/signing.js';
import { err, ok } from '../../../src/core/result.js';
import { type LogSection, type LogVerifier, logLeafOf } from '../../../src/verify/bundle.js';
import { authorizeToolCall } from '../../../src/core/authorization/authorize.js';
import { ed25519 } from '@noble/curves/ed25519.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { ed25519Signer, parseNote, serializeNote } from '../../../src/core/log/note.js';
import { proveInclusion, sequenceBatch } from '../../../src/core/log/sequencer.js';
import { EMPTY_LOG_STATE } from '../../../src/core/log/tiles.js';
import { logOrigin } from '../../../src/verify/log.js';
import { buildObservation, buildScenario, mustVerify, type Scenario, T } from '../core/fixtures.js';

export const ISSUER = 'writ.example';
export const SEED = new Uint8Array(32).fill(3);
export const OTHER_SEED = new Uint8Array(32).fill(4);
export const DISPATCH = { dispatch_window_ms: 60_000, executor_principal_id: null } as const;

export function ring(doc: KeyRingDocument = generateKeyRing(SEED, ISSUER, 0)): KeyRing {
  const r = parseKeyRing(JSON.stringify(doc));
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}

export const keys = (r: KeyRing = ring()) => trustedKeysOfRing(r);

export function sign(receipt: SignableReceipt, r: KeyRing = ring(), at: number = T.now): SignatureEnvelope {
  const s = signReceipt(r, receipt, at);
  if (!s.ok) throw new Error(s.error.message);
  return s.value;
}

export function authorizeV2(
  s: Scenario = buildScenario(),
  options: { dispatch_window_ms: number; executor_principal_id: string | null } = DISPATCH,
): AuthorizationReceipt {
  const r = authorizeToolCall(s.contract, s.grant, s.invocation, s.now, s.trusted, options);
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}

const FAKE_PROOF = 'fake-proof/v1';

/** A log section the fake verifier accepts for `envelope`. */
export function fakeLog(envelope: SignatureEnvelope): LogSection {
  return { proof: FAKE_PROOF, checkpoint: sha256Hex(logLeafOf(envelope)) };
}

/** Accepts exactly the log sections `fakeLog` makes: any changed leaf, proof or checkpoint fails. */
export const fakeLogVerifier: LogVerifier = (leaf, log, context) =>
  log.proof === FAKE_PROOF && log.checkpoint === sha256Hex(leaf)
    ? ok({ index: 7, tree_size: 8, origin: `${context.issuer}/${context.tenant_id}` })
    : err({ reason: 'inclusion_failed', message: 'leaf is not in the checkpoint' });

/** A complete, valid bundle for the v2 rollback authorization receipt. */
export function authorizationBundle(s: Scenario = buildScenario(), r: KeyRing = ring()) {
  const receipt = authorizeV2(s);
  const signature = sign(receipt, r);
  return {
    bundle_version: 1,
    receipt,
    signature,
    inputs: {
      kind: 'authorization',
      contract: s.contract,
      grant: s.grant,
      invocation: s.invocation,
      trusted_state: s.trusted,
      evaluated_at_unix_ms: s.now,
      dispatch: DISPATCH,
    },
    keys: publicKeySet(r, T.now),
    log: fakeLog(signature),
  };
}

/** A complete, valid bundle for the execution receipt of the baseline run (v2 authorization). */
export function executionBundle(r: KeyRing = ring()) {
  const s = buildScenario();
  const authorization = authorizeV2(s);
  const observation = buildObservation(s.contract, authorization);
  const receipt = mustVerify(s.contract, authorization, observation);
  const signature = sign(receipt, r, T.completedAt);
  return {
    bundle_version: 1,
    receipt,
    signature,
    inputs: { kind: 'execution', contract: s.contract, authorization, observation },
    keys: publicKeySet(r, T.completedAt),
    log: fakeLog(signature),
  };
}

/** A JSON round trip: what a verifier actually receives. */
export const wire = <V>(v: V): unknown => JSON.parse(JSON.stringify(v));

/**
 * A real log section (issue 11): a log of `before` other leaves, then this envelope's leaf, then
 * `after` more, sequenced by the core sequencer and signed with the ring's active key under the
 * tenant log's origin; the proof is against the final checkpoint.
 */
export function realLog(
  envelope: SignatureEnvelope,
  r: KeyRing = ring(),
  o: { before?: number; after?: number } = {},
): LogSection {
  const origin = logOrigin(r.issuer, envelope.tenant_id);
  const signer = ed25519Signer(origin, r.active.seed);
  if (!signer.ok) throw new Error(signer.error.message);
  const filler = (i: number) => new TextEncoder().encode(`filler ${i}`);
  const entries = [
    ...Array.from({ length: o.before ?? 3 }, (_, i) => filler(i)),
    logLeafOf(envelope),
    ...Array.from({ length: o.after ?? 2 }, (_, i) => filler(1000 + i)),
  ];
  const b = sequenceBatch(EMPTY_LOG_STATE, [], entries, origin, signer.value);
  if (!b.ok) throw new Error(b.error.message);
  const full = b.value.tiles.filter((t) => t.width === 256);
  const proof = proveInclusion(b.value.state, o.before ?? 3, b.value.checkpoint, (refs) =>
    full.filter((t) => refs.some((x) => x.level === t.level && x.index === t.index)),
  );
  if (!proof.ok) throw new Error(proof.error.message);
  return { proof: proof.value, checkpoint: b.value.checkpoint };
}

/** A witness of the tests: an Ed25519 seed and its C2SP cosignature/v1 vkey (Writ never cosigns). */
export function testWitness(name: string, fill: number) {
  const seed = new Uint8Array(32).fill(fill);
  const publicKey = ed25519.getPublicKey(seed);
  // key ID = SHA-256(name || 0x0A || 0x04 || key)[:4] (tlog-cosignature), computed here from the spec.
  const id = sha256(Uint8Array.from([...new TextEncoder().encode(name), 0x0a, 0x04, ...publicKey]));
  const keyId = new DataView(id.buffer, id.byteOffset).getUint32(0);
  const hex = keyId.toString(16).padStart(8, '0');
  const vkey = `${name}+${hex}+${btoa(String.fromCharCode(0x04, ...publicKey))}`;
  return { name, seed, publicKey, keyId, vkey };
}

/**
 * A cosignature line by `w` over the note's text at `timestamp` (C2SP tlog-cosignature:
 * Ed25519 over "cosignature/v1\ntime <t>\n" || text; the line carries key ID || u64 t || signature),
 * appended to the note. Written from the spec independently of the verifier's code paths.
 */
export function cosign(note: string, w: ReturnType<typeof testWitness>, timestamp: number | bigint): string {
  const parsed = parseNote(note);
  if (!parsed.ok) throw new Error(parsed.error.message);
  const text = parsed.value.text;
  const message = new TextEncoder().encode(`cosignature/v1\ntime ${timestamp}\n${text}`);
  const signature = ed25519.sign(message, w.seed);
  const t = new Uint8Array(8);
  new DataView(t.buffer).setBigUint64(0, BigInt(timestamp));
  const line = {
    name: w.name,
    keyId: w.keyId,
    signature: Uint8Array.from([...t, ...signature]),
  };
  const out = serializeNote({ text, signatures: [...parsed.value.signatures, line] });
  if (!out.ok) throw new Error(out.error.message);
  return out.value;
}

/** The log section with its checkpoint replaced (in the proof too, which embeds it verbatim). */
export function withCheckpoint(log: LogSection, checkpoint: string): LogSection {
  return { proof: log.proof.slice(0, log.proof.length - log.checkpoint.length) + checkpoint, checkpoint };
}
