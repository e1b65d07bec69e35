/**
 * Cloudflare bindings to service ports: the one place that knows which D1 database holds a
 * tenant and how an operation's Durable Object is named. Doors (HTTP, and later MCP, AuthZEN,
 * the console) open their ports here and hand them to the services.
 */
import { operationStub } from '../../durable-objects/idempotency.js';
import { rateLimiterStub } from '../../durable-objects/rate-limiter.js';
import { database } from '../db/client.js';
import { d1PlatformStore } from '../db/platform-store.js';
import { d1TenantStore } from '../db/tenant-store.js';
import { r2BlobStore } from '../db/blobs.js';
import { type RetentionRun, archiveExpiredReceipts } from '../services/retention.js';
import { type RateLimit, parseRateLimit } from '../core/limits/token-bucket.js';
import type {
  ClassifierPort,
  BlobStore,
  OperationsPort,
  PlatformStore,
  RateLimitPort,
  TenantStore,
} from '../services/ports.js';
import { type TextClassifierBinding, readWithWorkersAi } from '../observation-classifier/workers-ai.js';

export function platformStore(env: Env): PlatformStore {
  return d1PlatformStore(database(env));
}

export function tenantStore(env: Env, tenant_id: string): TenantStore {
  return d1TenantStore(database(env), tenant_id, blobStore(env));
}

// -- Blobs and retention (issue 10, "Bounded D1") ----------------------------------------------

/** Content-addressed R2 objects (binding `BLOBS`): large evidence and receipt archives. */
export function blobStore(env: Env): BlobStore {
  return r2BlobStore(env.BLOBS);
}

/** Archive the receipts due at `now` (the `scheduled` handler; tests call it directly). */
export function runRetention(env: Env, now: number): Promise<RetentionRun> {
  const db = database(env);
  const blobs = blobStore(env);
  return archiveExpiredReceipts(
    { platform: d1PlatformStore(db), tenant: (id) => d1TenantStore(db, id, blobs), blobs },
    now,
  );
}

export function operationsPort(env: Env): OperationsPort {
  return {
    claim: (req) => operationStub(env, req.operation_id).claim(req),
    report: (id, req) => operationStub(env, id).report(req),
    reconcile: (id, req) => operationStub(env, id).reconcile(req),
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
