/**
 * Signed webhooks for executors: per-executor signing secrets (tenant admin), and the
 * authentication and `webhook-id` de-duplication of a signed delivery (the webhook door,
 * src/http/routes/webhooks.ts). What a delivery does is the execution or observation service's,
 * unchanged: the same call through the bearer route or a webhook records the same thing.
 *
 * Guarantees:
 * - a secret is 32 random bytes (`whsec_` + base64), returned once at creation; a rotation dates
 *   every older live secret to expire after a grace period (0 to 7 days), and keeps at most
 *   `MAX_LIVE_SECRETS` live, so a sender can switch over without a failed delivery;
 * - a delivery is the executor's only when the URL names an unrevoked executor of that tenant and
 *   one of its live secrets signs the message (src/core/identity/webhook.ts) within the timestamp
 *   window of the request's clock; anything else is the same 401, nothing written;
 * - a `webhook-id` is processed once per executor: a retry of the same message (same route, same
 *   body) gets the first answer back and writes nothing; the id reused for other content is a 401.
 * Never: takes the executor from the body, stores a secret anywhere but its row, or logs one.
 */
import { z } from 'zod';
import { sha256Hex } from '../core/canonical/canonical.js';
import {
  WEBHOOK_SECRET_BYTES,
  WEBHOOK_TOLERANCE_MS,
  type WebhookHeaders,
  formatWebhookSecret,
  parseWebhookSecret,
  verifyWebhook,
} from '../core/identity/webhook.js';
import { StoredDocumentError } from '../db/documents.js';
import { newId } from '../db/ids.js';
import { type Caller, type TenantContext, ROLES_FOR, requireRole } from './context.js';
import { ServiceError, notFound } from './errors.js';
import type { TenantStore, WebhookDeliveryClaim } from './ports.js';

/** Live secrets per executor after a rotation: the new one and two in their grace period. */
export const MAX_LIVE_SECRETS = 3;
export const DEFAULT_GRACE_SECONDS = 24 * 60 * 60;
export const MAX_GRACE_SECONDS = 7 * 24 * 60 * 60;
/**
 * A first delivery unanswered after this long died mid-way: a retry of the same message (same
 * route, same body) may take its id over; the id with another message stays refused.
 */
export const STALE_DELIVERY_MS = 60_000;
/**
 * Delivered ids are kept this long: far beyond the timestamp window (after which a copy is refused
 * by its timestamp anyway), so a retry signed anew within a day still finds the first answer.
 */
export const DELIVERY_RETENTION_MS = 24 * 60 * 60_000;

export const RotateWebhookSecretRequest = z.strictObject({
  /** How long the executor's previous secrets keep verifying; default one day, 0 revokes them now. */
  previous_secret_grace_seconds: z.number().int().min(0).max(MAX_GRACE_SECONDS).optional(),
});
export type RotateWebhookSecretRequest = z.infer<typeof RotateWebhookSecretRequest>;

async function executorOf(ctx: TenantContext, principal_id: string) {
  const row = await ctx.store.getPrincipal(principal_id);
  if (row === null) throw notFound('principal');
  if (!row.roles.includes('executor')) {
    throw new ServiceError('conflict', 'webhook secrets are for executor principals');
  }
  return row;
}

/** Create a signing secret for an executor (the first, or a rotation). The secret is shown once. */
export async function rotateWebhookSecret(
  ctx: TenantContext,
  principal_id: string,
  body: RotateWebhookSecretRequest,
) {
  requireRole(ctx.caller, ROLES_FOR.admin);
  const executor = await executorOf(ctx, principal_id);
  if (executor.revoked_at_unix_ms !== null) throw new ServiceError('conflict', 'principal is revoked');
  const grace = body.previous_secret_grace_seconds ?? DEFAULT_GRACE_SECONDS;
  const secret_id = newId('webhook_secret');
  const secret = formatWebhookSecret(crypto.getRandomValues(new Uint8Array(WEBHOOK_SECRET_BYTES)));
  const previous_expires_at_unix_ms = ctx.now + grace * 1000;
  await ctx.store.rotateWebhookSecret({
    principal_id,
    secret: { principal_id, secret_id, secret, created_at_unix_ms: ctx.now, expires_at_unix_ms: null },
    created_by: ctx.caller.principal_id,
    previous_expires_at_unix_ms,
    max_live: MAX_LIVE_SECRETS,
  });
  ctx.log({ webhook_secret_id: secret_id, principal_id_target: principal_id });
  return {
    principal_id,
    secret_id,
    secret,
    created_at_unix_ms: ctx.now,
    previous_secrets_expire_at_unix_ms: previous_expires_at_unix_ms,
  };
}

/** The executor's secrets, without their values: which are live, and until when. */
export async function listWebhookSecrets(ctx: TenantContext, principal_id: string) {
  requireRole(ctx.caller, ROLES_FOR.admin);
  await executorOf(ctx, principal_id);
  const rows = await ctx.store.listWebhookSecrets(principal_id);
  return {
    principal_id,
    secrets: rows.map((r) => ({
      secret_id: r.secret_id,
      created_at_unix_ms: r.created_at_unix_ms,
      expires_at_unix_ms: r.expires_at_unix_ms,
      live: r.expires_at_unix_ms === null || r.expires_at_unix_ms > ctx.now,
    })),
  };
}

