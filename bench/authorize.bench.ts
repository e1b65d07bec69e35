/**
 * `npm run bench`: Writ's authorization as the service runs it against Cedar's evaluation of the
 * same decision, in one process and one run (method and results: docs/benchmarks.md).
 *
 * Writ side, per call: exactly what `POST /v1/authorize` does between reading the body and
 * storing the receipt. The body's bytes, strictly decoded with the service's body limits
 * (`decodeJsonBytes`, `readJson` in src/http/body.ts), parsed by the `AuthorizeRequest` zod
 * schema, a fresh invocation id drawn as the service draws it, then `decideAuthorization` (input
 * canonicalized and hashed, target derived, trusted state assembled, `authorizeToolCall` with
 * every check, the invocation and trusted-state digests, the receipt and its digest). zod runs
 * without its JIT, as on Workers (bench/zod-workers.ts). Storage is excluded: the
 * `AuthorizationState` is built once, as the tenant store returns it (contract, policy and grant
 * through `DocumentCache`, so parsed from their stored canonical text and deep-frozen). The
 * decision and the receipt are computed on every call, never cached.
 * Cedar side, per call: `statefulIsAuthorized` of `@cedar-policy/cedar-wasm` (nodejs build)
 * against a preparsed policy set (bench/cedar/policy.cedar), with and without request validation
 * against a preparsed schema (bench/cedar/schema.cedarschema). The request object is built once,
 * from the invocation Writ's entry point derived, outside the timed region: this is Cedar's
 * evaluation alone.
 *
 * Before anything is timed, both engines must reach the same decision for the lab baseline and
 * for every authorization-stage lab mutation, each expressed as the request body or stored state
 * the service would see. Not part of `npm test`: timings depend on the machine.
 */
