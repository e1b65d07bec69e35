/**
 * Issue 9, findings 1 and 3, through the HTTP API: no raw control, bidi or invisible character
 * reaches an error body, whatever a request quotes; an error body stays small however many issues
 * a request provokes.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_ISSUES } from '../../../src/core/errors.js';
import { ADMIN_TOKEN, call, ROLLBACK_INPUT, seedTenant, type Json } from '../platform/harness.js';

const RAW_UNSAFE =
  /[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff\u{e0000}-\u{e007f}]/u;

/** Every string in `v` (keys too) is well-formed and free of raw unsafe characters. */
function assertSafe(v: Json, where = '$'): void {
  if (typeof v === 'string') {
    expect(v.isWellFormed() && !RAW_UNSAFE.test(v), `${where}: ${JSON.stringify(v)}`).toBe(true);
  } else if (Array.isArray(v)) v.forEach((x, i) => assertSafe(x, `${where}[${i}]`));
  else if (v !== null && typeof v === 'object') {
    for (const [k, x] of Object.entries(v)) {
      assertSafe(k, where);
      assertSafe(x, `${where}.${k}`);
    }
  }
}

const hostileChar = fc.constantFrom(
  '\u0000',
  '\u001b[31m',
  '\n',
  '\u0085',
  '\u009b2J',
  '\u061c',
  '\u200b',
  '\u202e',
  '\u2028',
  '\u2066',
  '\ufeff',
  '\u{e0041}',
);
const hostile = fc
  .array(fc.oneof(hostileChar, fc.string({ maxLength: 6 })), { minLength: 1, maxLength: 12 })
  .map((p) => p.join(''));

describe('error bodies never carry raw control, bidi or invisible characters', () => {
  it('hostile strings through tenants, authorize, approval requests and raw JSON (property)', async () => {
    const s = await seedTenant('hy');
    await fc.assert(
      fc.asyncProperty(hostile, async (h) => {
        const replies = await Promise.all([
          // A name that is no slug, echoed by zod; and an unknown key.
          call('POST', '/v1/tenants', { key: ADMIN_TOKEN, body: { name: h, [h]: 1 } }),
          call('POST', '/v1/authorize', { key: s.agent.api_key, body: { [h]: 1, run_id: h } }),
          // A target value with C1 / controls: refused, quoted escaped.
          call('POST', '/v1/approval-requests', {
            key: s.agent.api_key,
            body: {
              tool_contract_sha256: s.rollback_contract_sha256,
              input: { ...ROLLBACK_INPUT, service: h },
            },
          }),
          // A named target beside the input: target_mismatch quotes the derived one.
          call('POST', '/v1/approval-requests', {
            key: s.agent.api_key,
            body: {
              tool_contract_sha256: s.rollback_contract_sha256,
              input: { ...ROLLBACK_INPUT, service: `x${h.replace(/[\u0000-\u001f\u007f-\u009f*]/g, '')}` },
              target: { type: 'deployment', attributes: { environment: 'production', service: 'api' } },
            },
          }),
          // A duplicate key: the strict decoder quotes it.
          call('POST', '/v1/runs', {
            key: s.agent.api_key,
            raw: `{${JSON.stringify(h)}:1,${JSON.stringify(h)}:2}`,
          }),
        ]);
        // A bidi or invisible character alone is accepted (and flagged in the preview).
        for (const r of replies) {
          expect(r.status).toBeLessThan(500);
          if (r.status < 400) continue;
          expect(r.body.error.code).toEqual(expect.any(String));
          assertSafe(r.body);
        }
        expect(replies.filter((r) => r.status >= 400).length).toBeGreaterThanOrEqual(3);
      }),
      { seed: 0x5afe, numRuns: 15 },
    );
    // Many requests in one test: bounded by count, not by time (the machine may be loaded).
  }, 120_000);

  it('a CSI (U+009B) in a target value is a 400 naming the field, not an accepted request', async () => {
    const s = await seedTenant('hy');
    const r = await call('POST', '/v1/approval-requests', {
      key: s.agent.api_key,
      body: {
        tool_contract_sha256: s.rollback_contract_sha256,
        input: { ...ROLLBACK_INPUT, service: 'api\u009b2J' },
      },
    });
    expect(r.status).toBe(400);
    expect(r.body.error.issues).toEqual([
      { path: 'input/service', message: 'must be a non-empty string naming the target service' },
    ]);
  });

  it('C1 controls in labels and reasons are refused', async () => {
    const s = await seedTenant('hy');
    const run = await call('POST', '/v1/runs', {
      key: s.agent.api_key,
      body: { max_calls: 1, max_external_writes: 0, max_duration_ms: 60_000, label: 'x\u009b31m' },
    });
    expect(run.status).toBe(400);
    expect(run.body.error.issues[0].path).toBe('label');
    const p = await call('POST', '/v1/principals', {
      key: s.admin.api_key,
      body: { name: 'bot\u0085', roles: ['agent'] },
    });
    expect(p.status).toBe(400);
  });
});

describe('error bodies are bounded', () => {
  it('a request provoking thousands of issues answers a small typed 400', async () => {
    const s = await seedTenant('hy');
    const attributes = Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`a${i}`, '*']));
    const body = {
      tool_contract_sha256: s.rollback_contract_sha256,
      input: ROLLBACK_INPUT,
      target: { type: 'deployment', attributes },
    };
    const requestBytes = JSON.stringify(body).length;
    const r = await call('POST', '/v1/approval-requests', { key: s.agent.api_key, body });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('invalid_request');
    expect(r.body.error.issues).toHaveLength(MAX_ISSUES);
    expect(r.body.error.issues.at(-1)).toEqual({
      path: '$',
      message: `… and ${5000 - MAX_ISSUES + 1} more issues`,
    });
    const responseBytes = JSON.stringify(r.body).length;
    expect(responseBytes).toBeLessThan(8 * 1024);
    expect(responseBytes).toBeLessThan(requestBytes / 4);
  });
});
