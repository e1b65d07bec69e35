/**
 * Cloudflare bindings to service ports: the one place that knows which D1 database holds a
 * tenant and how an operation's Durable Object is named. Doors (HTTP, and later MCP, AuthZEN,
 * the console) open their ports here and hand them to the services.
 *
 * Shards (src/platform/shards.ts): a tenant's store and operations are opened for the shard the
 * caller's API key named, so a tenant request touches that one shard. The platform store spans
 * shards: key lookup goes to the one shard asked for; placement and quotas read the directory
 * on shard 0 and then write to the tenant's shard.
 */
import { waitUntil } from 'cloudflare:workers';
import { operationStub } from '../../durable-objects/idempotency.js';
import {
  kickLog,
  logPrefix,
  logSequencerStub,
  publicationMarkerKey,
} from '../../durable-objects/log-sequencer.js';
import { rateLimiterStub } from '../../durable-objects/rate-limiter.js';
import { d1PlatformStore } from '../db/platform-store.js';
import { d1TenantStore } from '../db/tenant-store.js';
import { BLOB_GRACE_MS, r2BlobStore, r2BlobSweep } from '../db/blobs.js';
import { d1BlobCursor, d1BlobRefs } from '../db/blob-refs.js';
import { r2ImportUploads } from '../db/import-uploads.js';
import { deriveRecordKey, deriveStateKey } from '../services/import-verification-state.js';
import { type BlobCollectionRun, collectOrphanBlobs } from '../services/blob-collection.js';
import { type RetentionRun, archiveExpiredReceipts } from '../services/retention.js';
import { publishedKeys, receiptSigner, requireKeyRing, requireSigningKeyAt } from './receipt-keys.js';
import { type RateLimit, parseRateLimit } from '../core/limits/token-bucket.js';
import { type SignableReceipt, type SignatureEnvelope, prepareSignature } from '../core/receipts/signing.js';
import type {
  BlobStore,
  ClassifierPort,
  ImportUploadStore,
  KeysPort,
  OperationsPort,
  PlatformStore,
  PublicLogPort,
  RateLimitPort,
  ReceiptLogPort,
  TenantMovePort,
  TenantStore,
} from '../services/ports.js';
import { type TextClassifierBinding, readWithWorkersAi } from '../observation-classifier/workers-ai.js';
import {
  abortStagedChunk,
  beginRekey,
  beginStagedImport,
  exportTenantRows,
  freezeTenant,
  goLiveImport,
  keyStagedPrincipals,
  livePrincipals,
  markImportAborting,
  rekeyPrincipals,
  settleImport,
  tenantTableColumns,
  writeStagedChunk,
} from '../db/tenant-rows.js';
import {
  type TenantRef,
  allShards,
  placementShard,
  shardBinding,
  shardDb,
  shardDirectory,
} from './shards.js';

export type { TenantRef } from './shards.js';

export function platformStore(env: Env): PlatformStore {
  const directory = () => shardDirectory(env);
  return {
    async principalByKeyDigest(shard, key_sha256) {
      // A key naming a shard this deployment does not have matches nothing (401, like any miss).
      if (shardBinding(env, shard) === null) return null;
      return d1PlatformStore(shardDb(env, shard)).principalByKeyDigest(key_sha256);
    },
    async authorizationByKey(shard, key_sha256, request) {
      if (shardBinding(env, shard) === null) return null;
      return d1PlatformStore(shardDb(env, shard)).authorizationByKey(key_sha256, request);
    },
    async namedToolAuthorizationByKey(shard, key_sha256, tool_name, request, options) {
      if (shardBinding(env, shard) === null) return null;
      return d1PlatformStore(shardDb(env, shard)).namedToolAuthorizationByKey(
        key_sha256,
        tool_name,
        request,
        options,
      );
    },
    tenantNameTaken: (name) => directory().nameTaken(name),
    async placeTenant(t) {
      const dir = directory();
      const shard = placementShard(await dir.tenantsPerShard(allShards(env).length));
      const reserved = await dir.reserve({ ...t, shard });
      return reserved === 'name_taken' ? 'name_taken' : { shard };
    },
    releaseTenant: (tenant_id) => directory().release(tenant_id),
    placedShard: (tenant_id) => shardDirectory(env, { at_primary: true }).shardOf(tenant_id),
    createTenant: ({ shard, ...t }) => d1PlatformStore(shardDb(env, shard)).createTenant(t),
    tenantWritten: ({ tenant_id, shard }) => d1PlatformStore(shardDb(env, shard)).tenantWritten(tenant_id),
    async setQuotas(tenant_id, quotas, now) {
      const shard = await directory().shardOf(tenant_id);
      if (shard === null) return false;
      return d1PlatformStore(shardDb(env, shard)).setQuotas(tenant_id, quotas, now);
    },
  };
}