import { zodJit } from './zod-workers.js';
import { hash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as cedar from '@cedar-policy/cedar-wasm/nodejs';
import { authorizeToolCall } from '../src/core/authorization/authorize.js';
import {
  type AuthorizationDecision,
  type AuthorizationState,
  AuthorizeRequest,
  decideAuthorization,
} from '../src/core/authorization/decide.js';
import {
  canonicalize,
  canonicalizeReference,
  digestOf,
  sha256Hex,
  sha256HexOfText,
  useSha256,
} from '../src/core/canonical/canonical.js';
import { authorizationBodyText, invocationText } from '../src/core/canonical/canonical-forms.js';
import { decodeJsonBytes, utf8Encode } from '../src/core/canonical/json.js';
import { contractDigest } from '../src/core/contracts/contract.js';
import { resolveTarget } from '../src/core/contracts/target.js';
import { type AuthorizationReceipt, type TrustedState } from '../src/core/model.js';
import { newId } from '../src/db/ids.js';
import { buildToolLoopFixture, LAB_CASES, LAB_IDS, type ToolLoopFixture } from '../src/lab/tool-loop.js';
import { decodeToolInvocation } from '../src/library/invocation.js';
import {
  BODY_LIMITS,
  type Scenario,
  baselineScenario,
  bodyBytes,
  storedState,
  tenantPolicySha,
} from './scenario.js';

const WARMUP = 5_000;
const ITERATIONS = 30_000;
const DENY_ITERATIONS = 10_000;
const BATCH = 50;
const BATCH_ROUNDS = 400;
const COMPONENT_ROUNDS = 200;

// The Worker hashes with the platform's native SHA-256 (node:crypto's one-shot `hash` under
// nodejs_compat), after the core checks it against known answers (src/worker.ts); the bench does
// the same. `WRIT_BENCH_HASH=noble` measures the portable path instead.
const hashImpl = process.env.WRIT_BENCH_HASH === 'noble' ? 'noble' : 'native';
if (hashImpl === 'native' && !useSha256((d) => hash('sha256', d, 'hex'))) {
  throw new Error('native sha-256 failed its known answers');
}

// ---------------------------------------------------------------------------------------------
// Writ: the service's entry point over state as the store returns it

/** One authorization as `POST /v1/authorize` performs it, from the body's bytes to the decision. */
function writEntryPoint(state: AuthorizationState, now: number) {
  return (bytes: Uint8Array): AuthorizationDecision => {
    const decoded = decodeJsonBytes(bytes, BODY_LIMITS);
    if (!decoded.ok) throw new Error(`body failed to decode: ${decoded.error.message}`);
    const request = AuthorizeRequest.safeParse(decoded.value);
    if (!request.success) throw new Error(`body failed to parse: ${request.error.message}`);
    const decided = decideAuthorization(request.data, state, { invocation_id: newId('invocation') }, now);
    if (!decided.ok) throw new Error(`decide failed: ${decided.error.message}`);
    return decided.value;
  };
}

/**
 * Each authorization-stage lab mutation as the service sees it: a changed stored grant, a newly
 * pinned contract named by the request, or a changed request body. A lab case added without an
 * entry here stops the bench rather than being skipped.
 */
function labScenario(id: string, f: ToolLoopFixture): { scenario: Scenario; violations: readonly string[] } {
  const base = baselineScenario(f);
  const mutated = LAB_CASES.find((c) => c.id === id)?.apply(buildToolLoopFixture());
  if (mutated === undefined) throw new Error(`lab case ${id} is missing`);
  const expected = LAB_CASES.find((c) => c.id === id)?.expected.violations ?? [];
  const { idempotency_key: _key, approval_id: _approval, ...bare } = base.body;
  switch (id) {
    case 'tool_denied':
    case 'capability_denied':
      return {
        scenario: { ...base, grant: { ...mutated.grant, policy_sha256: tenantPolicySha } },
        violations: expected,
      };
    case 'tenant_drift':
      // The service never lets a named tenant into the invocation (it stays the caller's); the
      // difference is its own violation, recorded beside the trusted one (decide.ts).
      return {
        scenario: { ...base, body: { ...base.body, tenant_id: mutated.invocation.tenant_id } },
        violations: ['named_tenant_mismatch'],
      };
    case 'contract_drift':
      // The store looks a contract up by the digest the request names, so a request can only
      // name the newly pinned release; the approval still binds the reviewed one. The lab's
      // `contract_mismatch` (invocation digest != pinned contract) cannot arise through the
      // entry point, which takes the invocation's contract digest from the stored row.
      return {
        scenario: {
          ...base,
          contract: mutated.contract,
          body: { ...base.body, tool_contract_sha256: contractDigest(mutated.contract) },
        },
        violations: ['approval_contract_mismatch'],
      };
    case 'missing_idempotency_key':
      return {
        scenario: { ...base, body: { ...bare, approval_id: LAB_IDS.approval } },
        violations: expected,
      };
    case 'missing_approval':
      return {
        scenario: { ...base, body: { ...bare, idempotency_key: LAB_IDS.idempotencyKey } },
        violations: expected,
      };
    case 'stale_approval_parameters':
      return {
        scenario: { ...base, body: { ...base.body, input: { ...f.input, to_generation: 6 } } },
        violations: expected,
      };
    default:
      throw new Error(`lab case ${id} has no service-side form in the bench`);
  }
}

const fixture = buildToolLoopFixture();
const now = fixture.now;
const baseline = baselineScenario(fixture);
const baselineState = storedState(baseline, now);
const writ = writEntryPoint(baselineState, now);
const allowBytes = bodyBytes(baseline.body);
const stale = labScenario('stale_approval_parameters', fixture).scenario;
const writDeny = writEntryPoint(storedState(stale, now), now);
const denyBytes = bodyBytes(stale.body);

// ---------------------------------------------------------------------------------------------
// Cedar

const cedarDir = path.join(import.meta.dirname, 'cedar');
const labPolicyText = readFileSync(path.join(cedarDir, 'policy.cedar'), 'utf8');
const schemaText = readFileSync(path.join(cedarDir, 'schema.cedarschema'), 'utf8');
const entities = JSON.parse(readFileSync(path.join(cedarDir, 'entities.json'), 'utf8')) as cedar.Entities;

// The policy names the lab's digests literally; a drifted fixture must fail here, not time a deny.
for (const [name, digest] of [
  ['policy', fixture.policySha256],
  ['contract', contractDigest(fixture.contract)],
] as const) {
  if (!labPolicyText.includes(`"${digest}"`)) {
    throw new Error(`bench/cedar/policy.cedar does not name the lab ${name} digest ${digest}`);
  }
}
// The tenant's policy in force, as in the Writ state above.
const policyText = labPolicyText.replaceAll(fixture.policySha256, tenantPolicySha);

function expectParsed(what: string, a: cedar.CheckParseAnswer): void {
  if (a.type !== 'success') throw new Error(`${what}: ${a.errors.map((e) => e.message).join('; ')}`);
}
expectParsed('policy set', cedar.preparsePolicySet('writ', { staticPolicies: policyText }));
expectParsed('schema', cedar.preparseSchema('writ', schemaText));

/**
 * The Cedar request for the invocation and trusted state Writ's entry point derived: identities,
 * time, key, approval and the trusted-state flags in the context.
 */
function cedarCall(
  d: Pick<AuthorizationDecision, 'invocation' | 'trusted'>,
  effect: string,
  opts: { validated: boolean; policySet?: string; entities?: cedar.Entities; contextTenant?: string },
): cedar.StatefulAuthorizationCall {
  const inv = d.invocation;
  const t = inv.target.attributes;
  const context: cedar.Context = {
    tenant_id: opts.contextTenant ?? inv.tenant_id,
    principal_id: inv.principal_id,
    policy_sha256: inv.policy_sha256,
    tool_contract_sha256: inv.tool_contract_sha256,
    input_sha256: inv.input_sha256,
    input_bytes: inv.input_bytes,
    effect,
    now_unix_ms: now,
    contract_quarantined: d.trusted.contract_quarantined,
    grant_revoked: d.trusted.grant_revoked,
    principal_revoked: d.trusted.principal_revoked,
    approval_unusable: d.trusted.approval_unusable,
    run_violations: [...d.trusted.run_violations],
  };
  // Optional attributes are absent, never null: Cedar has no null.
  if (inv.idempotency_key !== null) context.idempotency_key = inv.idempotency_key;
  if (inv.approval !== null) {
    const { first_approver_principal_id: first, ...one } = inv.approval;
    context.approval = first === undefined ? one : { ...one, first_approver_principal_id: first };
  }
  const call: cedar.StatefulAuthorizationCall = {
    principal: { type: 'Writ::Principal', id: inv.principal_id },
    action: { type: 'Writ::Action', id: 'execute_rollback' },
    resource: { type: 'Writ::Deployment', id: `${inv.tenant_id}/${t.service ?? ''}/${t.environment ?? ''}` },
    context,
    preparsedPolicySetId: opts.policySet ?? 'writ',
    entities: opts.entities ?? entities,
  };
  if (opts.validated) {
    call.preparsedSchemaName = 'writ';
    call.validateRequest = true;
  }
  return call;
}

function cedarDecide(call: cedar.StatefulAuthorizationCall): cedar.Decision {
  const answer = cedar.statefulIsAuthorized(call);
  if (answer.type !== 'success') {
    throw new Error(`cedar failed: ${answer.errors.map((e) => e.message).join('; ')}`);
  }
  const errors = answer.response.diagnostics.errors;
  if (errors.length > 0)
    throw new Error(`cedar policy errors: ${errors.map((e) => e.error.message).join('; ')}`);
  return answer.response.decision;
}

// ---------------------------------------------------------------------------------------------
// Agreement: the baseline and every authorization-stage lab mutation, before any timing

/**
 * What a scenario changes on the Cedar side when it is not in the request: the grant is the
 * permit policy (tool_denied), the pinned contract digest is a policy literal (contract_drift),
 * and held capabilities are principal attributes (capability_denied).
 */
function cedarSideOf(
  id: string,
  s: Scenario,
): { policySet?: string; entities?: cedar.Entities; contextTenant?: string } {
  switch (id) {
    case 'tenant_drift':
      // Writ never lets a named tenant into the invocation (it is only recorded and compared);
      // a Cedar caller passes the tenant the request claims as context, so that is what it sees.
      return s.body.tenant_id === undefined ? {} : { contextTenant: s.body.tenant_id };
    case 'tool_denied': {
      const text = policyText.replace(
        'Writ::Action::"execute_rollback"',
        `Writ::Action::"${s.grant.allowed_tools[0] ?? 'none'}"`,
      );
      expectParsed(
        'tool_denied policy set',
        cedar.preparsePolicySet('writ-tool-denied', { staticPolicies: text }),
      );
      return { policySet: 'writ-tool-denied' };
    }
    case 'contract_drift': {
      const text = policyText.replace(contractDigest(fixture.contract), contractDigest(s.contract));
      expectParsed(
        'contract_drift policy set',
        cedar.preparsePolicySet('writ-contract-drift', { staticPolicies: text }),
      );
      return { policySet: 'writ-contract-drift' };
    }
    case 'capability_denied': {
      const held = s.grant.capabilities.map((c) => c.capability);
      return {
        entities: entities.map((e) =>
          uidOf(e).type === 'Writ::Principal' ? { ...e, attrs: { ...e.attrs, capabilities: held } } : e,
        ),
      };
    }
    default:
      return {};
  }
}

function uidOf(e: cedar.EntityJson): cedar.TypeAndId {
  return '__entity' in e.uid ? e.uid.__entity : e.uid;
}

interface Agreement {
  readonly id: string;
  readonly writ: string;
  readonly cedar: string;
}

const agreements: Agreement[] = [];
function agree(id: string, s: Scenario, want: 'allow' | 'deny', violations: readonly string[]): void {
  const decision = writEntryPoint(storedState(s, now), now)(bodyBytes(s.body));
  const body = decision.receipt.body;
  const w = body.decision === 'authorized' ? 'allow' : 'deny';
  const side = cedarSideOf(id, s);
  const validated = cedarDecide(cedarCall(decision, s.contract.effect, { validated: true, ...side }));
  const plain = cedarDecide(cedarCall(decision, s.contract.effect, { validated: false, ...side }));
  if (w !== want || validated !== want || plain !== want) {
    throw new Error(`${id}: decisions disagree (writ ${w}, cedar ${validated}/${plain}, expected ${want})`);
  }
  if (body.violations.join(',') !== violations.join(',')) {
    throw new Error(`${id}: writ violations ${body.violations.join(',')}, expected ${violations.join(',')}`);
  }
  agreements.push({
    id,
    writ: w === 'allow' ? 'allow' : `deny (${body.violations.join(',')})`,
    cedar: validated,
  });
}

agree('baseline', baseline, 'allow', []);
// Execution-stage cases (rejected, reconciliation_required) verify an observation: no Cedar analogue.
for (const c of LAB_CASES) {
  if (c.expected.class !== 'denied') continue;
  const { scenario, violations } = labScenario(c.id, buildToolLoopFixture());
  agree(c.id, scenario, 'deny', violations);
}

// ---------------------------------------------------------------------------------------------
// Timing

interface Sample {
  readonly name: string;
  readonly run: () => unknown;
  readonly ns: number[];
}

let sink = 0;
function consume(v: unknown): void {
  // Keeps every result observable so no call can be optimized away.
  if (typeof v === 'string') sink ^= v.length;
  else if (typeof v === 'object' && v !== null) sink ^= 1;
}

/**
 * Round-robin over the samples, each call timed on its own with process.hrtime.bigint(). The
 * starting sample rotates every round so no side always runs first (or right after a GC).
 */
function interleave(samples: readonly Sample[], warmup: number, iterations: number): void {
  const n = samples.length;
  for (let i = 0; i < warmup; i++) for (const s of samples) consume(s.run());
  for (let i = 0; i < iterations; i++) {
    for (let k = 0; k < n; k++) {
      const s = samples[(i + k) % n] as Sample;
      const t0 = process.hrtime.bigint();
      const r = s.run();
      const t1 = process.hrtime.bigint();
      consume(r);
      s.ns.push(Number(t1 - t0));
    }
  }
}

interface BatchSample {
  readonly name: string;
  readonly run: () => unknown;
  /** Wall time per call of each batch, ns. */
  readonly wall: number[];
  /** Process CPU time (user + system) per call of each batch, ns. */
  readonly cpu: number[];
}

/**
 * Round-robin over the samples in batches of BATCH calls, each batch timed as a whole with
 * process.hrtime.bigint() and process.cpuUsage(). CPU time does not advance while the process is
 * descheduled, so it is the steadier figure on a shared machine (it also counts V8's background
 * GC and compiler threads, for both sides alike).
 */
function interleaveBatches(samples: readonly BatchSample[], rounds: number): void {
  const n = samples.length;
  for (let i = 0; i < rounds; i++) {
    for (let k = 0; k < n; k++) {
      const s = samples[(i + k) % n] as BatchSample;
      const c0 = process.cpuUsage();
      const t0 = process.hrtime.bigint();
      for (let r = 0; r < BATCH; r++) consume(s.run());
      const t1 = process.hrtime.bigint();
      const c = process.cpuUsage(c0);
      s.wall.push(Number(t1 - t0) / BATCH);
      s.cpu.push(((c.user + c.system) * 1000) / BATCH);
    }
  }
}

interface Stats {
  readonly median: number;
  readonly p99: number;
  readonly mean: number;
}

function stats(ns: readonly number[]): Stats {
  const s = [...ns].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))] as number;
  return { median: q(0.5), p99: q(0.99), mean: s.reduce((a, b) => a + b, 0) / s.length };
}