const refused = (why: string) => new ServiceError('unauthenticated', `webhook refused: ${why}`);

/**
 * The 401 of a delivery whose URL names nobody who could sign it (a malformed id, an unknown
 * tenant): exactly what an executor with no live secret answers, so the answer depends on the
 * request's headers and the clock only, never on which tenants or principals exist.
 */
export function refuseUnknownSender(headers: WebhookHeaders, now: number): ServiceError {
  const verified = verifyWebhook(headers, new Uint8Array(0), [], now, WEBHOOK_TOLERANCE_MS);
  return refused(verified.ok ? 'no matching signature' : verified.error.message);
}

/**
 * The 401 of a delivery whose URL names a tenant the directory does not know, after the same
 * storage reads a known tenant's delivery makes (the principal and its live secrets, here on a
 * store of a shard that holds no live copy of that tenant) and the same verification against no
 * secret: an unknown tenant costs the round trips of a known one, so neither the answer nor the
 * number of round trips before it tells which tenants exist. What the reads return is ignored:
 * only the directory names a tenant's live copy, so nothing found there can authenticate.
 */
export async function refuseUnknownTenant(
  store: TenantStore,
  principal_id: string,
  headers: WebhookHeaders,
  body: Uint8Array,
  now: number,
): Promise<ServiceError> {
  await Promise.all([store.getPrincipal(principal_id), store.liveWebhookSecrets(principal_id, now)]);
  const verified = verifyWebhook(headers, body, [], now, WEBHOOK_TOLERANCE_MS);
  return refused(verified.ok ? 'no matching signature' : verified.error.message);
}

/**
 * The executor a signed delivery comes from, established by its signature: the URL's principal
 * only selects whose secrets are tried. An unknown tenant or principal, a revoked or non-executor
 * principal, an executor without a live secret and a bad signature are all the same 401, with the
 * same body: a principal that may not deliver is answered as verification against no secret.
 */
export async function authenticateWebhook(
  store: TenantStore,
  principal_id: string,
  headers: WebhookHeaders,
  body: Uint8Array,
  now: number,
): Promise<{ readonly caller: Caller; readonly webhook_id: string }> {
  const [principal, secrets] = await Promise.all([
    store.getPrincipal(principal_id),
    store.liveWebhookSecrets(principal_id, now),
  ]);
  const keys = secrets.map((s) => parseWebhookSecret(s.secret));
  // A stored secret that does not parse is corruption, not a signature failure: fail closed (500).
  if (keys.some((k) => k === null)) throw new StoredDocumentError('stored webhook secret is malformed');
  // A principal that may not deliver has no secret to try: the answer of an unknown one.
  if (principal === null || principal.revoked_at_unix_ms !== null || !principal.roles.includes('executor')) {
    throw refuseUnknownSender(headers, now);
  }
  const verified = verifyWebhook(headers, body, keys as Uint8Array[], now, WEBHOOK_TOLERANCE_MS);
  if (!verified.ok) throw refused(verified.error.message);
  return {
    caller: {
      principal_id: principal.principal_id,
      tenant_id: principal.tenant_id,
      roles: principal.roles,
      executor_release: principal.executor_release,
    },
    webhook_id: verified.value.webhook_id,
  };
}

export type DeliveryStart =
  | { readonly kind: 'process' }
  | { readonly kind: 'replay'; readonly status: number; readonly response: string };

/**
 * Claim a verified delivery's `webhook-id` before anything is processed. The same message again
 * (a sender's retry, or a copy inside the timestamp window) replays the stored answer; the id
 * reused for another route or body is refused (401), also once its first delivery went stale;
 * an id whose first delivery is still being processed is a 409 `in_progress` with `Retry-After`.
 */
export async function startDelivery(
  store: TenantStore,
  d: { principal_id: string; webhook_id: string; route: string; body: Uint8Array; now: number },
): Promise<DeliveryStart> {
  const body_sha256 = sha256Hex(d.body);
  const claim: WebhookDeliveryClaim = await store.claimWebhookDelivery({
    principal_id: d.principal_id,
    webhook_id: d.webhook_id,
    route: d.route,
    body_sha256,
    received_at_unix_ms: d.now,
    stale_before_unix_ms: d.now - STALE_DELIVERY_MS,
    purge_before_unix_ms: d.now - DELIVERY_RETENTION_MS,
  });
  if (claim.state === 'claimed') return { kind: 'process' };
  if (claim.route !== d.route || claim.body_sha256 !== body_sha256) {
    throw refused('webhook-id was already used for another message');
  }
  if (claim.status === null || claim.response === null) {
    throw new ServiceError('in_progress', 'this webhook-id is being processed; retry later', [], 1);
  }
  return { kind: 'replay', status: claim.status, response: claim.response };
}

/**
 * Whether an answer is the message's answer for good: a retry should get it again. An internal
 * failure, a rate limit or a lost race says nothing about the message: its id is released.
 */
export function isFinalAnswer(status: number): boolean {
  return status < 500 && status !== 429 && status !== 409;
}