/** The one tenant-scoped storage handle: `tenant`'s rows on the shard that holds them. */
export function tenantStore(env: Env, tenant: TenantRef): TenantStore {
  return d1TenantStore(
    shardDb(env, tenant.shard),
    tenant.tenant_id,
    receiptHooks(env, tenant),
    blobStore(env),
  );
}

/**
 * Issue 11: every receipt the store writes is signed with the key ring (`WRIT_RECEIPT_KEYS`), and
 * each commit kicks the tenant's log sequencer through `waitUntil`: the response never waits for
 * the log (docs/transparency-log.md, "Delay").
 */
export function receiptHooks(env: Env, tenant: TenantRef) {
  if (BENCH_LOG_OFF) return benchLogOffHooks(env);
  return {
    sign: receiptSigner(env),
    committed: () => waitUntil(kickLog(env, tenant.tenant_id)),
  };
}

// -- Bench only: the log switched off (bench/log.bench.ts) -----------------------------------------
// `npm run bench:log` starts a second `wrangler dev --define WRIT_BENCH_LOG_OFF:true` to measure what
// signing and the log add to `POST /v1/authorize`. The define is a build-time substitution: no
// deployed build has it (wrangler.toml has no [define]), so there `typeof` is "undefined" and this is
// dead code; no variable, secret or request can switch signing off at run time.
declare const WRIT_BENCH_LOG_OFF: boolean | undefined;
const BENCH_LOG_OFF = typeof WRIT_BENCH_LOG_OFF !== 'undefined' && WRIT_BENCH_LOG_OFF === true;
// With `--define WRIT_BENCH_LOG_SIGNED:true` as well (`BENCH_OFF=drain`), the log-off build still
// signs every receipt and only leaves the log out: a diagnosis of which of the two costs.
declare const WRIT_BENCH_LOG_SIGNED: boolean | undefined;
const BENCH_LOG_SIGNED = typeof WRIT_BENCH_LOG_SIGNED !== 'undefined' && WRIT_BENCH_LOG_SIGNED === true;

/**
 * No Ed25519 signature and no log kick (so no draining): the envelope's fields are prepared as for
 * a real one and its signature left empty, so the receipt's batch keeps its signature statement and
 * the comparison isolates the signing and the log. With `WRIT_BENCH_LOG_SIGNED`, the signature is
 * the real one and only the log is left out.
 */
function benchLogOffHooks(env: Env) {
  if (BENCH_LOG_SIGNED) return { sign: receiptSigner(env), committed: () => undefined };
  return {
    sign: async (receipt: SignableReceipt, issued_at: number): Promise<SignatureEnvelope> => {
      const p = prepareSignature(requireKeyRing(env), receipt, issued_at);
      if (!p.ok) throw new Error(`receipt cannot be prepared: ${p.error.reason}`);
      return { ...p.value.unsigned, signature: '' };
    },
    committed: () => undefined,
  };
}

/**
 * The shard holding `tenant_id`, from the shard directory on shard 0, for doors whose caller
 * carries no routed key (signed webhooks); null for an unknown tenant.
 */
export function tenantShard(env: Env, tenant_id: string): Promise<number | null> {
  return shardDirectory(env).shardOf(tenant_id);
}

// -- Blobs and retention (issue 10, "Bounded D1") ----------------------------------------------

/** Content-addressed R2 objects (binding `BLOBS`): large evidence and receipt archives. */
export function blobStore(env: Env): BlobStore {
  return r2BlobStore(env.BLOBS);
}

/**
 * Archive the receipts due at `now` (the `scheduled` handler; tests call it directly), shard by
 * shard: each shard's quota rows name its tenants, and each tenant's rows move within its shard.
 */