const calls = (() => {
  const allowDecision = writ(allowBytes);
  const denyDecision = writDeny(denyBytes);
  const effect = baseline.contract.effect;
  return {
    allowValidated: cedarCall(allowDecision, effect, { validated: true }),
    allowPlain: cedarCall(allowDecision, effect, { validated: false }),
    denyValidated: cedarCall(denyDecision, effect, { validated: true }),
    denyPlain: cedarCall(denyDecision, effect, { validated: false }),
  };
})();

// Timer overhead: an empty region measured the same way (reported, not subtracted).
const empty: Sample = { name: 'empty', run: () => undefined, ns: [] };
interleave([empty], 1_000, 20_000);
const timerOverhead = stats(empty.ns).median;

const allow: Sample[] = [
  { name: 'writ', run: () => writ(allowBytes), ns: [] },
  { name: 'cedar_validated', run: () => cedarDecide(calls.allowValidated), ns: [] },
  { name: 'cedar_plain', run: () => cedarDecide(calls.allowPlain), ns: [] },
];
interleave(allow, WARMUP, ITERATIONS);

const deny: Sample[] = [
  { name: 'writ', run: () => writDeny(denyBytes), ns: [] },
  { name: 'cedar_validated', run: () => cedarDecide(calls.denyValidated), ns: [] },
  { name: 'cedar_plain', run: () => cedarDecide(calls.denyPlain), ns: [] },
];
interleave(deny, WARMUP / 5, DENY_ITERATIONS);

