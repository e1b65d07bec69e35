/**
 * Failure behaviour at the boundary: bodies are bounded before parsing (413), malformed or
 * unknown-field bodies are a typed 400 and write nothing, and errors share one wire shape.
 */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { ROLLBACK_CONTRACT } from '../../../scripts/seed.js';
import { call, seedTenant, d1Of } from './harness.js';

const LIMIT = Number(env.WRIT_MAX_BODY_BYTES);

async function contractCount(tenant_id: string): Promise<number> {
  const r = await (
    await d1Of(tenant_id)
  )
    .prepare('SELECT count(*) AS n FROM contracts WHERE tenant_id = ?')
    .bind(tenant_id)
    .first<{ n: number }>();
  return r?.n ?? -1;
}

describe('body bounds', () => {
  it('a declared Content-Length over the limit is a 413 before anything is read', async () => {
    const s = await seedTenant();
    const r = await call('POST', '/v1/contracts', {
      key: s.admin.api_key,
      raw: '{}',
      headers: { 'content-length': String(LIMIT + 1) },
    });
    expect(r.status).toBe(413);
    expect(r.body.error.code).toBe('payload_too_large');
  });

  it('a body over the limit without a truthful length is a 413 after at most limit+1 bytes', async () => {
    const s = await seedTenant();
    let sent = 0;
    const chunk = new TextEncoder().encode(' '.repeat(16 * 1024));
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent > LIMIT * 4) controller.close();
        else {
          sent += chunk.byteLength;
          controller.enqueue(chunk);
        }
      },
    });
    const r = await call('POST', '/v1/contracts', { key: s.admin.api_key, raw: stream });
    expect(r.status).toBe(413);
    expect(await contractCount(s.tenant_id)).toBe(2);
  });

  it('a body of exactly the limit is accepted for parsing', async () => {
    const s = await seedTenant();
    const json = JSON.stringify(ROLLBACK_CONTRACT);
    const padded = json + ' '.repeat(LIMIT - new TextEncoder().encode(json).byteLength);
    const r = await call('POST', '/v1/contracts', { key: s.admin.api_key, raw: padded });
    expect(r.status).toBe(200);
  });
});

describe('malformed bodies: typed 400, nothing written', () => {
  const cases: [string, string, string][] = [
    ['syntax', '{"schema_version": 1,', 'malformed_json'],
    ['duplicate key', '{"effect":"read_only","effect":"external_write"}', 'malformed_json'],
    ['prototype key', '{"__proto__":{"admin":true}}', 'malformed_json'],
    ['lone surrogate', '{"tool_name":"\\ud800"}', 'malformed_json'],
    ['unsafe integer', '{"timeout_ms":9007199254740993}', 'malformed_json'],
    ['empty body', '', 'malformed_json'],
  ];
  for (const [name, raw, code] of cases) {
    it(name, async () => {
      const s = await seedTenant();
      const r = await call('POST', '/v1/contracts', { key: s.admin.api_key, raw });
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe(code);
      expect(r.body.error.request_id).toMatch(/^req-/);
      expect(await contractCount(s.tenant_id)).toBe(2);
    });
  }

  it('an unknown field is rejected at every level', async () => {
    const s = await seedTenant();
    const top = await call('POST', '/v1/contracts', {
      key: s.admin.api_key,
      body: { ...ROLLBACK_CONTRACT, approved: true },
    });
    expect(top.status).toBe(400);
    expect(top.body.error.code).toBe('invalid_contract');
    const nested = await call('POST', '/v1/contracts', {
      key: s.admin.api_key,
      body: { ...ROLLBACK_CONTRACT, resource: { ...ROLLBACK_CONTRACT.resource, wildcard: '*' } },
    });
    expect(nested.status).toBe(400);
    const auth = await call('POST', '/v1/authorize', {
      key: s.agent.api_key,
      body: { tool_contract_sha256: s.read_contract_sha256, input: {}, run_id: 'run-x', approved: true },
    });
    expect(auth.status).toBe(400);
    expect(auth.body.error.code).toBe('invalid_request');
    expect(auth.body.error.issues[0].message).toMatch(/unrecognized key/);
    expect(await contractCount(s.tenant_id)).toBe(2);
  });

  it('a non-JSON content type is a 415', async () => {
    const s = await seedTenant();
    const r = await call('POST', '/v1/contracts', {
      key: s.admin.api_key,
      raw: JSON.stringify(ROLLBACK_CONTRACT),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(r.status).toBe(415);
    expect(r.body.error.code).toBe('unsupported_media_type');
  });

  it('contract metadata problems are all reported, sorted', async () => {
    const s = await seedTenant();
    const r = await call('POST', '/v1/contracts', {
      key: s.admin.api_key,
      body: { ...ROLLBACK_CONTRACT, timeout_ms: 0, idempotency: 'not_required' },
    });
    expect(r.status).toBe(400);
    expect(r.body.error.issues.map((i: { path: string }) => i.path)).toEqual([
      'contract.idempotency',
      'contract.timeout_ms',
    ]);
  });

  it('no raw argument reaches the log line, only digests', async () => {
    const s = await seedTenant();
    const logged: string[] = [];
    const original = console.log;
    console.log = (...args: unknown[]) => {
      logged.push(args.map(String).join(' '));
    };
    try {
      await call('POST', '/v1/approval-requests', {
        key: s.agent.api_key,
        body: {
          tool_contract_sha256: s.rollback_contract_sha256,
          input: { service: 'api', environment: 'production', from_version: 'v42', to_version: 'secret-v41' },
        },
      });
    } finally {
      console.log = original;
    }
    const line = logged.find((l) => l.includes('/v1/approval-requests'));
    // The Worker may log in another isolate than the test; assert only when the line is visible.
    if (line !== undefined) {
      expect(line).not.toContain('secret-v41');
      expect(line).toContain('input_sha256');
    }
  });
});
