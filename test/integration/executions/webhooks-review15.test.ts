/**
 * Signed webhooks, review 15: what a refused delivery tells a sender without a valid signature,
 * whose secrets verify for whom, and what a `webhook-id` whose first delivery never answered
 * lets through.
 *
 * - The 401 of a delivery is a function of the request alone (its headers and the clock): an
 *   unknown tenant, a malformed id, an unknown, revoked or non-executor principal and a wrong
 *   secret answer the same body, so the URL is no oracle for which tenants or principals exist.
 * - A secret verifies for its own executor only: not under another tenant, not for another
 *   executor of the same tenant.
 * - A stored secret that does not parse fails the delivery closed (500), whatever signed it.
 * - A first delivery that died mid-way lets a retry of the same message take its id over; the id
 *   with another body (or route) is still refused, as for an answered id.
 */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { parseWebhookSecret, signWebhook } from '../../../src/core/identity/webhook.js';
import { tenantStore } from '../../../src/platform/bindings.js';
import { ServiceError } from '../../../src/services/errors.js';
import { STALE_DELIVERY_MS, startDelivery } from '../../../src/services/webhooks.js';
import { BASE, tenantD1, tenantRef, workerFetch } from '../platform/harness.js';
import { type Json, call, secondExecutor, seedTenant, uniqueName } from './helpers.js';

const SLOW_MS = 30_000;
const ROUTE = 'executions/report';

const randomSecret = () =>
  `whsec_${btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32))))}`;

