/**
 * Signed webhooks for executors end to end (Standard Webhooks): the admin creates and rotates a
 * secret; a signed report or observation records what the bearer route records, through the same
 * service; a missing, bad, expired, reused or replayed signature is a 401 (or, for a retry of the
 * same message, the stored answer) and writes nothing.
 */
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { parseWebhookSecret, signWebhook } from '../../../src/core/identity/webhook.js';
import { sha256HexOfText } from '../../../src/core/canonical/canonical.js';
import type { Seeded } from '../../../scripts/seed.js';
import { workerFetch, BASE } from '../platform/harness.js';
import {
  type Json,
  type Reply,
  authorizedRollback,
  call,
  claim,
  observe,
  report,
  secondExecutor,
  seedTenant,
  uniqueName,
} from './helpers.js';

const SLOW_MS = 30_000;

async function newSecret(s: Seeded, principal_id = s.executor.principal_id, body?: unknown): Promise<string> {
  const r = await call('POST', `/v1/principals/${principal_id}/webhook-secrets`, {
    key: s.admin.api_key,
    ...(body === undefined ? {} : { body }),
  });
  expect(r.status).toBe(201);
  return r.body.secret as string;
}

interface Signed {
  readonly secret: string;
  readonly id?: string;
  readonly timestamp?: number;
  readonly headers?: Record<string, string | null>;
  readonly path?: string;
}

/** POST `text` to the executor's webhook route, signed with `o.secret` (headers overridable). */
async function deliver(s: Seeded, route: string, text: string, o: Signed): Promise<Reply> {
  const id = o.id ?? uniqueName('msg').replace(/[^A-Za-z0-9_-]/g, '_');
  const ts = o.timestamp ?? Math.floor(Date.now() / 1000);
  const bytes = new TextEncoder().encode(text);
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(ts),
    'webhook-signature': signWebhook(parseWebhookSecret(o.secret) as Uint8Array, id, ts, bytes),
  };
  for (const [k, v] of Object.entries(o.headers ?? {})) {
    if (v === null) delete headers[k];
    else headers[k] = v;
  }
  const path = o.path ?? `/v1/webhooks/${s.tenant_id}/${s.executor.principal_id}/${route}`;
  const res = await workerFetch(`${BASE}${path}`, { method: 'POST', headers, body: bytes });
  const body = await res.text();
  return { status: res.status, body: body.length > 0 ? JSON.parse(body) : null, headers: res.headers };
}

/** A claimed rollback and the honest report body for it. */
async function claimed(s: Seeded) {
  const a = await authorizedRollback(s);
  const c = await claim(s, a.sha256);
  expect(c.status).toBe(200);
  const body = {
    operation_id: c.body.operation_id as string,
    fencing_token: c.body.fencing_token as string,
    observation: observe(a.receipt, 'succeeded'),
  };
  return { a, c, body, text: JSON.stringify(body) };
}

async function operationStatus(s: Seeded, operation_id: string): Promise<string> {
  const op = await call('GET', `/v1/operations/${operation_id}`, { key: s.admin.api_key });
  return op.body.operation.status as string;
}

function expectRefused(r: Reply) {
  expect(r.status).toBe(401);
  expect(r.body.error.code).toBe('unauthenticated');
}