const allowBatched: BatchSample[] = allow.map((s) => ({ name: s.name, run: s.run, wall: [], cpu: [] }));
interleaveBatches(allowBatched, BATCH_ROUNDS);

// Where Writ's time goes: each step alone on the same inputs (not interleaved with Cedar;
// indicative). Rows marked "not used here" are references the hot path is proven against; the
// library rows are the previous bench's Writ side, kept for comparison.
const decodedBody = decodeJsonBytes(allowBytes, BODY_LIMITS);
if (!decodedBody.ok) throw new Error('body failed to decode');
const request = AuthorizeRequest.parse(decodedBody.value);
const decision = writ(allowBytes);
const pinned = baselineState.contract;
const storedGrant = baselineState.grants[0]?.grant;
if (pinned === null || storedGrant === undefined) throw new Error('baseline state is incomplete');
const receiptBody = decision.receipt.body;
const labText = JSON.stringify(fixture.invocation);
const libraryPath = (): AuthorizationReceipt => {
  const inv = decodeToolInvocation(labText);
  if (!inv.ok) throw new Error('library decode failed');
  const r = authorizeToolCall(pinned.contract, storedGrant, inv.value, now);
  if (!r.ok) throw new Error('library authorize failed');
  return r.value;
};
const trustedCopy = (): TrustedState => ({ ...decision.trusted });
const components: BatchSample[] = (
  [
    ['entry point, all of it (body bytes to decision)', () => writ(allowBytes)],
    ['  decodeJsonBytes (body, service limits)', () => decodeJsonBytes(allowBytes, BODY_LIMITS)],
    [
      `  AuthorizeRequest zod parse (${zodJit ? 'zod jit' : 'jitless, as on Workers'})`,
      () => AuthorizeRequest.safeParse(decodedBody.value),
    ],
    ['  newId(invocation)', () => newId('invocation')],
    [
      '  decideAuthorization, all of it',
      () =>
        decideAuthorization(
          request,
          baselineState,
          { invocation_id: decision.invocation.invocation_id },
          now,
        ),
    ],
    ['    canonicalize(input) + utf8 + sha256', () => sha256Hex(utf8Encode(canonicalize(request.input)))],
    ['    resolveTarget (deriveTarget)', () => resolveTarget(pinned.contract, request.input, request.target)],
    [
      '    authorizeToolCall (decided invocation, trusted)',
      () => authorizeToolCall(pinned.contract, storedGrant, decision.invocation, now, decision.trusted),
    ],
    [
      '      invocation digest (canonicalize + sha256)',
      () => sha256HexOfText(invocationText(decision.invocation)),
    ],
    ['      trusted state digest (fresh object)', () => digestOf(trustedCopy())],
    [
      '      receipt digest (body text + sha256)',
      () => sha256HexOfText(authorizationBodyText(receiptBody, false)),
    ],
    ['        canonicalize(receipt body) (not used here)', () => canonicalize(receiptBody)],
    ['        reference serializer (not used here)', () => canonicalizeReference(receiptBody)],
    ['library path, not used by the service (old bench)', libraryPath],
    ['  decodeToolInvocation (library, text to invocation)', () => decodeToolInvocation(labText)],
  ] as const
).map(([name, run]) => ({ name, run, wall: [], cpu: [] }));
for (const c of components) for (let i = 0; i < 2_000; i++) consume(c.run());
interleaveBatches(components, COMPONENT_ROUNDS);