export async function runRetention(env: Env, now: number): Promise<RetentionRun> {
  const blobs = blobStore(env);
  const total = { archives: 0, receipts: 0, bytes: 0, more: false, failed: 0 };
  for (const shard of allShards(env)) {
    const db = shardDb(env, shard);
    let run: RetentionRun;
    try {
      run = await archiveExpiredReceipts(
        {
          platform: d1PlatformStore(db),
          tenant: (id) => d1TenantStore(db, id, receiptHooks(env, { tenant_id: id, shard }), blobs),
          blobs,
        },
        now,
      );
    } catch (e) {
      // A shard whose tenant list cannot be read does not hold up the shards after it.
      console.error(
        JSON.stringify({
          level: 'error',
          what: 'retention failed for a shard; skipped until the next run',
          shard,
          error: e instanceof Error ? e.name : 'unknown',
        }),
      );
      total.failed++;
      continue;
    }
    total.archives += run.archives;
    total.receipts += run.receipts;
    total.bytes += run.bytes;
    total.more ||= run.more;
    total.failed += run.failed;
  }
  return total;
}

/**
 * Delete `BLOBS` objects no row of any shard refers to, older than the grace period (the
 * `scheduled` handler, after retention; tests call it directly). src/services/blob-collection.ts.
 */
export function runBlobCollection(env: Env, now: number): Promise<BlobCollectionRun> {
  return collectOrphanBlobs(
    {
      shards: allShards(env).map((n) => d1BlobRefs(shardDb(env, n))),
      cursor: d1BlobCursor(shardDb(env, 0)),
      bucket: r2BlobSweep(env.BLOBS),
      grace_ms: BLOB_GRACE_MS,
    },
    now,
  );
}

/**
 * The idempotency objects of operations on `shard`: each object mirrors its operation into that
 * shard's index (it records the shard at its first claim).
 */
export function operationsPort(env: Env, shard: number): OperationsPort {
  return {
    claim: (req) => operationStub(env, req.operation_id).claim(req, shard),
    // Report and reconcile issue receipts (signed at `req.now` when the object mirrors them to
    // D1): without a key ring whose active key may sign then, they are refused here, before the
    // object records anything.
    report: (id, req) => {
      requireSigningKeyAt(env, req.now);
      return operationStub(env, id).report(req);
    },
    reconcile: (id, req) => {
      requireSigningKeyAt(env, req.now);
      return operationStub(env, id).reconcile(req);
    },
    read: (id, tenant_id) => operationStub(env, id).read(tenant_id),
  };
}

/** Used when a `WRIT_RATE_LIMIT_*` var is unset or invalid: 20 writes a second, bursts of 100. */
export const DEFAULT_RATE_LIMIT: RateLimit = { per_second: 20, burst: 100 };

/**
 * A write limit from two [vars]: each unset var takes its default, and an invalid pair (either
 * var not a valid rate) falls back to the whole default, never to half of it.
 */
function configuredRateLimit(
  per_second: string | undefined,
  burst: string | undefined,
  fallback: RateLimit,
): RateLimit {
  const parsed = parseRateLimit({
    per_second: Number(per_second ?? fallback.per_second),
    burst: Number(burst ?? fallback.burst),
  });
  return parsed.ok ? parsed.value : fallback;
}

/** The configured per-principal write limit (wrangler.toml [vars]). */
export function rateLimit(env: Env): RateLimit {
  return configuredRateLimit(env.WRIT_RATE_LIMIT_PER_SECOND, env.WRIT_RATE_LIMIT_BURST, DEFAULT_RATE_LIMIT);
}

/**
 * Used when a `WRIT_TENANT_RATE_LIMIT_*` var is unset or invalid: 50 writes a second, bursts of
 * 200, over all of one tenant's principals (issue 10; docs/scaling.md sizes it against a shard's
 * writer).
 */
export const DEFAULT_TENANT_RATE_LIMIT: RateLimit = { per_second: 50, burst: 200 };

/** The configured aggregate write limit of one tenant (wrangler.toml [vars]). */
export function tenantRateLimit(env: Env): RateLimit {
  return configuredRateLimit(
    env.WRIT_TENANT_RATE_LIMIT_PER_SECOND,
    env.WRIT_TENANT_RATE_LIMIT_BURST,
    DEFAULT_TENANT_RATE_LIMIT,
  );
}

