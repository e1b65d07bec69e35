/**
 * The MCP door's pure translation (src/http/mcp/translate.ts): header decoding and header-body
 * checks (2026-07-28), revision detection, tools/call to Writ's request, the definition digest,
 * drafts, hint conflicts and list filtering, and the after-call output text.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalize, digestOf } from '../../../src/core/canonical/canonical.js';
import type { ToolContract } from '../../../src/core/model.js';
import {
  type CatalogEntry,
  RPC,
  decodeHeaderValue,
  definitionDigest,
  draftContract,
  filterToolList,
  hintConflicts,
  hintsOf,
  outputText,
  revisionOf,
  translateToolsCall,
} from '../../../src/http/mcp/translate.js';

const enc = (s: string) => `=?base64?${btoa(String.fromCharCode(...new TextEncoder().encode(s)))}?=`;
const none = { method: undefined, name: undefined, protocolVersion: undefined };
const call = (name: string, meta: Record<string, unknown> = { 'dev.writ/run_id': 'run-1' }) => ({
  jsonrpc: '2.0',
  id: 1,
  method: 'tools/call',
  params: { name, arguments: { a: 1 }, _meta: meta },
});

describe('decodeHeaderValue', () => {
  it('decodes the base64 sentinel and round-trips any string', () => {
    fc.assert(fc.property(fc.string(), (s) => decodeHeaderValue(enc(s)) === s));
    expect(decodeHeaderValue('plain')).toBe('plain');
  });
  it('refuses malformed, non-canonical or non-UTF-8 encodings', () => {
    for (const bad of [
      '=?base64?!!?=',
      '=?base64?YQ?=',
      '=?base64?YR==?=',
      '=?base64?/w==?=',
      '=?base64?YQ==',
    ]) {
      expect(decodeHeaderValue(bad), bad).toBeNull();
    }
  });
});

describe('revisionOf', () => {
  it('2025-era: absent header is 2025-03-26; a supported header is taken; unknown is -32022', () => {
    expect(revisionOf(1, none, undefined)).toEqual({ ok: true, revision: '2025-03-26' });
    expect(revisionOf(1, { ...none, protocolVersion: '2025-11-25' }, {})).toEqual({
      ok: true,
      revision: '2025-11-25',
    });
    const r = revisionOf(1, { ...none, protocolVersion: '2030-01-01' }, {});
    expect(r.ok === false && r.error.error.code).toBe(RPC.unsupportedProtocolVersion);
  });
  it('2026-07-28: header and _meta must agree', () => {
    const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28' };
    expect(revisionOf(1, { ...none, protocolVersion: '2026-07-28' }, meta).ok).toBe(true);
    for (const [h, m] of [
      [undefined, meta],
      ['2025-11-25', meta],
      ['2026-07-28', {}],
      ['2026-07-28', { 'io.modelcontextprotocol/protocolVersion': 7 }],
    ] as const) {
      const r = revisionOf(1, { ...none, protocolVersion: h }, m);
      expect(r.ok === false && r.error.error.code).toBe(RPC.headerMismatch);
    }
  });
});

describe('translateToolsCall', () => {
  it('maps name, arguments and the dev.writ/* _meta keys; strips them from what is forwarded', () => {
    const t = translateToolsCall(
      call('t', {
        'dev.writ/run_id': 'run-1',
        'dev.writ/idempotency_key': 'key-00001',
        'dev.writ/approval_id': 'apr-1',
        progressToken: 3,
      }),
      none,
    );
    expect(t.ok).toBe(true);
    if (!t.ok) return;
    expect(t.tool_name).toBe('t');
    expect(t.request).toEqual({
      input: { a: 1 },
      run_id: 'run-1',
      idempotency_key: 'key-00001',
      approval_id: 'apr-1',
    });
    expect(t.forward.params).toEqual({ name: 't', arguments: { a: 1 }, _meta: { progressToken: 3 } });
  });
  it('never yields a request for another method, a bad envelope or bad Writ meta', () => {
    const cases: [unknown, number, number][] = [
      [{ ...call('t'), method: 'tools/list' }, 200, RPC.methodNotFound],
      [{ ...call('t'), jsonrpc: '1.0' }, 400, RPC.invalidRequest],
      [{ ...call('t'), id: null }, 400, RPC.invalidRequest],
      [call('t', {}), 200, RPC.invalidParams],
      [
        call('t', { 'dev.writ/run_id': 'run-1', 'dev.writ/tool_contract_sha256': 'xyz' }),
        200,
        RPC.invalidParams,
      ],
      [{ ...call('t'), params: { name: '', _meta: { 'dev.writ/run_id': 'r' } } }, 200, RPC.invalidParams],
    ];
    for (const [body, status, code] of cases) {
      const t = translateToolsCall(body, none);
      expect(t.ok).toBe(false);
      if (t.ok) continue;
      expect([t.status, t.error.error.code]).toEqual([status, code]);
    }
  });
  it('only tools/call can ever translate to an authorization request (any method, any params)', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 40 }), fc.jsonValue(), (method, params) => {
        fc.pre(method !== 'tools/call');
        const t = translateToolsCall({ jsonrpc: '2.0', id: 1, method, params }, none);
        return !t.ok;
      }),
    );
  });
  it('2026-07-28: any Mcp-Name other than the body name (after decoding) is a 400 -32020', () => {
    const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'dev.writ/run_id': 'run-1' };
    const h = (name: string | undefined) => ({ method: 'tools/call', name, protocolVersion: '2026-07-28' });
    expect(translateToolsCall(call('tool', meta), h('tool')).ok).toBe(true);
    expect(translateToolsCall(call('tool', meta), h(enc('tool'))).ok).toBe(true);
    fc.assert(
      fc.property(fc.string({ maxLength: 20 }), fc.boolean(), (name, encode) => {
        fc.pre(name !== 'tool');
        const t = translateToolsCall(call('tool', meta), h(encode ? enc(name) : name));
        return !t.ok && t.status === 400 && t.error.error.code === RPC.headerMismatch;
      }),
    );
    const missing = translateToolsCall(call('tool', meta), h(undefined));
    expect(!missing.ok && missing.error.error.code).toBe(RPC.headerMismatch);
  });
});

const def = { name: 'x', description: 'd', inputSchema: { type: 'object' } };
const contract = (over: Partial<ToolContract>): ToolContract =>
  ({
    tool_name: 'x',
    input_schema_sha256: definitionDigest(def),
    output_schema_sha256: digestOf(null),
    effect: 'read_only',
    idempotency: 'not_required',
    ...over,
  }) as ToolContract;
const entry = (over: Partial<ToolContract>, e: Partial<CatalogEntry> = {}): CatalogEntry => ({
  tool_contract_sha256: 'c'.repeat(64),
  contract: contract(over),
  quarantined: false,
  permitted: true,
  ...e,
});

describe('definition digest and list filtering', () => {
  it('the digest covers every advertised member; absent equals null', () => {
    const base = definitionDigest(def);
    expect(definitionDigest({ ...def, title: 't' })).not.toBe(base);
    expect(definitionDigest({ ...def, description: 'd ' })).not.toBe(base);
    expect(definitionDigest({ ...def, annotations: {} })).not.toBe(base);
    expect(definitionDigest({ ...def, outputSchema: { type: 'object' } })).not.toBe(base);
    expect(base).toBe(
      digestOf({
        name: 'x',
        title: null,
        description: 'd',
        inputSchema: def.inputSchema,
        outputSchema: null,
        annotations: null,
      }),
    );
  });
  it('keeps a pinned permitted tool; drops drift, quarantine, unpinned and unpermitted', () => {
    expect(filterToolList([def], [entry({})]).tools).toEqual([def]);
    const drift = filterToolList([{ ...def, description: 'poison' }], [entry({})]);
    expect(drift.tools).toEqual([]);
    expect(drift.drift.map((d) => d.name)).toEqual(['x']);
    expect(filterToolList([def], [entry({}, { quarantined: true })]).drift).toHaveLength(1);
    expect(filterToolList([def], []).unpinned).toEqual(['x']);
    expect(filterToolList([def], [entry({}, { permitted: false })]).not_permitted).toEqual(['x']);
    expect(filterToolList([{ name: 1 }], [entry({})]).malformed).toBe(1);
  });
  it('hints use MCP defaults, drafts guess, and stated contradictions are reported', () => {
    expect(hintsOf(undefined)).toEqual({
      readOnlyHint: false,
      destructiveHint: true,
      idempotentHint: false,
      openWorldHint: true,
    });
    expect(draftContract(def).effect).toBe('irreversible');
    expect(draftContract({ ...def, annotations: { readOnlyHint: true } })).toMatchObject({
      effect: 'read_only',
      idempotency: 'not_required',
    });
    expect(
      draftContract({ ...def, annotations: { destructiveHint: false, idempotentHint: true } }),
    ).toMatchObject({
      effect: 'external_write',
      idempotency: 'key_required',
    });
    expect(hintConflicts({ readOnlyHint: true }, contract({ effect: 'external_write' }))).toHaveLength(1);
    expect(hintConflicts({ destructiveHint: false }, contract({ effect: 'irreversible' }))).toHaveLength(1);
    expect(hintConflicts(undefined, contract({ effect: 'irreversible' }))).toEqual([]);
  });
});

describe('outputText', () => {
  it('is the canonical JSON of the result less _meta', () => {
    const r = { content: [{ type: 'text', text: 'hi' }], isError: false, _meta: { trace: 1 } };
    expect(outputText(r)).toBe(canonicalize({ content: r.content, isError: false }));
  });
});
