/**
 * Signed webhooks: a refused delivery costs the same storage round trips whoever its URL names.
 *
 * The 401's body was already a function of the request's headers and the clock alone
 * (webhooks-review15.test.ts). Its cost was not: a delivery for a tenant the shard directory does
 * not know was refused after the directory read alone, while one for a known tenant also read the
 * principal and its live secrets on the tenant's shard, so the time to the 401 told a sender
 * without any secret which tenant ids exist. Counting round trips (test/support/d1-routing.ts)
 * measures that difference without a timed assertion: an unknown tenant now makes the same reads
 * as a known tenant's unknown principal, and as a known executor with a wrong secret, and gets
 * the same status, error body and response headers (all but its request id).
 */
import { createExecutionContext, waitOnExecutionContext } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { parseWebhookSecret, signWebhook } from '../../../src/core/identity/webhook.js';
import { allShards } from '../../../src/platform/shards.js';
import worker from '../../../src/worker.js';
import { type TripCounts, counting, withRoutedShards } from '../../support/d1-routing.js';
import { BASE } from '../platform/harness.js';
import { type Json, call, seedTenant, uniqueName } from './helpers.js';

const SLOW_MS = 30_000;
const ROUTE = 'executions/report';

function signed(secret: string, text: string) {
  const id = uniqueName('msg').replace(/[^A-Za-z0-9_-]/g, '_');
  const timestamp = Math.floor(Date.now() / 1000);
  const key = parseWebhookSecret(secret) as Uint8Array;
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signWebhook(key, id, timestamp, new TextEncoder().encode(text)),
  };
}

/** One delivery through the Worker's handler, every shard's D1 binding counted. */
async function deliver(path: string, text: string, headers: Record<string, string>) {
  const trips: TripCounts = { primary: 0, replica: 0, stale: 0 };
  const routed = withRoutedShards(env, allShards(env), () => ({ onRoundTrip: counting(trips) }));
  const ctx = createExecutionContext();
  const res = await worker.fetch(
    new Request(`${BASE}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: new TextEncoder().encode(text),
    }),
    routed,
    ctx,
  );
  await waitOnExecutionContext(ctx);
  const body = (await res.json()) as Json;
  const { request_id, ...error } = body.error;
  // Every header but the request's own id, wherever it is echoed.
  const answered = [...res.headers].filter(([, v]) => !v.includes(request_id as string));
  return { status: res.status, error, headers: answered, trips };
}

describe('a refused webhook costs the same round trips whoever it names', { timeout: SLOW_MS }, () => {
  it('an unknown tenant is read like a known tenant’s unknown principal and a wrong secret', async () => {
    const s = await seedTenant('wh-trips');
    const created = await call('POST', `/v1/principals/${s.executor.principal_id}/webhook-secrets`, {
      key: s.admin.api_key,
    });
    expect(created.status).toBe(201);
    const text = '{"operation_id":"x"}';
    const stranger = `whsec_${btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32))))}`;

    const paths = {
      'known executor, wrong secret': `/v1/webhooks/${s.tenant_id}/${s.executor.principal_id}/${ROUTE}`,
      'known tenant, unknown principal': `/v1/webhooks/${s.tenant_id}/prn-nosuchprincipal/${ROUTE}`,
      'unknown tenant': `/v1/webhooks/ten-nosuchtenant/${s.executor.principal_id}/${ROUTE}`,
      'unknown tenant, unknown principal': `/v1/webhooks/ten-nosuchtenant/prn-nosuchprincipal/${ROUTE}`,
    };
    const answers = [];
    for (const [name, path] of Object.entries(paths)) {
      answers.push({ name, ...(await deliver(path, text, signed(stranger, text))) });
    }
    const first = answers[0];
    if (first === undefined) throw new Error('no answer');
    // A known tenant's refusal reads the directory and then the principal with its secrets.
    expect(first.trips.primary + first.trips.replica).toBeGreaterThanOrEqual(2);
    expect(first.headers.length).toBeGreaterThan(0);
    for (const a of answers) {
      expect(a.status, a.name).toBe(401);
      expect(a.error, a.name).toEqual(first.error);
      expect(a.headers, a.name).toEqual(first.headers);
      expect(a.trips, a.name).toEqual(first.trips);
    }
  });

  it('the reads an unknown tenant pays never authenticate it, even signed with a real secret', async () => {
    // The unknown tenant's reads run on shard 0 under the URL's tenant id: whatever they find,
    // only the directory names a live tenant. The executor's real secret, under an unknown
    // tenant id, is refused like a stranger's.
    const s = await seedTenant('wh-trips-real');
    const created = await call('POST', `/v1/principals/${s.executor.principal_id}/webhook-secrets`, {
      key: s.admin.api_key,
    });
    expect(created.status).toBe(201);
    const text = '{"operation_id":"x"}';
    const path = `/v1/webhooks/ten-nosuchtenant/${s.executor.principal_id}/${ROUTE}`;
    const own = await deliver(path, text, signed(created.body.secret as string, text));
    expect(own.status).toBe(401);
    const known = await deliver(
      `/v1/webhooks/${s.tenant_id}/${s.executor.principal_id}/${ROUTE}`,
      text,
      signed(created.body.secret as string, text),
    );
    // Under its own tenant the same secret verifies (the body then fails the route's schema).
    expect(known.status).toBe(400);
  });
});