export function rateLimitPort(env: Env): RateLimitPort {
  const limit = rateLimit(env);
  const tenant = tenantRateLimit(env);
  return {
    max_count: Math.min(limit.burst, tenant.burst),
    take: async (tenant_id, principal_id, now, count = 1) => {
      const d = await rateLimiterStub(env, tenant_id).take({
        tenant_id,
        principal_id,
        now,
        ...limit,
        tenant_per_second: tenant.per_second,
        tenant_burst: tenant.burst,
        ...(count === 1 ? {} : { count }),
      });
      return d.allowed
        ? { allowed: true, retry_after_seconds: 0 }
        : {
            allowed: false,
            retry_after_seconds: d.retry_after_seconds,
            // Anything but the tenant's bucket is reported as the principal's (the older answer).
            limited_by: d.limited_by === 'tenant' ? 'tenant' : 'principal',
          };
    },
    refusals: (tenant_id, from, to) => rateLimiterStub(env, tenant_id).refusals({ tenant_id, from, to }),
  };
}

/** The security metrics' reader of one tenant's rate-limit refusals (`getMetrics`). */
export function refusalsOf(env: Env, tenant_id: string) {
  return (from: number, to: number) => rateLimitPort(env).refusals(tenant_id, from, to);
}

// ---------------------------------------------------------------------------------------------
// The optional observation classifier (issue 15)

/**
 * Bindings a deployment may add that the code does not require: `AI` (Workers AI, `[ai]
 * binding = "AI"` in wrangler.toml) is not bound by default, so it is not in the generated `Env`.
 */
interface OptionalBindings {
  readonly AI?: TextClassifierBinding;
}

/**
 * The classifier port over the `AI` binding. Without the binding a configured classifier is
 * `unavailable` (`no_binding`): the heuristic alone speaks, nothing fails.
 */
export function classifierPort(env: Env): ClassifierPort {
  const ai = (env as Env & OptionalBindings).AI;
  return {
    classify: async (text, settings) => {
      const r = await readWithWorkersAi(ai, text, {
        model: settings.model,
        injectionLabels: settings.injection_labels,
        timeoutMs: settings.timeout_ms,
        maxChars: settings.max_chars,
      });
      return r.ok
        ? {
            status: 'verdict',
            model: settings.model,
            injection_score: r.verdict.injection_score,
            threshold: settings.threshold,
          }
        : { status: 'unavailable', model: settings.model, reason: r.reason };
    },
  };
}

// -- Issue 11: the tenant's transparency log and the published receipt keys ----------------------

export function receiptLogPort(env: Env, tenant_id: string): ReceiptLogPort {
  const stub = () => logSequencerStub(env, tenant_id);
  return {
    checkpoint: () => stub().checkpoint(tenant_id),
    inclusion: (sha256) => stub().inclusion(tenant_id, sha256),
    drain: async () => {
      await stub().drain(tenant_id);
    },
    consistency: (from, to) => stub().consistency(tenant_id, from, to),
    object: async (path) => {
      const o = await env.LOG_TILES.get(logPrefix(tenant_id) + path);
      return o === null ? null : new Uint8Array(await o.arrayBuffer());
    },
    publication: () => stub().publication(tenant_id),
    setPublication: (published, principal_id, now) =>
      stub().setPublication(tenant_id, published, principal_id, now),
    witnesses: () => stub().witnesses(tenant_id),
    setWitnesses: (witnesses, allowLoopbackHttp, principal_id, now) =>
      stub().setWitnesses(tenant_id, [...witnesses], allowLoopbackHttp, principal_id, now),
  };
}

/** The public read path: the marker and objects the sequencers write to `LOG_TILES`, nothing else. */
export function publicLogPort(env: Env): PublicLogPort {
  return {
    published: async (tenant_id) => (await env.LOG_TILES.head(publicationMarkerKey(tenant_id))) !== null,
    read: async (tenant_id, path, withBody) => {
      const key = logPrefix(tenant_id) + path;
      if (!withBody) {
        const h = await env.LOG_TILES.head(key);
        return h === null ? null : { size: h.size, bytes: null };
      }
      const o = await env.LOG_TILES.get(key);
      if (o === null) return null;
      const bytes = new Uint8Array(await o.arrayBuffer());
      return { size: bytes.length, bytes };
    },
  };
}

