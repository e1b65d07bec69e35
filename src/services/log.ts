/**
 * Issue 11, the read side of signed receipts and the tenant's transparency log: the published
 * keys, the latest checkpoint, tiles, a receipt's inclusion proof, consistency proofs, and the
 * offline bundle `writ verify` checks (formats: docs/receipts.md, docs/transparency-log.md).
 *
 * Also the opt-in public read path: a tenant admin publishes the log, after which its checkpoint,
 * tiles and entry bundles are served at `/log/<tenant_id>/...` without a key.
 *
 * Guarantees: every authenticated answer is about the caller's own tenant (its store, its log
 * object); the public path serves only the objects of a log its tenant published, and answers one
 * 404 for everything else; a proof is asked of the log only for a receipt the tenant's store
 * holds; a receipt not yet logged is drained into the log on demand before the proof is refused
 * (`log_pending`, 503). Never: signs anything (signing happens where receipts are written), or
 * reads another tenant's log.
 */
import { z } from 'zod';
import { decodeJsonText } from '../core/canonical/json.js';
import { ReconciliationReceipt } from '../core/execution/reconciliation.js';
import { ExecutionReceipt } from '../core/model.js';
import { type PublicKeySet, parsePublicKeySet } from '../core/receipts/keys.js';
import { SignatureEnvelope } from '../core/receipts/signing.js';
import { Sha256 } from '../core/schema.js';
import { parsePublicLogPath } from '../core/log/public-path.js';
import { parseTilePath } from '../core/log/tiles.js';
import { MAX_LOG_WITNESSES, MAX_WITNESS_URL_LENGTH, parseLogWitnesses } from '../core/log/witness.js';
import { BUNDLE_VERSION, BundleInputs, type ReceiptBundle } from '../verify/bundle.js';
import { logOrigin, logVerifierKeys } from '../verify/log.js';
import { ROLES_FOR, type TenantContext, requireRole } from './context.js';
import { notFound, ServiceError } from './errors.js';
import type {
  KeysPort,
  PublicLogObject,
  PublicLogPort,
  ReceiptLogPort,
  StoredReceipt,
  TenantStore,
} from './ports.js';
import { authorizationInputs } from './receipts.js';

/** Seconds a client should wait before asking again for a receipt the log has not taken yet. */
export const LOG_RETRY_AFTER_SECONDS = 2;
/** The widest consistency request answered: sizes are tree sizes, at most 2^53 - 1. */
const SIZE = /^(0|[1-9][0-9]{0,15})$/;

/** `GET /.well-known/writ-keys`: public, holds no tenant data. */
export function publishedKeySet(keys: KeysPort, now: number): PublicKeySet {
  return keys.publicKeys(now);
}

export async function logCheckpoint(_ctx: TenantContext, log: ReceiptLogPort) {
  return log.checkpoint();
}

/** A tile or entry bundle of the tenant's log, by its C2SP path (below `tile/`). */
export async function logTile(_ctx: TenantContext, log: ReceiptLogPort, path: string): Promise<Uint8Array> {
  // One spelling per tile: anything parseTilePath refuses is not a tile of any log.
  const parsed = parseTilePath(path);
  if (!parsed.ok) throw notFound('tile');
  const bytes = await log.object(path);
  if (bytes === null) throw notFound('tile');
  return bytes;
}

// ---------------------------------------------------------------------------------------------
// The public read path (docs/transparency-log.md, "Public logs")

/** `PUT /v1/log/publication`. */
export const SetPublicationRequest = z.strictObject({ published: z.boolean() });
export type SetPublicationRequest = z.infer<typeof SetPublicationRequest>;

/** `GET /v1/log/publication`: whether the log is public, where, and the keys a witness configures. */
export async function logPublication(ctx: TenantContext, log: ReceiptLogPort, keys: KeysPort) {
  const where = publicationKeys(ctx, keys);
  const state = await log.publication();
  return { published: state.published, ...where, events: state.events };
}

/**
 * `PUT /v1/log/publication` (tenant admin): publish or unpublish the tenant's log. Idempotent; a
 * change is recorded in the sequencer with who made it and when (the audit record `GET` shows),
 * and in the request's log line.
 */
