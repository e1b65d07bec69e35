/**
 * Cloudflare bindings to service ports: the one place that knows which D1 database holds a
 * tenant and how an operation's Durable Object is named. Doors (HTTP, and later MCP, AuthZEN,
 * the console) open their ports here and hand them to the services.
 */
import { waitUntil } from 'cloudflare:workers';
import { operationStub } from '../../durable-objects/idempotency.js';
import { kickLog, logPrefix, logSequencerStub } from '../../durable-objects/log-sequencer.js';
import { rateLimiterStub } from '../../durable-objects/rate-limiter.js';
import { database } from '../db/client.js';
import { d1PlatformStore } from '../db/platform-store.js';
import { d1TenantStore } from '../db/tenant-store.js';
import { publishedKeys, receiptSigner, requireKeyRing } from './receipt-keys.js';
import { type RateLimit, parseRateLimit } from '../core/limits/token-bucket.js';
import type {
  KeysPort,
  OperationsPort,
  PlatformStore,
  RateLimitPort,
  ReceiptLogPort,
  TenantStore,
} from '../services/ports.js';

export function platformStore(env: Env): PlatformStore {
  return d1PlatformStore(database(env));
}

export function tenantStore(env: Env, tenant_id: string): TenantStore {
  return d1TenantStore(database(env), tenant_id, receiptHooks(env, tenant_id));
}

/**
 * Issue 11: every receipt the store writes is signed with the key ring (`WRIT_RECEIPT_KEYS`), and
 * each commit kicks the tenant's log sequencer through `waitUntil`: the response never waits for
 * the log (docs/transparency-log.md, "Delay").
 */
export function receiptHooks(env: Env, tenant_id: string) {
  return {
    sign: receiptSigner(env),
    committed: () => waitUntil(kickLog(env, tenant_id)),
  };
}

export function operationsPort(env: Env): OperationsPort {
  return {
    claim: (req) => operationStub(env, req.operation_id).claim(req),
    // Report and reconcile issue receipts (signed when the object mirrors them to D1): without a
    // usable key ring they are refused here, before the object records anything.
    report: (id, req) => {
      requireKeyRing(env);
      return operationStub(env, id).report(req);
    },
    reconcile: (id, req) => {
      requireKeyRing(env);
      return operationStub(env, id).reconcile(req);
    },
    read: (id, tenant_id) => operationStub(env, id).read(tenant_id),
  };
}

/** Used when a `WRIT_RATE_LIMIT_*` var is unset or invalid: 20 writes a second, bursts of 100. */
export const DEFAULT_RATE_LIMIT: RateLimit = { per_second: 20, burst: 100 };

/** The configured per-principal write limit (wrangler.toml [vars]). */
export function rateLimit(env: Env): RateLimit {
  const parsed = parseRateLimit({
    per_second: Number(env.WRIT_RATE_LIMIT_PER_SECOND ?? DEFAULT_RATE_LIMIT.per_second),
    burst: Number(env.WRIT_RATE_LIMIT_BURST ?? DEFAULT_RATE_LIMIT.burst),
  });
  return parsed.ok ? parsed.value : DEFAULT_RATE_LIMIT;
}

export function rateLimitPort(env: Env): RateLimitPort {
  const limit = rateLimit(env);
  return {
    take: async (tenant_id, principal_id, now) => {
      const d = await rateLimiterStub(env, tenant_id).take({ tenant_id, principal_id, now, ...limit });
      return { allowed: d.allowed, retry_after_seconds: d.retry_after_seconds };
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
  };
}

export function keysPort(env: Env): KeysPort {
  return { publicKeys: (now) => publishedKeys(env, now) };
}