/**
 * Shards: moving a tenant (platform admin, src/services/tenant-moves.ts). Each call opens the one
 * shard it names; `record` writes the directory on shard 0.
 */
export function tenantMovePort(env: Env): TenantMovePort {
  const directory = () => shardDirectory(env);
  return {
    shardOf: (tenant_id) => directory().shardOf(tenant_id),
    recordedShard: (tenant_id) => shardDirectory(env, { at_primary: true }).shardOf(tenant_id),
    shardExists: (shard) => shardBinding(env, shard) !== null,
    columnsOf: tenantTableColumns,
    exportRows: (shard, tenant_id, after) => exportTenantRows(shardDb(env, shard), tenant_id, after),
    freeze: (shard, tenant_id, now) => freezeTenant(shardDb(env, shard), tenant_id, now),
    nameTaken: (name) => directory().nameTaken(name),
    beginImport: (shard, s, now) => beginStagedImport(shardDb(env, shard), s, now),
    importChunk: (shard, s, chunk, now) => writeStagedChunk(shardDb(env, shard), s, chunk, now),
    keyPrincipals: (shard, s, keys) => keyStagedPrincipals(shardDb(env, shard), s, keys),
    goLive: (shard, s, quota, previous_shard, now) =>
      goLiveImport(shardDb(env, shard), s, quota, previous_shard, now),
    async record(t) {
      const dir = directory();
      // A compare-and-set on the shard the import read: of two imports of the tenant that read the
      // same directory, only the first to record moves it; the other is told `moved`.
      if (t.expected !== null)
        return (await dir.move(t.tenant_id, t.expected, t.shard, t.now)) ? 'recorded' : 'moved';
      const adopted = await dir.adopt(t);
      return adopted === 'adopted' ? 'recorded' : adopted === 'exists' ? 'moved' : 'name_taken';
    },
    markAbort: (shard, tenant_id, now) => markImportAborting(shardDb(env, shard), tenant_id, now),
    abortChunk: (shard, tenant_id, max) => abortStagedChunk(shardDb(env, shard), tenant_id, max),
    beginRekey: (shard, tenant_id, file_sha256, now) =>
      beginRekey(shardDb(env, shard), tenant_id, file_sha256, now),
    livePrincipals: (shard, tenant_id) => livePrincipals(shardDb(env, shard), tenant_id),
    rekeyPrincipals: (shard, tenant_id, attempt, keys) =>
      rekeyPrincipals(shardDb(env, shard), tenant_id, attempt, keys),
    settleImport: (shard, tenant_id, attempt) => settleImport(shardDb(env, shard), tenant_id, attempt),
  };
}

/**
 * Export files uploaded in parts for an import (src/services/import-uploads.ts): the `BLOBS`
 * bucket under `imports/`, which the orphan blob collector never walks.
 */
export function importUploadStore(env: Env): ImportUploadStore {
  return r2ImportUploads(
    env.BLOBS,
    () => importStateKey(env.WRIT_ADMIN_TOKEN),
    () => importRecordKey(env.WRIT_ADMIN_TOKEN),
  );
}

/** The key sealing kept verifications, derived once per isolate and secret (docs/key-derivation.md). */
let stateKey: { readonly secret: string; readonly key: Promise<CryptoKey> } | null = null;
function importStateKey(secret: string): Promise<CryptoKey> {
  if (stateKey?.secret !== secret) stateKey = { secret, key: deriveStateKey(secret) };
  return stateKey.key;
}

/** The key sealing completed upload records, derived once per isolate and secret. */
let recordKey: { readonly secret: string; readonly key: Promise<CryptoKey> } | null = null;
function importRecordKey(secret: string): Promise<CryptoKey> {
  if (recordKey?.secret !== secret) recordKey = { secret, key: deriveRecordKey(secret) };
  return recordKey.key;
}

export function keysPort(env: Env): KeysPort {
  return { publicKeys: (now) => publishedKeys(env, now) };
}