describe('signed webhooks: executions', { timeout: SLOW_MS }, () => {
  it('records a signed report exactly as the bearer route does, through the same service', async () => {
    const s = await seedTenant('wh');
    const secret = await newSecret(s);
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const { body, text } = await claimed(s);

    const r = await deliver(s, 'executions/report', text, { secret });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      status: 'verified_succeeded',
      violations: [],
      operation: { status: 'succeeded' },
    });
    const exec = r.body.execution_receipt as Json;
    const stored = await call('GET', `/v1/receipts/${exec.sha256}`, { key: s.admin.api_key });
    expect(stored.body).toMatchObject({ kind: 'execution', receipt: exec });

    // The same report through the bearer route finds the webhook's record: same receipt.
    const bearer = await report(s, body.operation_id, body.fencing_token, body.observation);
    expect(bearer.status).toBe(200);
    expect(bearer.body.execution_receipt).toEqual(exec);
    expect(bearer.body.operation).toEqual(r.body.operation);
  });

  it('refuses missing, bad, expired and misdirected signatures with 401, writing nothing', async () => {
    const s = await seedTenant('wh-bad');
    const secret = await newSecret(s);
    const { body, text } = await claimed(s);
    const now = Math.floor(Date.now() / 1000);
    const other = await secondExecutor(s);

    for (const header of ['webhook-id', 'webhook-timestamp', 'webhook-signature']) {
      expectRefused(await deliver(s, 'executions/report', text, { secret, headers: { [header]: null } }));
    }
    // Signed by a secret that is not this executor's (a well-formed, random one).
    const stranger = `whsec_${btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32))))}`;
    expectRefused(await deliver(s, 'executions/report', text, { secret: stranger }));
    // A valid signature over other bytes than those sent.
    const id = 'msg_tampered';
    const sig = signWebhook(
      parseWebhookSecret(secret) as Uint8Array,
      id,
      now,
      new TextEncoder().encode(text),
    );
    expectRefused(
      await deliver(s, 'executions/report', text.replace('"succeeded"', '"failed_no_effect"'), {
        secret,
        id,
        timestamp: now,
        headers: { 'webhook-signature': sig },
      }),
    );
    // Outside the timestamp window, either side.
    expectRefused(await deliver(s, 'executions/report', text, { secret, timestamp: now - 600 }));
    expectRefused(await deliver(s, 'executions/report', text, { secret, timestamp: now + 600 }));
    // The URL names another executor: its secrets are tried, this one's signature does not match.
    expectRefused(
      await deliver(s, 'executions/report', text, {
        secret,
        path: `/v1/webhooks/${s.tenant_id}/${other.principal_id}/executions/report`,
      }),
    );
    // Another tenant in the URL, and ids that name nobody.
    expectRefused(
      await deliver(s, 'executions/report', text, {
        secret,
        path: `/v1/webhooks/ten-nosuchtenant/${s.executor.principal_id}/executions/report`,
      }),
    );
    expectRefused(
      await deliver(s, 'executions/report', text, {
        secret,
        path: `/v1/webhooks/${s.tenant_id}/a.b/executions/report`,
      }),
    );
    // A bearer key is no substitute for the signature on this route.
    expectRefused(
      await deliver(s, 'executions/report', text, {
        secret,
        headers: { 'webhook-signature': null, authorization: `Bearer ${s.executor.api_key}` },
      }),
    );

    expect(await operationStatus(s, body.operation_id)).toBe('pending');
    const ok = await deliver(s, 'executions/report', text, { secret });
    expect(ok.status).toBe(200);
  });

  it('replays the stored answer for a retry of the same webhook-id, refuses the id reused for other content', async () => {
    const s = await seedTenant('wh-replay');
    const secret = await newSecret(s);
    const { body, text } = await claimed(s);
    const id = 'msg_replay_1';
    const first = await deliver(s, 'executions/report', text, { secret, id });
    expect(first.status).toBe(200);
    expect(first.headers.get('webhook-replayed')).toBeNull();

    // A sender's retry re-signs the same message with a new timestamp: same answer, nothing new.
    const retry = await deliver(s, 'executions/report', text, {
      secret,
      id,
      timestamp: Math.floor(Date.now() / 1000) + 1,
    });
    expect(retry.status).toBe(200);
    expect(retry.headers.get('webhook-replayed')).toBe('true');
    expect(retry.body).toEqual(first.body);

    // The same id for another body, or the same body on another route: refused.
    const other = JSON.stringify({
      ...body,
      observation: { ...body.observation, observation_id: 'obs-other' },
    });
    expectRefused(await deliver(s, 'executions/report', other, { secret, id }));
    expectRefused(await deliver(s, 'observations', text, { secret, id }));
    expect(await operationStatus(s, body.operation_id)).toBe('succeeded');
  });

  it('bounds the body before verifying it, and still decodes it strictly after', async () => {
    const s = await seedTenant('wh-body');
    const secret = await newSecret(s);
    const { body, text } = await claimed(s);
    const big = ' '.repeat(300 * 1024);
    const tooLarge = await deliver(s, 'executions/report', `${text}${big}`, { secret });
    expect(tooLarge.status).toBe(413);
    // Signed, but with a duplicate key: the strict decoder refuses it as on the bearer route.
    const dup = text.replace('{"operation_id"', `{"operation_id":"${'0'.repeat(64)}","operation_id"`);
    const r = await deliver(s, 'executions/report', dup, { secret });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('malformed_json');
    const unknown = await deliver(s, 'executions/report', JSON.stringify({ ...body, extra: 1 }), { secret });
    expect(unknown.status).toBe(400);
    expect(await operationStatus(s, body.operation_id)).toBe('pending');
  });
});

