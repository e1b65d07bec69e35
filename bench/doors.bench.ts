/**
 * `npm run bench:doors`: what the standard doors add on top of the decision, in one process and
 * one run (method and results: docs/benchmarks.md "Doors").
 *
 * Four paths, each from the request body's bytes to the answer's text, each through the real
 * door code and the real services over in-memory ports (storage excluded, as in `npm run bench`),
 * each through the keyed entry point its HTTP route calls (one batch: key, state, tool pins):
 * - `/v1`: strict decode, `AuthorizeRequest`, `authorizeByKey` (the service: the keyed read,
 *   `decideAuthorization`, commit through the port), `{decision, violations, receipt}` serialized.
 * - MCP: strict decode, `translateToolsCall` (envelope, revision, Writ `_meta`, `forward`),
 *   `authorizeNamedToolByKey` (parse, keyed read with the tool's pins, binding, `authorize`'s
 *   decide and commit), the answer `{decision: "allow", receipt, forward}` serialized.
 * - AuthZEN: strict decode, `acceptEvaluation` (the lenient envelope), `translateEvaluation`,
 *   `authorizeNamedToolByKey`, the answer `{decision: true, context: {receipt_sha256, receipt}}`.
 * - Docker MCP Gateway `before`: strict decode, `translateBefore`, `authorizeNamedToolByKey`, the
 *   empty answer.
 * The same lab invocation (the baseline: an approved write, authorized) goes through each; the
 * platform port returns the same `AuthorizationState` the main bench uses (for the doors, with the
 * tool's one pinned row beside it). Every call decides afresh (new invocation id, new receipt).
 * Timed in rotating batches (wall and process CPU time per call); the ratio of each door's
 * median to `/v1`'s is the figure the goal (within 10 %) is about. Not part of `npm test`.
 */
import { zodJit } from './zod-workers.js';
import { hash } from 'node:crypto';
import os from 'node:os';
import { AuthorizeRequest } from '../src/core/authorization/decide.js';
import { deriveTarget } from '../src/core/contracts/contract.js';
import { targetId } from '../src/core/contracts/target.js';
import { useSha256 } from '../src/core/canonical/canonical.js';
import { decodeJsonBytes, utf8Encode } from '../src/core/canonical/json.js';
import { acceptEvaluation, translateEvaluation } from '../src/http/authzen/translate.js';
import { translateBefore } from '../src/http/mcp/interceptor.js';
import { translateToolsCall } from '../src/http/mcp/translate.js';
import { LAB_IDS, buildToolLoopFixture } from '../src/lab/tool-loop.js';
import { authorizeByKey } from '../src/services/authorize.js';
import type { TenantContext } from '../src/services/context.js';
import type { PinnedContract, PlatformStore, PrincipalRow, TenantStore } from '../src/services/ports.js';
import { type KeyedNamedToolDoor, authorizeNamedToolByKey } from '../src/services/tool-call.js';
import { BODY_LIMITS, baselineScenario, bodyBytes, storedState } from './scenario.js';

const BATCH = 20;
const WARMUP_ROUNDS = 200;
const ROUNDS = Math.max(100, Number(process.env.BENCH_DOORS_ROUNDS ?? 1500));

// Native SHA-256 as the Worker uses it (see bench/authorize.bench.ts).
if (!useSha256((d) => hash('sha256', d, 'hex'))) throw new Error('native sha-256 failed its known answers');

// ---------------------------------------------------------------------------------------------
// One scenario, four spellings

const fixture = buildToolLoopFixture();
const now = fixture.now;
const scenario = baselineScenario(fixture);
const state = storedState(scenario, now);
const b = scenario.body;
if (state.contract === null) throw new Error('the baseline state has no contract');
const toolName = state.contract.contract.tool_name;
if (b.idempotency_key === undefined || b.approval_id === undefined) throw new Error('baseline body changed');

function benchTargetId(): string {
  const derived = deriveTarget(pinned.contract, b.input);
  if (!derived.ok) throw new Error('the baseline input names no target');
  return targetId(derived.value);
}

