/**
 * MCP (Model Context Protocol) wire shapes to Writ's authorize request, and Writ's answers back
 * as MCP shapes. Pure: no I/O, no clock. See docs/mcp.md.
 *
 * Revisions: 2025-11-25 (what the official TypeScript SDK 1.x speaks; `MCP-Protocol-Version`
 * optional, absent = 2025-03-26) and the stateless 2026-07-28 (`Mcp-Method` and `Mcp-Name`
 * REQUIRED and checked against the body, `MCP-Protocol-Version` equal to
 * `_meta["io.modelcontextprotocol/protocolVersion"]`, else HTTP 400 + JSON-RPC -32020).
 *
 * Guarantees: authorization is decided on the parsed body (`params.name`, `params.arguments`),
 * never on a header; a header that disagrees with the body, or a base64-sentinel header that
 * does not decode to valid UTF-8, is a mismatch; only `tools/call` can ever become an
 * authorization (any other method is a JSON-RPC error); unknown members of the MCP shapes are
 * ignored (they are forwarded as they are).
 * Never: lets a `_meta` hint select a tenant or principal (the API key does), or grants anything
 * because of a tool annotation.
 */
import { z } from 'zod';
import type { DoorRequest } from '../../services/tool-call.js';
import { canonicalize, digestOf } from '../../core/canonical/canonical.js';
import { type IdempotencyMode, type ToolContract, type ToolEffect, WRITE_EFFECTS } from '../../core/model.js';

// ---------------------------------------------------------------------------------------------
// Protocol constants

export const STATELESS_REVISION = '2026-07-28';
/** Revisions this door accepts; the first is the newest. */
export const SUPPORTED_REVISIONS = [
  '2026-07-28',
  '2025-11-25',
  '2025-06-18',
  '2025-03-26',
  '2024-11-05',
  '2024-10-07',
] as const;
/** What a 2025-era request without `MCP-Protocol-Version` is assumed to speak (2025-11-25 transports). */
export const DEFAULT_LEGACY_REVISION = '2025-03-26';
export const PROTOCOL_VERSION_META = 'io.modelcontextprotocol/protocolVersion';

/** Writ's `_meta` keys: reverse-DNS prefix of writ.dev, as MCP's `_meta` key rules ask. */
export const WRIT_META = {
  run_id: 'dev.writ/run_id',
  idempotency_key: 'dev.writ/idempotency_key',
  approval_id: 'dev.writ/approval_id',
  tool_contract_sha256: 'dev.writ/tool_contract_sha256',
} as const;
export const WRIT_META_PREFIX = 'dev.writ/';

/** JSON-RPC and MCP error codes this door answers with. */
export const RPC = {
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  internal: -32603,
  /**
   * An authorization denial, as issue 12 and AuthZEN's COAZ-MCP draft ask. MCP 2026-07-28 makes
   * -32000..-32019 legacy and the TS SDK 1.x reads -32001 as a request timeout, so the answer
   * also carries `deny_result` (an `isError` tool result) the proxy may return instead.
   */
  denied: -32001,
  headerMismatch: -32020,
  unsupportedProtocolVersion: -32022,
} as const;

// ---------------------------------------------------------------------------------------------
// Shapes

export type RequestId = string | number;

export interface JsonRpcError {
  readonly jsonrpc: '2.0';
  readonly id: RequestId | null;
  readonly error: { readonly code: number; readonly message: string; readonly data?: unknown };
}

export function rpcError(id: RequestId | null, code: number, message: string, data?: unknown): JsonRpcError {
  return { jsonrpc: '2.0', id, error: data === undefined ? { code, message } : { code, message, data } };
}

/**
 * A tool-execution error the proxy can return as the call's result (MCP's preferred deny form).
 * Under 2026-07-28 every result carries `resultType` ("complete" for a finished call), so a
 * denial of a request in that revision does too; earlier revisions have no such member.
 */