// ---------------------------------------------------------------------------------------------
// Report

const us = (ns: number) => `${(ns / 1000).toFixed(2)} µs`;
const times = (r: number) => `${r.toFixed(2)}x`;
const thousands = (n: number) => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
const W = 52;
const cols = (label: string, a: string, b: string, c: string) =>
  `${label.padEnd(W)}${a.padStart(12)}${b.padStart(12)}${c.padStart(12)}`;
const WRIT_LABEL = 'writ  body -> decode -> parse -> decide + receipt';

function section(title: string, samples: readonly Sample[]): string[] {
  const s = Object.fromEntries(samples.map((x) => [x.name, stats(x.ns)])) as Record<
    'writ' | 'cedar_validated' | 'cedar_plain',
    Stats
  >;
  const ratio = (label: string, c: Stats) =>
    cols(label, times(c.median / s.writ.median), times(c.p99 / s.writ.p99), times(c.mean / s.writ.mean));
  return [
    title,
    cols('', 'median', 'p99', 'mean'),
    cols(WRIT_LABEL, us(s.writ.median), us(s.writ.p99), us(s.writ.mean)),
    cols(
      'cedar statefulIsAuthorized, schema-validated',
      us(s.cedar_validated.median),
      us(s.cedar_validated.p99),
      us(s.cedar_validated.mean),
    ),
    cols(
      'cedar statefulIsAuthorized, no schema',
      us(s.cedar_plain.median),
      us(s.cedar_plain.p99),
      us(s.cedar_plain.mean),
    ),
    ratio('ratio cedar (schema-validated) / writ', s.cedar_validated),
    ratio('ratio cedar (no schema) / writ', s.cedar_plain),
    '',
  ];
}