/** POST `text` to `path` with the given webhook headers; the error body without its request id. */
async function refusal(path: string, text: string, headers: Record<string, string>) {
  const res = await workerFetch(`${BASE}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: new TextEncoder().encode(text),
  });
  const body = (await res.json()) as Json;
  const { request_id: _request_id, ...error } = body.error;
  return { status: res.status, error };
}

function signed(secret: string, text: string, timestamp = Math.floor(Date.now() / 1000)) {
  const id = uniqueName('msg').replace(/[^A-Za-z0-9_-]/g, '_');
  const key = parseWebhookSecret(secret) as Uint8Array;
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signWebhook(key, id, timestamp, new TextEncoder().encode(text)),
  };
}

describe(
  'a refused webhook says nothing about the tenant or principal in its URL',
  { timeout: SLOW_MS },
  () => {
    it('answers the same 401 body for an unknown tenant, a malformed id, an unknown, revoked or non-executor principal, and a wrong secret', async () => {
      const s = await seedTenant('wh-oracle');
      const created = await call('POST', `/v1/principals/${s.executor.principal_id}/webhook-secrets`, {
        key: s.admin.api_key,
      });
      expect(created.status).toBe(201);
      const revoked = await secondExecutor(s);
      const revokedSecret = await call('POST', `/v1/principals/${revoked.principal_id}/webhook-secrets`, {
        key: s.admin.api_key,
      });
      expect(revokedSecret.status).toBe(201);
      const revoke = await call('POST', `/v1/principals/${revoked.principal_id}/revoke`, {
        key: s.admin.api_key,
      });
      expect(revoke.status).toBe(200);

      const paths = [
        `/v1/webhooks/${s.tenant_id}/${s.executor.principal_id}/${ROUTE}`, // exists, has a secret
        `/v1/webhooks/${s.tenant_id}/prn-nosuchprincipal/${ROUTE}`,
        `/v1/webhooks/${s.tenant_id}/${s.agent.principal_id}/${ROUTE}`, // not an executor
        `/v1/webhooks/${s.tenant_id}/${revoked.principal_id}/${ROUTE}`,
        `/v1/webhooks/ten-nosuchtenant/${s.executor.principal_id}/${ROUTE}`,
        `/v1/webhooks/${s.tenant_id}/a.b/${ROUTE}`,
        `/v1/webhooks/a.b/${s.executor.principal_id}/${ROUTE}`,
      ];
      const text = '{"operation_id":"x"}';
      const now = Math.floor(Date.now() / 1000);
      const stranger = randomSecret();
      const cases: Record<string, Record<string, string>> = {
        'no headers': {},
        'a malformed id': { ...signed(stranger, text), 'webhook-id': 'msg.1' },
        'an expired timestamp': signed(stranger, text, now - 600),
        'a future timestamp': signed(stranger, text, now + 600),
        'a wrong secret': signed(stranger, text),
      };
      for (const [name, headers] of Object.entries(cases)) {
        const answers = [];
        for (const path of paths) answers.push(await refusal(path, text, headers));
        for (const [i, a] of answers.entries()) {
          expect(a.status, `${name}: ${paths[i]}`).toBe(401);
          expect(a.error, `${name}: ${paths[i]}`).toEqual(answers[0]?.error);
        }
      }
      // The revoked executor's own secret, signing correctly, is refused like any wrong secret.
      const own = await refusal(paths[3] as string, text, signed(revokedSecret.body.secret as string, text));
      const wrong = await refusal(paths[3] as string, text, signed(stranger, text));
      expect(own.status).toBe(401);
      expect(own.error).toEqual(wrong.error);
    });
  },
);

describe('secrets are per tenant and per executor', { timeout: SLOW_MS }, () => {
  it("an executor's secret verifies for that executor only, never under another tenant or executor", async () => {
    const a = await seedTenant('wh-iso-a');
    const b = await seedTenant('wh-iso-b');
    const secretOf = async (s: typeof a, principal_id: string) => {
      const r = await call('POST', `/v1/principals/${principal_id}/webhook-secrets`, {
        key: s.admin.api_key,
      });
      expect(r.status).toBe(201);
      return r.body.secret as string;
    };
    const secretA = await secretOf(a, a.executor.principal_id);
    await secretOf(b, b.executor.principal_id);
    const a2 = await secondExecutor(a);
    await secretOf(a, a2.principal_id);
    const text = '{"operation_id":"x"}';
    const path = (tenant_id: string, principal_id: string) =>
      `/v1/webhooks/${tenant_id}/${principal_id}/${ROUTE}`;

    // Signed with A's secret, for A: verified (the body then fails the route's schema, 400).
    const own = await refusal(path(a.tenant_id, a.executor.principal_id), text, signed(secretA, text));
    expect(own.status).toBe(400);
    // The same signature under tenant B (A's principal, or B's executor), or A's other executor.
    for (const p of [
      path(b.tenant_id, a.executor.principal_id),
      path(b.tenant_id, b.executor.principal_id),
      path(a.tenant_id, a2.principal_id),
    ]) {
      const r = await refusal(p, text, signed(secretA, text));
      expect(r.status, p).toBe(401);
      expect(r.error.code, p).toBe('unauthenticated');
    }
  });
});

describe('a stored secret that does not parse', { timeout: SLOW_MS }, () => {
  it('fails closed: 500, the delivery not claimed, even for a message signed by a good secret', async () => {
    const s = await seedTenant('wh-corrupt');
    const secretOf = async () => {
      const r = await call('POST', `/v1/principals/${s.executor.principal_id}/webhook-secrets`, {
        key: s.admin.api_key,
      });
      expect(r.status).toBe(201);
      return r.body as Json;
    };
    const good = await secretOf();
    const bad = await secretOf();
    await tenantD1(s)
      .prepare('UPDATE webhook_secrets SET secret = ? WHERE tenant_id = ? AND secret_id = ?')
      .bind('whsec_not-base64', s.tenant_id, bad.secret_id)
      .run();
    const text = '{"operation_id":"x"}';
    const headers = signed(good.secret as string, text);
    const r = await refusal(`/v1/webhooks/${s.tenant_id}/${s.executor.principal_id}/${ROUTE}`, text, headers);
    expect(r.status).toBe(500);
    expect(r.error.code).toBe('internal');
    const claimed = await tenantD1(s)
      .prepare('SELECT COUNT(*) AS n FROM webhook_deliveries WHERE tenant_id = ? AND webhook_id = ?')
      .bind(s.tenant_id, headers['webhook-id'])
      .first<{ n: number }>();
    expect(claimed?.n).toBe(0);
  });
});

describe('a webhook-id whose first delivery never answered', { timeout: SLOW_MS }, () => {
  it('is taken over by a retry of the same message only; another body or route is still refused', async () => {
    const s = await seedTenant('wh-stale');
    const store = tenantStore(env, tenantRef(s));
    const principal_id = s.executor.principal_id;
    const webhook_id = 'msg_stale_review15';
    const first = new TextEncoder().encode('{"a":1}');
    const other = new TextEncoder().encode('{"a":2}');
    const t0 = Date.now();
    const start = (body: Uint8Array, now: number, route = ROUTE) =>
      startDelivery(store, { principal_id, webhook_id, route, body, now });

    expect(await start(first, t0)).toEqual({ kind: 'process' });
    // Not yet stale: the same message waits, another one is refused.
    await expect(start(first, t0 + 1)).rejects.toMatchObject({ reason: 'in_progress' });
    await expect(start(other, t0 + 1)).rejects.toMatchObject({ reason: 'unauthenticated' });
    // Stale: still refused for another body or route, whatever the time.
    const later = t0 + STALE_DELIVERY_MS + 1;
    for (const attempt of [() => start(other, later), () => start(first, later, 'observations')]) {
      const e = await attempt().catch((x: unknown) => x);
      expect(e).toBeInstanceOf(ServiceError);
      expect(e).toMatchObject({ reason: 'unauthenticated' });
    }
    // The same message again takes the stale id over, and then holds it.
    expect(await start(first, later)).toEqual({ kind: 'process' });
    await expect(start(other, later + 1)).rejects.toMatchObject({ reason: 'unauthenticated' });
  });
});