export function denyResult(text: string, structured: Record<string, unknown>, revision?: string) {
  const result = { content: [{ type: 'text', text }], structuredContent: structured, isError: true };
  return revision === STATELESS_REVISION ? { resultType: 'complete' as const, ...result } : result;
}

// The envelope and params are checked by hand, member by member, rather than by zod object and
// record schemas: those walk every key of `arguments` and `_meta` (which the authorize request's
// own schema validates anyway) and cost more than the decision's parse on Workers, where zod runs
// without its JIT (docs/benchmarks.md "Doors"). The rules are the same ones.
const NAME_MAX = 256;
const isName = (v: unknown): v is string => typeof v === 'string' && v.length >= 1 && v.length <= NAME_MAX;
const isRequestId = (v: unknown): v is RequestId =>
  (typeof v === 'string' && v.length <= NAME_MAX) || (typeof v === 'number' && Number.isSafeInteger(v));

/** The JSON-RPC 2.0 request envelope, or what is wrong with it. */
function envelopeOf(
  body: unknown,
):
  | { ok: true; id: RequestId; method: string; params: Record<string, unknown> }
  | { ok: false; message: string } {
  if (!isRecord(body)) return { ok: false, message: '$: expected an object' };
  if (body.jsonrpc !== '2.0') return { ok: false, message: 'jsonrpc: must be "2.0"' };
  if (!isRequestId(body.id)) {
    return { ok: false, message: 'id: must be a string of at most 256 characters or a safe integer' };
  }
  if (!isName(body.method)) return { ok: false, message: 'method: must be a string of 1-256 characters' };
  const params = body.params ?? {};
  if (!isRecord(params)) return { ok: false, message: 'params: expected an object' };
  return { ok: true, id: body.id, method: body.method, params };
}

/** A contract digest named in `_meta` is looked up before the request is parsed: checked here. */
const SHA256_HEX = /^[0-9a-f]{64}$/;

/** The request headers the door reads (lower-cased names; values as sent). */
export interface McpHeaders {
  readonly method: string | undefined;
  readonly name: string | undefined;
  readonly protocolVersion: string | undefined;
}

export type CallTranslation =
  | {
      readonly ok: true;
      readonly id: RequestId;
      readonly revision: string;
      readonly tool_name: string;
      readonly tool_contract_sha256: string | undefined;
      readonly request: DoorRequest;
      /** What the proxy forwards: the original params less Writ's own `_meta` keys. */
      readonly forward: {
        jsonrpc: '2.0';
        id: RequestId;
        method: 'tools/call';
        params: Record<string, unknown>;
      };
    }
  | {
      readonly ok: false;
      /** 400 for a protocol failure (envelope, headers, version); 200 for a denial of the call. */
      readonly status: 200 | 400;
      readonly error: JsonRpcError;
      /** The revision the request speaks, when it was settled before the refusal. */
      readonly revision?: string;
    };

// ---------------------------------------------------------------------------------------------
// Header values (2026-07-28 streamable-http "Standard Request Headers")

const SENTINEL = /^=\?base64\?([A-Za-z0-9+/]*={0,2})\?=$/;

/**
 * A header value as the body would spell it: a `=?base64?...?=` value is decoded (strictly:
 * canonical base64 of valid UTF-8), anything else is taken as it is. Null: undecodable.
 */
export function decodeHeaderValue(value: string): string | null {
  if (!value.startsWith('=?base64?')) return value;
  const m = SENTINEL.exec(value);
  if (m === null) return null;
  const b64 = m[1] as string;
  if (b64.length % 4 !== 0) return null;
  let bin: string;
  try {
    bin = atob(b64);
  } catch {
    return null;
  }
  const bytes = Uint8Array.from(bin, (ch) => ch.charCodeAt(0));
  // Non-canonical padding bits would let two header spellings name one value.
  if (btoa(bin) !== b64) return null;
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    return null;
  }
}