export async function setLogPublication(
  ctx: TenantContext,
  log: ReceiptLogPort,
  keys: KeysPort,
  body: SetPublicationRequest,
) {
  requireRole(ctx.caller, ROLES_FOR.admin);
  // Before any change (503 without a key ring): a published log whose keys cannot be told to
  // witnesses would be unverifiable.
  const where = publicationKeys(ctx, keys);
  const r = await log.setPublication(body.published, ctx.caller.principal_id, ctx.now);
  ctx.log({ log_published: r.state.published, log_publication_changed: r.changed });
  return { changed: r.changed, published: r.state.published, ...where, events: r.state.events };
}

// ---------------------------------------------------------------------------------------------
// Witnesses (C2SP tlog-witness; docs/transparency-log.md, "Witnesses")

/** `PUT /v1/log/witnesses`: the whole list, replacing the one configured (empty: none). */
export const SetWitnessesRequest = z.strictObject({
  witnesses: z
    .array(
      z.strictObject({
        vkey: z.string().max(1024).describe('the witness’s C2SP cosignature/v1 verifier key'),
        url: z.string().max(MAX_WITNESS_URL_LENGTH).describe('its tlog-witness submission prefix (https)'),
      }),
    )
    // The rule (and its typed message) is parseLogWitnesses'; this only bounds the parse.
    .max(64)
    .describe(`at most ${MAX_LOG_WITNESSES}`),
});
export type SetWitnessesRequest = z.infer<typeof SetWitnessesRequest>;

/** `GET /v1/log/witnesses`: the log's witnesses and what each has cosigned. */
export async function logWitnesses(_ctx: TenantContext, log: ReceiptLogPort) {
  return log.witnesses();
}

/**
 * `PUT /v1/log/witnesses` (tenant admin): validate the list strictly (parseLogWitnesses: each vkey
 * a cosignature/v1 key, each URL https, plain http only to loopback when `allowLoopbackHttp`, no
 * duplicates, at most MAX_LOG_WITNESSES), then hand it to the tenant's sequencer, which keeps it.
 * A refused list changes nothing.
 */
export async function setLogWitnesses(
  ctx: TenantContext,
  log: ReceiptLogPort,
  body: SetWitnessesRequest,
  allowLoopbackHttp: boolean,
) {
  requireRole(ctx.caller, ROLES_FOR.admin);
  const parsed = parseLogWitnesses(body.witnesses, { allowLoopbackHttp });
  if (!parsed.ok) {
    const e = parsed.error;
    const at =
      e.index === undefined
        ? 'witnesses'
        : `witnesses.${e.index}.${e.reason === 'invalid_witness_url' ? 'url' : 'vkey'}`;
    throw new ServiceError('invalid_request', e.message, [{ path: at, message: e.reason }]);
  }
  const state = await log.setWitnesses(body.witnesses, allowLoopbackHttp, ctx.caller.principal_id, ctx.now);
  ctx.log({ log_witnesses: state.witnesses.length });
  return state;
}

/** The log's origin, its public prefix on this host, and its note verifier keys. */
function publicationKeys(ctx: TenantContext, keys: KeysPort) {
  const set = parsePublicKeySet(keys.publicKeys(ctx.now));
  if (!set.ok) throw new Error(`published key set does not parse: ${set.error.reason}`);
  const tenant_id = ctx.caller.tenant_id;
  return {
    origin: logOrigin(set.value.issuer, tenant_id),
    prefix_path: `/log/${tenant_id}/`,
    verifier_keys: logVerifierKeys(set.value, tenant_id),
  };
}

/** The one answer for anything the public path does not serve: no hint whether a tenant exists. */
const noSuchLogResource = () => new ServiceError('not_found', 'no such log resource');

/**
 * A resource of a published log, by the request's raw path (`/log/<tenant_id>/checkpoint`,
 * `/log/<tenant_id>/tile/...`). Unauthenticated. The path is parsed before any storage is read; a
 * malformed path, a tenant that does not exist or has not published, and a missing tile are the
 * same 404. `withBody: false` (HEAD) reads the object's size only.
 */
export async function publicLogResource(
  port: PublicLogPort,
  pathname: string,
  withBody: boolean,
): Promise<{ readonly kind: 'checkpoint' | 'tile'; readonly object: PublicLogObject }> {
  const r = parsePublicLogPath(pathname);
  if (r === null) throw noSuchLogResource();
  // Opt-in: without the tenant's marker nothing of its log is served, whatever the bucket holds.
  if (!(await port.published(r.tenant_id))) throw noSuchLogResource();
  const object = await port.read(r.tenant_id, r.kind === 'checkpoint' ? 'checkpoint' : r.path, withBody);
  if (object === null) throw noSuchLogResource();
  return { kind: r.kind, object };
}