const pinned: PinnedContract = {
  tool_contract_sha256: state.contract.tool_contract_sha256,
  contract: state.contract.contract,
  pinned_by: LAB_IDS.principal,
  pinned_at_unix_ms: 0,
  quarantined_at_unix_ms: null,
  quarantine_reason: null,
};
// Only what the authorize path calls; anything else would throw, which the checks below would see.
const store = {
  tenant_id: LAB_IDS.tenant,
  loadAuthorizationState: () => Promise.resolve(state),
  commitAuthorization: () => Promise.resolve({ ok: true }),
  contractsForTool: () => Promise.resolve([pinned]),
} as unknown as TenantStore;
const ctx: TenantContext = {
  caller: {
    principal_id: LAB_IDS.principal,
    tenant_id: LAB_IDS.tenant,
    roles: ['agent'],
    executor_release: null,
  },
  store,
  operations: {} as TenantContext['operations'],
  shard: 0,
  now,
  log: () => undefined,
};

// The keyed read as the D1 adapter answers it: the key's principal with the state in one batch.
const principal: PrincipalRow = {
  principal_id: ctx.caller.principal_id,
  tenant_id: ctx.caller.tenant_id,
  name: 'bench agent',
  roles: ['agent'],
  executor_release: null,
  created_at_unix_ms: 0,
  revoked_at_unix_ms: null,
};
const doorState = { ...state, contract: null };
const platform = {
  authorizationByKey: () => Promise.resolve({ principal, state }),
  namedToolAuthorizationByKey: () => Promise.resolve({ principal, pins: [pinned], state: doorState }),
} as unknown as PlatformStore;
const door: KeyedNamedToolDoor = {
  platform,
  open: () => ctx,
  takeWriteToken: () => Promise.resolve(),
  authenticate: () => Promise.reject(new Error('the bench never refuses before the read')),
};
const key = { shard: 0, key_sha256: '0'.repeat(64) };

const v1Bytes = bodyBytes(b);
const mcpBytes = utf8Encode(
  JSON.stringify({
    jsonrpc: '2.0',
    id: 7,
    method: 'tools/call',
    params: {
      name: toolName,
      arguments: b.input,
      _meta: {
        progressToken: 'p-1',
        'dev.writ/run_id': b.run_id,
        'dev.writ/idempotency_key': b.idempotency_key,
        'dev.writ/approval_id': b.approval_id,
      },
    },
  }),
);
const authzenBytes = utf8Encode(
  JSON.stringify({
    subject: { type: 'agent', id: LAB_IDS.principal },
    action: { name: toolName },
    // The id of the target the input names (a different one is refused: docs/authzen.md).
    resource: { type: state.contract.contract.resource.type, id: benchTargetId() },
    context: {
      input: b.input,
      run_id: b.run_id,
      idempotency_key: b.idempotency_key,
      approval_id: b.approval_id,
    },
  }),
);
const dockerBytes = utf8Encode(
  JSON.stringify({
    Session: {},
    Params: {
      _meta: {
        'dev.writ/idempotency_key': b.idempotency_key,
        'dev.writ/approval_id': b.approval_id,
        progressToken: 'p-1',
      },
      name: toolName,
      arguments: b.input,
    },
    Extra: null,
  }),
);

function decode(bytes: Uint8Array) {
  const d = decodeJsonBytes(bytes, BODY_LIMITS);
  if (!d.ok) throw new Error(d.error.message);
  return d.value;
}

const NO_HEADERS = { method: undefined, name: undefined, protocolVersion: undefined };

interface Answer {
  readonly authorized: boolean;
  readonly input_sha256: string;
  readonly text: string;
}

const paths: Record<string, () => Promise<Answer>> = {
  '/v1': async () => {
    const r = AuthorizeRequest.safeParse(decode(v1Bytes));
    if (!r.success) throw new Error(r.error.message);
    const { decision, authorized } = await authorizeByKey(door, key, r.data);
    const { receipt } = decision;
    const text = JSON.stringify({
      decision: receipt.body.decision,
      violations: receipt.body.violations,
      receipt,
    });
    return { authorized, input_sha256: receipt.body.input_sha256, text };
  },
  mcp: async () => {
    const t = translateToolsCall(decode(mcpBytes), NO_HEADERS);
    if (!t.ok) throw new Error(t.error.error.message);
    const { decision, authorized } = await authorizeNamedToolByKey(door, key, t);
    const { receipt } = decision;
    const text = JSON.stringify({ decision: 'allow', receipt, forward: t.forward });
    return { authorized, input_sha256: receipt.body.input_sha256, text };
  },
  authzen: async () => {
    const e = acceptEvaluation(decode(authzenBytes));
    if (!e.success) throw new Error(e.error.message);
    const t = translateEvaluation(e.data);
    if (!t.ok) throw new Error(t.message);
    const { decision, authorized } = await authorizeNamedToolByKey(door, key, t);
    const { receipt } = decision;
    const text = JSON.stringify({ decision: true, context: { receipt_sha256: receipt.sha256, receipt } });
    return { authorized, input_sha256: receipt.body.input_sha256, text };
  },
  docker: async () => {
    const t = translateBefore(decode(dockerBytes), b.run_id);
    if (!t.ok) throw new Error(t.error.error.message);
    const { decision, authorized } = await authorizeNamedToolByKey(door, key, t.call);
    return { authorized, input_sha256: decision.receipt.body.input_sha256, text: '' };
  },
};