// Module-level rather than closures in `revisionOf`/`callOf`: a closure is allocated (and, in a
// bundle built with esbuild's keepNames, named by a helper call) on every request.
const supported = (v: string) => (SUPPORTED_REVISIONS as readonly string[]).includes(v);
const unsupported = (id: RequestId | null, requested: unknown) =>
  rpcError(id, RPC.unsupportedProtocolVersion, 'unsupported protocol version', {
    supported: SUPPORTED_REVISIONS,
    requested: typeof requested === 'string' ? requested : null,
  });
const invalidParams = (id: RequestId | null, message: string) => ({
  ok: false as const,
  status: 200 as const,
  error: rpcError(id, RPC.invalidParams, message),
});

/** The revision a request speaks, or the JSON-RPC error for a version disagreement. */
export function revisionOf(
  id: RequestId | null,
  headers: McpHeaders,
  meta: Record<string, unknown> | undefined,
): { ok: true; revision: string } | { ok: false; error: JsonRpcError } {
  const inMeta = meta?.[PROTOCOL_VERSION_META];
  const header = headers.protocolVersion;
  if (inMeta !== undefined) {
    // A body that states its version (2026-07-28) needs the header to say the same.
    if (typeof inMeta !== 'string' || header !== inMeta) {
      return {
        ok: false,
        error: rpcError(
          id,
          RPC.headerMismatch,
          `MCP-Protocol-Version does not match _meta["${PROTOCOL_VERSION_META}"]`,
        ),
      };
    }
    if (!supported(inMeta)) return { ok: false, error: unsupported(id, inMeta) };
    return { ok: true, revision: inMeta };
  }
  if (header === undefined) return { ok: true, revision: DEFAULT_LEGACY_REVISION };
  if (header === STATELESS_REVISION) {
    return {
      ok: false,
      error: rpcError(
        id,
        RPC.headerMismatch,
        `a ${STATELESS_REVISION} request needs _meta["${PROTOCOL_VERSION_META}"]`,
      ),
    };
  }
  if (!supported(header)) return { ok: false, error: unsupported(id, header) };
  return { ok: true, revision: header };
}

/** 2026-07-28: `Mcp-Method` (and for tools/call `Mcp-Name`) are required and must equal the body. */
export function headerMismatch(
  id: RequestId | null,
  headers: McpHeaders,
  method: string,
  name: string | undefined,
): JsonRpcError | null {
  if (headers.method === undefined) return rpcError(id, RPC.headerMismatch, 'Mcp-Method header is required');
  if (decodeHeaderValue(headers.method) !== method) {
    return rpcError(id, RPC.headerMismatch, 'Mcp-Method header does not match the body');
  }
  if (name === undefined) return null;
  if (headers.name === undefined) return rpcError(id, RPC.headerMismatch, 'Mcp-Name header is required');
  if (decodeHeaderValue(headers.name) !== name) {
    return rpcError(id, RPC.headerMismatch, 'Mcp-Name header does not match the body');
  }
  return null;
}

/**
 * A raw MCP `tools/call` request as Writ's authorize request (less the contract digest the door
 * resolves from the tool name), or the JSON-RPC error to answer.
 */
export function translateToolsCall(body: unknown, headers: McpHeaders): CallTranslation {
  const env = envelopeOf(body);
  if (!env.ok) {
    const id = idOf(body);
    return {
      ok: false,
      status: 400,
      error: rpcError(id, RPC.invalidRequest, `not a JSON-RPC 2.0 request: ${env.message}`),
    };
  }
  const { id, method, params } = env;
  const meta = isRecord(params._meta) ? params._meta : undefined;
  const rev = revisionOf(id, headers, meta);
  if (!rev.ok) return { ok: false, status: 400, error: rev.error };
  const callName = method === 'tools/call' && typeof params.name === 'string' ? params.name : undefined;
  if (rev.revision === STATELESS_REVISION) {
    const mismatch = headerMismatch(
      id,
      headers,
      method,
      method === 'tools/call' ? (callName ?? '') : undefined,
    );
    if (mismatch !== null) return { ok: false, status: 400, error: mismatch, revision: rev.revision };
  }
  // Only a tool call is ever authorized here: anything else is not a method this door maps.
  if (method !== 'tools/call') {
    return {
      ok: false,
      status: 200,
      revision: rev.revision,
      error: rpcError(
        id,
        RPC.methodNotFound,
        `method "${method.slice(0, 64)}" is not authorized by this gateway`,
      ),
    };
  }
  const call = callOf(id, params);
  if (!call.ok) return { ...call, revision: rev.revision };
  return {
    ok: true,
    id,
    revision: rev.revision,
    ...call.call,
    forward: { jsonrpc: '2.0', id, method: 'tools/call', params: withoutWritMeta(params) },
  };
}