function batchSection(title: string, samples: readonly BatchSample[]): string[] {
  const s = Object.fromEntries(
    samples.map((x) => [x.name, { wall: stats(x.wall), cpu: stats(x.cpu), best: Math.min(...x.wall) }]),
  ) as Record<'writ' | 'cedar_validated' | 'cedar_plain', { wall: Stats; cpu: Stats; best: number }>;
  const line = (label: string, x: { wall: Stats; cpu: Stats; best: number }) =>
    cols(label, us(x.wall.median), us(x.cpu.median), us(x.best));
  const ratio = (label: string, c: { wall: Stats; cpu: Stats; best: number }) =>
    cols(
      label,
      times(c.wall.median / s.writ.wall.median),
      times(c.cpu.median / s.writ.cpu.median),
      times(c.best / s.writ.best),
    );
  return [
    title,
    cols('', 'wall', 'cpu', 'best batch'),
    line(WRIT_LABEL, s.writ),
    line('cedar statefulIsAuthorized, schema-validated', s.cedar_validated),
    line('cedar statefulIsAuthorized, no schema', s.cedar_plain),
    ratio('ratio cedar (schema-validated) / writ', s.cedar_validated),
    ratio('ratio cedar (no schema) / writ', s.cedar_plain),
    '',
  ];
}