// The translation alone, without the decision: what each door adds before it calls the service.
const translations: Record<string, () => unknown> = {
  '/v1': () => AuthorizeRequest.safeParse(decode(v1Bytes)),
  mcp: () => translateToolsCall(decode(mcpBytes), NO_HEADERS),
  authzen: () => {
    const e = acceptEvaluation(decode(authzenBytes));
    return e.success ? translateEvaluation(e.data) : null;
  },
  docker: () => translateBefore(decode(dockerBytes), b.run_id),
};

// ---------------------------------------------------------------------------------------------
// Every door must reach the same decision on the same input before anything is timed.

const names = Object.keys(paths);
const first = await paths['/v1']!();
if (!first.authorized) throw new Error('/v1 did not authorize the baseline');
for (const name of names) {
  const a = await paths[name]!();
  if (!a.authorized || a.input_sha256 !== first.input_sha256) throw new Error(`${name} decided differently`);
}

// ---------------------------------------------------------------------------------------------
// Timing

let sink = 0;
interface Series {
  wall: number[];
  cpu: number[];
}

async function timeRotating(
  run: Record<string, () => unknown>,
  rounds: number,
  warmup: number,
): Promise<Record<string, Series>> {
  const series: Record<string, Series> = {};
  for (const n of names) series[n] = { wall: [], cpu: [] };
  for (let i = 0; i < warmup + rounds; i++) {
    for (let k = 0; k < names.length; k++) {
      const name = names[(i + k) % names.length] as string;
      const f = run[name] as () => unknown;
      const c0 = process.cpuUsage();
      const t0 = process.hrtime.bigint();
      for (let r = 0; r < BATCH; r++) {
        const v = await f();
        sink ^= typeof v === 'object' && v !== null ? 1 : 0;
      }
      const t1 = process.hrtime.bigint();
      const c = process.cpuUsage(c0);
      if (i < warmup) continue;
      series[name]!.wall.push(Number(t1 - t0) / BATCH);
      series[name]!.cpu.push(((c.user + c.system) * 1000) / BATCH);
    }
  }
  return series;
}

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((x, y) => x - y);
  return s[Math.floor(s.length / 2)] as number;
};
const us = (ns: number) => `${(ns / 1000).toFixed(2)} µs`;
const pct = (r: number) => `${r >= 1 ? '+' : ''}${((r - 1) * 100).toFixed(1)} %`;

const full = await timeRotating(paths, ROUNDS, WARMUP_ROUNDS);
const alone = await timeRotating(translations, ROUNDS, WARMUP_ROUNDS);

console.log(
  `bench:doors  node ${process.version}, ${os.cpus().length} cpus, load ${os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}, zod ${zodJit ? 'jit' : 'jitless (as on Workers)'}, ${ROUNDS} rounds x ${BATCH} calls`,
);
const v1Wall = median(full['/v1']!.wall);
const v1Cpu = median(full['/v1']!.cpu);
console.log('\npath      per call (wall)  vs /v1     per call (cpu)  vs /v1     translation alone');
for (const n of names) {
  const w = median(full[n]!.wall);
  const c = median(full[n]!.cpu);
  console.log(
    `${n.padEnd(9)} ${us(w).padStart(14)}  ${pct(w / v1Wall).padStart(8)}  ${us(c).padStart(14)}  ${pct(
      c / v1Cpu,
    ).padStart(8)}  ${us(median(alone[n]!.wall)).padStart(12)}`,
  );
}
if (sink === -1) console.log(sink);