/** A tool call to authorize: the tool name, the digest named beside it, Writ's request. */
export interface ToolCall {
  readonly tool_name: string;
  readonly tool_contract_sha256: string | undefined;
  readonly request: DoorRequest;
}

/**
 * `tools/call` params (`name`, `arguments`, `_meta` with Writ's keys) as the call to authorize,
 * or the JSON-RPC error (`-32602`) to answer. Shared by the gateway door and the Docker MCP
 * Gateway interceptor adapter, so both read the same params the same way.
 */
export function callOf(
  id: RequestId | null,
  params: Record<string, unknown>,
): { ok: true; call: ToolCall } | { ok: false; status: 200; error: JsonRpcError } {
  const { name, arguments: args, _meta } = params;
  if (!isName(name)) return invalidParams(id, 'params.name: must be a string of 1-256 characters');
  if (args !== undefined && !isRecord(args)) return invalidParams(id, 'params.arguments: expected an object');
  if (_meta !== undefined && !isRecord(_meta)) return invalidParams(id, 'params._meta: expected an object');
  const meta = _meta ?? {};
  // Only what routes the call is checked here; the authorize request's own schema parses the
  // rest once, in the service (src/services/tool-call.ts), and a failure there is -32602 too.
  const run_id = meta[WRIT_META.run_id];
  if (typeof run_id !== 'string')
    return invalidParams(id, `params._meta["${WRIT_META.run_id}"]: is required`);
  const digest = meta[WRIT_META.tool_contract_sha256] ?? undefined;
  if (digest !== undefined && !(typeof digest === 'string' && SHA256_HEX.test(digest))) {
    return invalidParams(
      id,
      `params._meta["${WRIT_META.tool_contract_sha256}"]: must be a sha-256 hex digest`,
    );
  }
  const idem = meta[WRIT_META.idempotency_key] ?? undefined;
  const approval = meta[WRIT_META.approval_id] ?? undefined;
  // Assigned member by member, not spread from conditional literals (two objects per call).
  const request: Record<string, unknown> = { input: args ?? {}, run_id };
  if (idem !== undefined) request.idempotency_key = idem;
  if (approval !== undefined) request.approval_id = approval;
  return {
    ok: true,
    call: { tool_name: name, tool_contract_sha256: digest, request },
  };
}
/** The params as the client sent them, less the `_meta` keys the proxy added for Writ. */
export function withoutWritMeta(params: Record<string, unknown>): Record<string, unknown> {
  const source = params._meta;
  if (!isRecord(source)) return params;
  // A key loop rather than entries/filter/fromEntries (three arrays per call): same keys, same
  // order, each an own data property (`__proto__` too, though the body decoder refuses it).
  const meta: Record<string, unknown> = {};
  for (const k of Object.keys(source)) {
    if (k.startsWith(WRIT_META_PREFIX)) continue;
    if (k === '__proto__') {
      Object.defineProperty(meta, k, {
        value: source[k],
        enumerable: true,
        writable: true,
        configurable: true,
      });
    } else {
      meta[k] = source[k];
    }
  }
  return { ...params, _meta: meta };
}