const cpus = os.cpus();
const lines = [
  'Writ vs Cedar: one rollback authorization (the tool-loop lab baseline: acme, execute_rollback, api/production)',
  `node ${process.version}, cedar-wasm ${cedar.getCedarSDKVersion()} (Cedar ${cedar.getCedarVersion()}), ` +
    `${cpus.length} CPUs (${cpus[0]?.model ?? 'unknown'}), ${os.platform()} ${os.arch()}, load average ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  `writ: POST /v1/authorize entry point (decodeJsonBytes, AuthorizeRequest, decideAuthorization), ` +
    `body ${allowBytes.byteLength} bytes; zod ${zodJit ? 'with its jit' : 'jitless (as on Workers)'}; ` +
    `sha-256 ${hashImpl === 'native' ? 'node:crypto hash (native)' : '@noble/hashes'}`,
  '',
  'decisions agree before timing (writ entry point; cedar: schema-validated and no schema alike)',
  ...agreements.map((a) => `  ${a.id.padEnd(28)}writ ${a.writ.padEnd(52)}cedar ${a.cedar}`),
  '',
  `method: warm-up ${thousands(WARMUP)} rounds, then ${thousands(ITERATIONS)} interleaved rounds ` +
    `(${thousands(DENY_ITERATIONS)} for deny), each call timed alone with process.hrtime.bigint(), ` +
    `starting side rotated every round; timer overhead ${us(timerOverhead)} median, included`,
  '',
  ...section('allow (lab baseline)', allow),
  ...section('deny (stale approval parameters)', deny),
  ...batchSection(
    `allow, interleaved batches of ${BATCH} calls (${thousands(BATCH * BATCH_ROUNDS)} calls per side): median per call`,
    allowBatched,
  ),
  `writ components (interleaved batches of ${BATCH} calls x ${COMPONENT_ROUNDS}): per call`,
  cols('', 'wall', 'cpu', 'best batch'),
  ...components.map((c) =>
    cols(c.name, us(stats(c.wall).median), us(stats(c.cpu).median), us(Math.min(...c.wall))),
  ),
  '',
];
console.log(lines.join('\n'));

// The target is judged on the stricter figure: per-call medians against the fastest Cedar variant.
const target = 5;
const fastestOver = (writ: number[], validated: number[], plain: number[]) =>
  Math.min(stats(validated).median, stats(plain).median) / stats(writ).median;
const perCall = fastestOver(allow[0]!.ns, allow[1]!.ns, allow[2]!.ns);
const batchedCpu = fastestOver(allowBatched[0]!.cpu, allowBatched[1]!.cpu, allowBatched[2]!.cpu);
console.log(
  `target: writ's authorize entry point (body to decision and receipt) at least ${target}x faster than cedar ` +
    `evaluation alone (allow, fastest cedar variant): ${times(perCall)} per-call median, ${times(batchedCpu)} ` +
    `batched cpu median; ${perCall >= target ? 'met' : 'NOT met'}`,
);
if (sink === -1) console.log('');