describe('signed webhooks: the reference library in workerd', { timeout: SLOW_MS }, () => {
  it('a delivery signed by standardwebhooks 1.1.1 (running in workerd) is accepted', async () => {
    const s = await seedTenant('wh-ref');
    const secret = await newSecret(s);
    const { text } = await claimed(s);
    const id = 'msg_reference_library';
    const ts = Math.floor(Date.now() / 1000);
    const signature = new Webhook(secret).sign(id, new Date(ts * 1000), text);
    const r = await deliver(s, 'executions/report', text, {
      secret,
      id,
      timestamp: ts,
      headers: { 'webhook-signature': signature },
    });
    expect(r.status).toBe(200);
    expect(r.body.status).toBe('verified_succeeded');
  });
});

describe('signed webhooks: secrets', { timeout: SLOW_MS }, () => {
  it('shows a secret once; a rotation keeps the previous one for its grace period only', async () => {
    const s = await seedTenant('wh-rotate');
    const first = await newSecret(s);
    const second = await newSecret(s);
    const list = await call('GET', `/v1/principals/${s.executor.principal_id}/webhook-secrets`, {
      key: s.admin.api_key,
    });
    expect(list.status).toBe(200);
    expect(list.body.secrets).toHaveLength(2);
    expect(list.body.secrets.every((x: Json) => x.live === true)).toBe(true);
    expect(JSON.stringify(list.body)).not.toContain('whsec_');

    // Both verify during the rotation.
    const one = await claimed(s);
    expect((await deliver(s, 'executions/report', one.text, { secret: first })).status).toBe(200);
    const two = await claimed(s);
    expect((await deliver(s, 'executions/report', two.text, { secret: second })).status).toBe(200);

    // A rotation with no grace revokes every older secret at once.
    const third = await newSecret(s, s.executor.principal_id, { previous_secret_grace_seconds: 0 });
    const three = await claimed(s);
    expectRefused(await deliver(s, 'executions/report', three.text, { secret: first }));
    expectRefused(await deliver(s, 'executions/report', three.text, { secret: second }));
    expect((await deliver(s, 'executions/report', three.text, { secret: third })).status).toBe(200);
  });

  it('is for the tenant admin and executors only; a revoked executor’s secret verifies nothing', async () => {
    const s = await seedTenant('wh-admin');
    const byExecutor = await call('POST', `/v1/principals/${s.executor.principal_id}/webhook-secrets`, {
      key: s.executor.api_key,
    });
    expect(byExecutor.status).toBe(403);
    const forAgent = await call('POST', `/v1/principals/${s.agent.principal_id}/webhook-secrets`, {
      key: s.admin.api_key,
    });
    expect(forAgent.status).toBe(409);
    const missing = await call('POST', `/v1/principals/prn-nosuchprincipal/webhook-secrets`, {
      key: s.admin.api_key,
    });
    expect(missing.status).toBe(404);

    const secret = await newSecret(s);
    const { body, text } = await claimed(s);
    await call('POST', `/v1/principals/${s.executor.principal_id}/revoke`, { key: s.admin.api_key });
    expectRefused(await deliver(s, 'executions/report', text, { secret }));
    expect(await operationStatus(s, body.operation_id)).toBe('pending');
  });
});

describe('signed webhooks: observations', { timeout: SLOW_MS }, () => {
  it('admits a signed observation as the bearer route does', async () => {
    const s = await seedTenant('wh-obs');
    const secret = await newSecret(s);
    const { text } = await claimed(s);
    const r = await deliver(s, 'executions/report', text, { secret });
    const exec = r.body.execution_receipt as Json;
    const at = exec.body.completed_at_unix_ms as number;
    const payload = '{"generation":8,"status":"rolled_back"}';
    const observation = {
      kind: 'output',
      observation: {
        observation_id: uniqueName('obs'),
        tenant_id: s.tenant_id,
        policy_sha256: s.policy_sha256,
        tool_contract_sha256: s.rollback_contract_sha256,
        invocation_sha256: exec.body.invocation_sha256,
        execution_receipt_sha256: exec.sha256,
        source_release: 'deploy-api 2026.11.3',
        source_generation: 8,
        source_as_of_unix_ms: at,
        media_type: 'application/json',
        payload,
        artifact: null,
        payload_sha256: sha256HexOfText(payload),
        payload_bytes: new TextEncoder().encode(payload).byteLength,
        locators: [],
        observed_at_unix_ms: at,
      },
    };
    const o = await deliver(s, 'observations', JSON.stringify(observation), { secret });
    expect(o.status).toBe(201);
    expect(o.body).toMatchObject({ decision: 'accepted_untrusted_evidence', violations: [] });
    // The bearer route, given the same observation, replays the webhook's receipt.
    const bearer = await call('POST', '/v1/observations', { key: s.executor.api_key, body: observation });
    expect(bearer.status).toBe(200);
    expect(bearer.body.receipt).toEqual(o.body.receipt);
  });
});