function idOf(body: unknown): RequestId | null {
  if (!isRecord(body)) return null;
  const id = body.id;
  return typeof id === 'string' || (typeof id === 'number' && Number.isSafeInteger(id)) ? id : null;
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

// ---------------------------------------------------------------------------------------------
// tools/list: definition digest, drift, hints

const ToolDefinition = z.object({
  name: z.string().min(1).max(256),
  title: z.string().optional(),
  description: z.string().optional(),
  inputSchema: z.record(z.string(), z.unknown()),
  outputSchema: z.record(z.string(), z.unknown()).optional(),
  annotations: z.record(z.string(), z.unknown()).optional(),
});
export type ToolDefinition = z.infer<typeof ToolDefinition> & Record<string, unknown>;

/** At most this many tools in one list: each is digested and compared. */
export const MAX_LISTED_TOOLS = 512;

const ListResult = z.object({ tools: z.array(z.unknown()).max(MAX_LISTED_TOOLS) });

/** The `result` of a `tools/list` response, given the response or the result itself. */
export function listResultOf(
  body: unknown,
): { ok: true; result: Record<string, unknown>; tools: unknown[] } | { ok: false; message: string } {
  const result = isRecord(body) && isRecord(body.result) ? body.result : body;
  const parsed = ListResult.safeParse(result);
  if (!parsed.success || !isRecord(result)) {
    return { ok: false, message: 'body must be a tools/list response or its result, with at most 512 tools' };
  }
  return { ok: true, result, tools: parsed.data.tools };
}

/**
 * The MCP definition digest: SHA-256 of the RFC 8785 canonical JSON of
 * `{name, title, description, inputSchema, outputSchema, annotations}` (absent members as null).
 * A pinned MCP contract carries it as `input_schema_sha256`, so a description-only change is drift.
 */
export function definitionDigest(t: z.infer<typeof ToolDefinition>): string {
  return digestOf({
    name: t.name,
    title: t.title ?? null,
    description: t.description ?? null,
    inputSchema: t.inputSchema,
    outputSchema: t.outputSchema ?? null,
    annotations: t.annotations ?? null,
  });
}

/** The output schema digest a pinned MCP contract carries as `output_schema_sha256`. */
export function outputSchemaDigest(t: z.infer<typeof ToolDefinition>): string {
  return digestOf(t.outputSchema ?? null);
}

/** Annotation hints with MCP's defaults applied (identical in 2025-06-18 .. 2026-07-28). */
export interface Hints {
  readonly readOnlyHint: boolean;
  readonly destructiveHint: boolean;
  readonly idempotentHint: boolean;
  readonly openWorldHint: boolean;
}

export function hintsOf(annotations: Record<string, unknown> | undefined): Hints {
  const b = (k: string, d: boolean) =>
    typeof annotations?.[k] === 'boolean' ? (annotations[k] as boolean) : d;
  return {
    readOnlyHint: b('readOnlyHint', false),
    destructiveHint: b('destructiveHint', true),
    idempotentHint: b('idempotentHint', false),
    openWorldHint: b('openWorldHint', true),
  };
}

/** A draft contract an admin may complete and pin: hints guess, they never grant. */
export function draftContract(t: z.infer<typeof ToolDefinition>) {
  const h = hintsOf(t.annotations);
  const effect: ToolEffect = h.readOnlyHint
    ? 'read_only'
    : h.destructiveHint
      ? 'irreversible'
      : 'external_write';
  // Writes always need a key (WRITE_EFFECTS); otherwise idempotentHint decides.
  const idempotency: IdempotencyMode =
    WRITE_EFFECTS.has(effect) || !(h.readOnlyHint || h.idempotentHint) ? 'key_required' : 'not_required';
  return {
    status: 'draft' as const,
    tool_name: t.name,
    input_schema_sha256: definitionDigest(t),
    output_schema_sha256: outputSchemaDigest(t),
    effect,
    idempotency,
    reversible: false,
    hints: h,
  };
}

/** Explicitly stated hints that contradict the reviewed contract (defaults are not statements). */
export function hintConflicts(annotations: Record<string, unknown> | undefined, c: ToolContract): string[] {
  const a = annotations ?? {};
  const out: string[] = [];
  if (a.readOnlyHint === true && c.effect !== 'read_only')
    out.push(`readOnlyHint true, pinned effect ${c.effect}`);
  if (a.readOnlyHint === false && c.effect === 'read_only')
    out.push('readOnlyHint false, pinned effect read_only');
  if (a.destructiveHint === false && c.effect === 'irreversible') {
    out.push('destructiveHint false, pinned effect irreversible');
  }
  if (a.idempotentHint === true && c.idempotency === 'key_required' && !WRITE_EFFECTS.has(c.effect)) {
    out.push('idempotentHint true, pinned idempotency key_required');
  }
  return out;
}

export interface CatalogEntry {
  readonly tool_contract_sha256: string;
  readonly contract: ToolContract;
  readonly quarantined: boolean;
  /** The caller's grants could authorize it (searchTools). */
  readonly permitted: boolean;
}

export interface ListFiltering {
  readonly tools: Record<string, unknown>[];
  readonly drift: { name: string; definition_sha256: string; pinned_input_schema_sha256: string[] }[];
  readonly unpinned: string[];
  readonly not_permitted: string[];
  readonly malformed: number;
  readonly drafts: ReturnType<typeof draftContract>[];
  readonly hint_conflicts: { name: string; tool_contract_sha256: string; conflicts: string[] }[];
}

/**
 * Filter a listed tool set against the pinned contracts and the caller's permissions: a tool
 * stays only when an unquarantined pinned contract of its name pins its whole definition and
 * output schema, and the caller's grants could authorize that contract.
 */
export function filterToolList(listed: readonly unknown[], catalog: readonly CatalogEntry[]): ListFiltering {
  const out: ListFiltering = {
    tools: [],
    drift: [],
    unpinned: [],
    not_permitted: [],
    malformed: 0,
    drafts: [],
    hint_conflicts: [],
  };
  for (const raw of listed) {
    const parsed = ToolDefinition.safeParse(raw);
    if (!parsed.success) {
      // A definition we cannot digest cannot be pinned: dropped, counted.
      (out as { malformed: number }).malformed += 1;
      continue;
    }
    const t = parsed.data;
    const def = definitionDigest(t);
    const outDigest = outputSchemaDigest(t);
    const named = catalog.filter((e) => e.contract.tool_name === t.name);
    if (named.length === 0) {
      out.unpinned.push(t.name);
      out.drafts.push(draftContract(t));
      continue;
    }
    const match = named.find(
      (e) =>
        !e.quarantined &&
        e.contract.input_schema_sha256 === def &&
        e.contract.output_schema_sha256 === outDigest,
    );
    if (match === undefined) {
      out.drift.push({
        name: t.name,
        definition_sha256: def,
        pinned_input_schema_sha256: [...new Set(named.map((e) => e.contract.input_schema_sha256))].sort(),
      });
      out.drafts.push(draftContract(t));
      continue;
    }
    const conflicts = hintConflicts(t.annotations, match.contract);
    if (conflicts.length > 0) {
      out.hint_conflicts.push({ name: t.name, tool_contract_sha256: match.tool_contract_sha256, conflicts });
    }
    if (!match.permitted) {
      out.not_permitted.push(t.name);
      continue;
    }
    out.tools.push(raw as Record<string, unknown>);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// After the call: the execution observation's output, from the result

const CallToolResult = z.object({
  content: z.array(z.unknown()),
  isError: z.boolean().optional(),
});

/** The `result` of a `tools/call` response, given the response or the result itself. */
export function callResultOf(body: unknown): Record<string, unknown> | null {
  const result = isRecord(body) && isRecord(body.result) && !('content' in body) ? body.result : body;
  if (!isRecord(result) || !CallToolResult.safeParse(result).success) return null;
  return result;
}

/**
 * The output the execution report digests and the observation carries: the canonical JSON text
 * of the result less its `_meta` (transport metadata, not output). One text for both, so the
 * observation's payload digest is the execution's output digest.
 */
export function outputText(result: Record<string, unknown>): string {
  const { _meta: _ignored, ...output } = result;
  return canonicalize(output);
}

export function isErrorResult(result: Record<string, unknown>): boolean {
  return result.isError === true;
}