/** The receipt's inclusion proof (C2SP tlog-proof, checkpoint included). */
export async function receiptProof(ctx: TenantContext, log: ReceiptLogPort, sha: string) {
  const stored = await storedReceipt(ctx.store, sha);
  const answer = await included(log, stored.sha256);
  ctx.log({ receipt_sha256: stored.sha256, log_index: answer.index });
  return { receipt_sha256: stored.sha256, index: answer.index, tree_size: answer.size, proof: answer.proof };
}

/** `from`/`to` as the query gave them: decimal tree sizes. */
export async function logConsistency(
  _ctx: TenantContext,
  log: ReceiptLogPort,
  from: string | undefined,
  to: string | undefined,
) {
  if (from === undefined || to === undefined || !SIZE.test(from) || !SIZE.test(to)) {
    throw new ServiceError('invalid_request', 'from and to must be decimal tree sizes', [
      { path: from === undefined || !SIZE.test(from) ? 'from' : 'to', message: 'must be a tree size' },
    ]);
  }
  const a = Number(from);
  const b = Number(to);
  const p = await log.consistency(a, b);
  if (!p.ok) {
    if (p.reason === 'out_of_range') {
      throw new ServiceError('invalid_request', 'sizes must satisfy 0 <= from <= to <= tree size', [
        { path: 'to', message: 'must not exceed the tree size' },
      ]);
    }
    throw new Error(`consistency proof: ${p.message}`);
  }
  return { from: a, to: b, tree_size: p.size, proof: p.proof };
}

/** The offline bundle of a receipt (docs/receipts.md, "Offline bundles"). */
export async function receiptBundle(
  ctx: TenantContext,
  log: ReceiptLogPort,
  keys: KeysPort,
  sha: string,
): Promise<ReceiptBundle> {
  const stored = await storedReceipt(ctx.store, sha);
  const [signatureRow, inputs] = await Promise.all([
    ctx.store.receiptSignature(stored.sha256),
    bundleInputs(ctx.store, stored),
  ]);
  // Receipts written before signing existed have no envelope: no bundle can vouch for them.
  if (signatureRow === null) throw new ServiceError('bundle_unavailable', 'the receipt has no signature');
  const envelope = SignatureEnvelope.safeParse(decoded(signatureRow.envelope));
  if (!envelope.success) throw new Error('stored signature envelope does not parse');
  const proof = await included(log, stored.sha256);
  const cp = proof.proof.slice(proof.proof.indexOf('\n\n') + 2);
  ctx.log({ receipt_sha256: stored.sha256, log_index: proof.index });
  return {
    bundle_version: BUNDLE_VERSION,
    receipt: stored.receipt,
    signature: envelope.data,
    inputs,
    keys: keys.publicKeys(ctx.now),
    log: { proof: proof.proof, checkpoint: cp },
  };
}

// ---------------------------------------------------------------------------------------------

async function storedReceipt(store: TenantStore, sha: string): Promise<StoredReceipt> {
  if (!Sha256.safeParse(sha).success) throw notFound('receipt');
  const stored = await store.getReceipt(sha);
  if (stored === null) throw notFound('receipt');
  return stored;
}

/**
 * The receipt's proof; if the log has not taken it yet, drain now and ask again. The bound on the
 * delay is therefore the request itself, whatever happened to the commit's kick.
 */
async function included(log: ReceiptLogPort, sha256: string) {
  let answer = await log.inclusion(sha256);
  if (answer.status === 'not_logged') {
    await log.drain();
    answer = await log.inclusion(sha256);
  }
  if (answer.status === 'not_logged') {
    throw new ServiceError(
      'log_pending',
      'the receipt is not in the log yet; retry',
      [],
      LOG_RETRY_AFTER_SECONDS,
    );
  }
  return answer;
}

function decoded(text: string): unknown {
  const d = decodeJsonText(text, { maxBytes: 64 * 1024, maxDepth: 8 });
  if (!d.ok) throw new Error('stored json does not parse');
  return d.value;
}

function unavailable(why: string): ServiceError {
  return new ServiceError('bundle_unavailable', why);
}

