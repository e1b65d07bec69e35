/**
 * The Docker MCP Gateway payload translation (src/http/mcp/interceptor.ts): both payload forms
 * read as the same call, the run id rules, and a property: no JSON value makes it throw, and only
 * a body with exactly one params spelling naming a tool ever translates.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { translateBefore } from '../../../src/http/mcp/interceptor.js';

const ARGS = { service: 'api', environment: 'production' };

describe('translateBefore', () => {
  it('reads the capitalised go-sdk form and the {method, params} form as the same call', () => {
    const a = translateBefore(
      { Session: {}, Params: { name: 'get_deployment', arguments: ARGS }, Extra: null },
      'run-1',
    );
    const b = translateBefore(
      { method: 'tools/call', params: { name: 'get_deployment', arguments: ARGS } },
      'run-1',
    );
    expect(a).toEqual(b);
    expect(a).toEqual({
      ok: true,
      call: {
        tool_name: 'get_deployment',
        tool_contract_sha256: undefined,
        request: { input: ARGS, run_id: 'run-1' },
      },
    });
  });

  it('takes Writ _meta keys as the gateway door does, and ignores Extra', () => {
    const t = translateBefore(
      {
        Params: {
          _meta: { 'dev.writ/run_id': 'run-2', 'dev.writ/idempotency_key': 'key-00000001', progressToken: 1 },
          name: 'execute_rollback',
          arguments: ARGS,
        },
        Extra: { Header: { Authorization: ['Bearer x'] } },
      },
      undefined,
    );
    expect(t).toMatchObject({
      ok: true,
      call: { request: { run_id: 'run-2', idempotency_key: 'key-00000001' } },
    });
  });

  it('refuses: no run, two runs, a bad run id, two params spellings, another method, a bad _meta', () => {
    const params = { name: 'get_deployment', arguments: ARGS };
    const refused = [
      translateBefore({ Params: params }, undefined),
      translateBefore({ Params: { ...params, _meta: { 'dev.writ/run_id': 'run-a' } } }, 'run-b'),
      translateBefore({ Params: params }, 'bad id'),
      translateBefore({ Params: params, params }, 'run-1'),
      translateBefore({ method: 'tools/list', params }, 'run-1'),
      translateBefore({ Params: { ...params, _meta: [] } }, 'run-1'),
      translateBefore({ Params: 'x' }, 'run-1'),
      translateBefore(null, 'run-1'),
    ];
    for (const r of refused) expect(r.ok).toBe(false);
  });

  it('property: any JSON value translates or refuses without throwing; only a named tool translates', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.jsonValue(),
          fc.record({ Params: fc.record({ name: fc.string(), arguments: fc.jsonValue() }) }),
          fc.record({ method: fc.string(), params: fc.dictionary(fc.string(), fc.jsonValue()) }),
        ),
        fc.option(fc.string(), { nil: undefined }),
        (body, run) => {
          const t = translateBefore(body, run);
          if (!t.ok) return;
          const b = body as Record<string, unknown>;
          const params = (b.Params ?? b.params) as Record<string, unknown>;
          expect('Params' in b && 'params' in b).toBe(false);
          expect(t.call.tool_name).toBe(params.name);
        },
      ),
    );
  });
});