/** What the bundle's verifier recomputes the receipt from, by kind (docs/receipts.md). */
async function bundleInputs(store: TenantStore, stored: StoredReceipt): Promise<BundleInputs> {
  const body = stored.receipt.body;
  switch (stored.kind) {
    case 'authorization': {
      const r = await authorizationInputs(store, stored);
      if (!r.ok) throw unavailable(`the receipt's inputs are gone: ${r.differences.join(', ')}`);
      const i = r.inputs;
      const o = i.options;
      return {
        kind: 'authorization',
        contract: i.contract,
        grant: i.grant,
        invocation: i.invocation,
        trusted_state: i.trusted,
        evaluated_at_unix_ms: i.now,
        dispatch:
          o === undefined
            ? null
            : {
                dispatch_window_ms: o.dispatch_window_ms,
                executor_principal_id: o.executor_principal_id,
                ...(o.named === undefined ? {} : { named: o.named }),
              },
      };
    }
    case 'execution': {
      const r = ExecutionReceipt.safeParse(stored.receipt);
      if (!r.success) throw unavailable('the execution receipt does not parse');
      const [authorization, contract] = await Promise.all([
        store.getReceipt(r.data.body.authorization_receipt_sha256),
        store.getContract(r.data.body.tool_contract_sha256),
      ]);
      return checked({
        kind: 'execution',
        contract: contract?.contract,
        authorization: authorization?.receipt,
        observation: field(stored.evidence, 'observation'),
      });
    }
    case 'observation':
    case 'error_observation': {
      const e = stored.evidence;
      // A refused observation keeps no payload, only its digest, size and findings (`withheld`):
      // the bundle carries those, and the verifier replays them with the core's withheld replay.
      const withheld = field(e, 'withheld');
      const execution = await maybeReceipt(store, body.execution_receipt_sha256);
      const authorization = await maybeReceipt(store, execution?.receipt.body.authorization_receipt_sha256);
      const contractSha = authorization?.receipt.body.tool_contract_sha256;
      const contract = typeof contractSha === 'string' ? await store.getContract(contractSha) : null;
      return checked({
        kind: stored.kind,
        validation: {
          trusted: field(e, 'trusted'),
          policy: field(e, 'policy'),
          contract: contract?.contract,
          authorization: authorization?.receipt,
          execution: {
            receipt: execution?.receipt,
            observation: field(execution?.evidence ?? null, 'observation'),
          },
          now: field(e, 'evaluated_at_unix_ms'),
          observation: field(e, 'observation'),
          ...(withheld === undefined ? {} : { withheld }),
        },
      });
    }
    case 'reconciliation': {
      // The clock skew allowed at reconciliation is the tenant policy's of that moment (not the
      // policy the authorization binds, nor one the receipt names), so it is not derivable from
      // the receipt: the operation's object keeps it in the evidence since it was needed here.
      const e = stored.evidence;
      const skew = field(e, 'max_clock_skew_ms');
      if (skew === undefined) {
        throw unavailable(
          'this reconciliation receipt predates stored clock skew: the skew its policy allowed is not kept, so it cannot be recomputed offline',
        );
      }
      const r = ReconciliationReceipt.safeParse(stored.receipt);
      if (!r.success) throw unavailable('the reconciliation receipt does not parse');
      const rb = r.data.body;
      const [authorization, contract, original] = await Promise.all([
        store.getReceipt(rb.authorization_receipt_sha256),
        store.getContract(rb.tool_contract_sha256),
        rb.original_execution_receipt_sha256 === null
          ? Promise.resolve(null)
          : store.getReceipt(rb.original_execution_receipt_sha256),
      ]);
      if (rb.original_execution_receipt_sha256 !== null && original === null) {
        throw unavailable('the execution receipt the reconciliation resolves is gone');
      }
      return checked({
        kind: 'reconciliation',
        contract: contract?.contract,
        authorization: authorization?.receipt,
        original: original?.receipt ?? null,
        observation: field(e, 'observation'),
        max_clock_skew_ms: skew,
        operation_id: rb.operation_id,
        reconciled_by: rb.reconciled_by,
        reconciled_at_unix_ms: rb.reconciled_at_unix_ms,
      });
    }
    default:
      throw unavailable(`no offline bundle for ${stored.kind} receipts`);
  }
}

function field(value: unknown, key: string): unknown {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
    ? (value as Record<string, unknown>)[key]
    : undefined;
}

async function maybeReceipt(store: TenantStore, sha: unknown): Promise<StoredReceipt | null> {
  return typeof sha === 'string' && Sha256.safeParse(sha).success ? store.getReceipt(sha) : null;
}

/** The inputs, checked by the very schema the verifier parses them with. */
function checked(candidate: unknown): BundleInputs {
  const parsed = BundleInputs.safeParse(candidate);
  if (!parsed.success) throw unavailable('the stored inputs do not form a replay input');
  return parsed.data;
}
