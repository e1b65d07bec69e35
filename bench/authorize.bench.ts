/**
 * `npm run bench`: Writ's full per-call authorization against Cedar's evaluation of the same
 * decision, in one process and one run (method and results: docs/benchmarks.md).
 *
 * Writ side, per call: strict decode of the invocation JSON text (`decodeJsonText`), the
 * `ToolInvocation` zod parse, `authorizeToolCall` (contract and grant checks, every violation
 * check, the invocation and trusted-state digests, the receipt and its digest). The contract and
 * grant are pinned (deep-frozen) as trusted stored state is, so their digests are cached by
 * identity; the decision and the receipt are computed on every call, never cached.
 * Cedar side, per call: `statefulIsAuthorized` of `@cedar-policy/cedar-wasm` (nodejs build)
 * against a preparsed policy set (bench/cedar/policy.cedar), with and without request validation
 * against a preparsed schema (bench/cedar/schema.cedarschema). The request object is built once,
 * outside the timed region: this is Cedar's evaluation alone.
 *
 * Before anything is timed, both engines must reach the same decision for the lab baseline and
 * for every authorization-stage lab mutation. Not part of `npm test`: timings depend on the machine.
 */
import { hash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as cedar from '@cedar-policy/cedar-wasm/nodejs';
import { authorizeToolCall, validateGrant } from '../src/core/authorization/authorize.js';
import {
  canonicalize,
  canonicalizeReference,
  digestOf,
  sha256HexOfText,
  useSha256,
} from '../src/core/canonical/canonical.js';
import { contractDigest, pinContract, validateContract } from '../src/core/contracts/contract.js';
import {
  authorizationBodyText,
  invocationText,
  isValidatedInvocation,
} from '../src/core/canonical/canonical-forms.js';
import { deepFreeze } from '../src/core/canonical/digest-cache.js';
import { decodeToolInvocation, parseToolInvocation } from '../src/library/invocation.js';
import { DEFAULT_JSON_LIMITS, decodeJsonText, parseReference } from '../src/core/canonical/json.js';
import { buildToolLoopFixture, LAB_CASES, type LoopInputs } from '../src/lab/tool-loop.js';
import {
  type AuthorizationReceipt,
  EMPTY_TRUSTED_STATE,
  type ToolContract,
  type ToolGrant,
  ToolInvocation,
} from '../src/core/model.js';

const WARMUP = 5_000;
const ITERATIONS = 30_000;
const DENY_ITERATIONS = 10_000;
const BATCH = 50;
const BATCH_ROUNDS = 400;
const COMPONENT_ROUNDS = 200;

// ---------------------------------------------------------------------------------------------
// Writ

/** One Writ authorization as the edge service performs it, from the request's JSON text. */
function writAuthorizer(contract: ToolContract, grant: ToolGrant, now: number) {
  return (text: string): AuthorizationReceipt => {
    const invocation = decodeToolInvocation(text);
    if (!invocation.ok) throw new Error(`invocation failed to decode: ${invocation.error.message}`);
    const receipt = authorizeToolCall(contract, grant, invocation.value, now);
    if (!receipt.ok) throw new Error(`authorize failed: ${receipt.error.message}`);
    return receipt.value;
  };
}

const fixture = buildToolLoopFixture();
// The Worker hashes with the platform's native SHA-256 (node:crypto's one-shot `hash` under
// nodejs_compat), after the core checks it against known answers (src/worker.ts); the bench does
// the same. `WRIT_BENCH_HASH=noble` measures the portable path instead.
const hashImpl = process.env.WRIT_BENCH_HASH === 'noble' ? 'noble' : 'native';
if (hashImpl === 'native' && !useSha256((d) => hash('sha256', d, 'hex'))) {
  throw new Error('native sha-256 failed its known answers');
}
console.log(
  `sha-256 implementation: ${hashImpl === 'native' ? 'node:crypto hash (native)' : '@noble/hashes'}`,
);
const now = fixture.now;
// Pinned as trusted stored state would be: immutable, so digests are cached by identity.
const contract = pinContract(fixture.contract);
const grant = deepFreeze(fixture.grant);
const writ = writAuthorizer(contract, grant, now);

// ---------------------------------------------------------------------------------------------
// Cedar

const cedarDir = path.join(import.meta.dirname, 'cedar');
const policyText = readFileSync(path.join(cedarDir, 'policy.cedar'), 'utf8');
const schemaText = readFileSync(path.join(cedarDir, 'schema.cedarschema'), 'utf8');
const entities = JSON.parse(readFileSync(path.join(cedarDir, 'entities.json'), 'utf8')) as cedar.Entities;

// The policy names the lab's digests literally; a drifted fixture must fail here, not time a deny.
for (const [name, digest] of [
  ['policy', fixture.policySha256],
  ['contract', contractDigest(contract)],
] as const) {
  if (!policyText.includes(`"${digest}"`)) {
    throw new Error(`bench/cedar/policy.cedar does not name the lab ${name} digest ${digest}`);
  }
}

function expectParsed(what: string, a: cedar.CheckParseAnswer): void {
  if (a.type !== 'success') throw new Error(`${what}: ${a.errors.map((e) => e.message).join('; ')}`);
}
expectParsed('policy set', cedar.preparsePolicySet('writ', { staticPolicies: policyText }));
expectParsed('schema', cedar.preparseSchema('writ', schemaText));

/** The Cedar request for a Writ invocation: identities, time, key and approval in the context. */
function cedarCall(
  inv: ToolInvocation,
  opts: { validated: boolean; policySet?: string; entities?: cedar.Entities },
): cedar.StatefulAuthorizationCall {
  const t = inv.target.attributes;
  const context: cedar.Context = {
    tenant_id: inv.tenant_id,
    principal_id: inv.principal_id,
    policy_sha256: inv.policy_sha256,
    tool_contract_sha256: inv.tool_contract_sha256,
    input_sha256: inv.input_sha256,
    input_bytes: inv.input_bytes,
    effect: contract.effect,
    now_unix_ms: now,
    contract_quarantined: EMPTY_TRUSTED_STATE.contract_quarantined,
    grant_revoked: EMPTY_TRUSTED_STATE.grant_revoked,
    principal_revoked: EMPTY_TRUSTED_STATE.principal_revoked,
    approval_unusable: EMPTY_TRUSTED_STATE.approval_unusable,
    run_violations: [...EMPTY_TRUSTED_STATE.run_violations],
  };
  // Optional attributes are absent, never null: Cedar has no null.
  if (inv.idempotency_key !== null) context.idempotency_key = inv.idempotency_key;
  if (inv.approval !== null) context.approval = { ...inv.approval };
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
 * What a lab mutation changes on the Cedar side when it is not in the invocation: the grant is
 * the permit policy (tool_denied), the pinned contract digest is a policy literal
 * (contract_drift), and held capabilities are principal attributes (capability_denied).
 */
type Decided = Pick<LoopInputs, 'contract' | 'grant' | 'invocation' | 'now'>;

function cedarSideOf(id: string, inputs: Decided): { policySet?: string; entities?: cedar.Entities } {
  switch (id) {
    case 'tool_denied': {
      const text = policyText.replace(
        'Writ::Action::"execute_rollback"',
        `Writ::Action::"${inputs.grant.allowed_tools[0] ?? 'none'}"`,
      );
      expectParsed(
        'tool_denied policy set',
        cedar.preparsePolicySet('writ-tool-denied', { staticPolicies: text }),
      );
      return { policySet: 'writ-tool-denied' };
    }
    case 'contract_drift': {
      const text = policyText.replace(contractDigest(contract), contractDigest(inputs.contract));
      expectParsed(
        'contract_drift policy set',
        cedar.preparsePolicySet('writ-contract-drift', { staticPolicies: text }),
      );
      return { policySet: 'writ-contract-drift' };
    }
    case 'capability_denied': {
      const held = inputs.grant.capabilities.map((c) => c.capability);
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
function agree(id: string, inputs: Decided, want: 'allow' | 'deny'): void {
  const receipt = writAuthorizer(
    pinContract(inputs.contract),
    deepFreeze(inputs.grant),
    inputs.now,
  )(JSON.stringify(inputs.invocation));
  const w = receipt.body.decision === 'authorized' ? 'allow' : 'deny';
  const side = cedarSideOf(id, inputs);
  const validated = cedarDecide(cedarCall(inputs.invocation, { validated: true, ...side }));
  const plain = cedarDecide(cedarCall(inputs.invocation, { validated: false, ...side }));
  if (w !== want || validated !== want || plain !== want) {
    throw new Error(`${id}: decisions disagree (writ ${w}, cedar ${validated}/${plain}, expected ${want})`);
  }
  agreements.push({
    id,
    writ: w === 'allow' ? 'allow' : `deny (${receipt.body.violations.join(',')})`,
    cedar: validated,
  });
}

agree('baseline', buildToolLoopFixture(), 'allow');
// Execution-stage cases (rejected, reconciliation_required) verify an observation: no Cedar analogue.
for (const c of LAB_CASES) {
  if (c.expected.class === 'denied') agree(c.id, c.apply(buildToolLoopFixture()), 'deny');
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

const allowText = JSON.stringify(fixture.invocation);
const stale = LAB_CASES.find((c) => c.id === 'stale_approval_parameters');
if (stale === undefined) throw new Error('lab case stale_approval_parameters is missing');
const staleInvocation = stale.apply(buildToolLoopFixture()).invocation;
const denyText = JSON.stringify(staleInvocation);

const calls = {
  allowValidated: cedarCall(fixture.invocation, { validated: true }),
  allowPlain: cedarCall(fixture.invocation, { validated: false }),
  denyValidated: cedarCall(staleInvocation, { validated: true }),
  denyPlain: cedarCall(staleInvocation, { validated: false }),
};

// Timer overhead: an empty region measured the same way (reported, not subtracted).
const empty: Sample = { name: 'empty', run: () => undefined, ns: [] };
interleave([empty], 1_000, 20_000);
const timerOverhead = stats(empty.ns).median;

const allow: Sample[] = [
  { name: 'writ', run: () => writ(allowText), ns: [] },
  { name: 'cedar_validated', run: () => cedarDecide(calls.allowValidated), ns: [] },
  { name: 'cedar_plain', run: () => cedarDecide(calls.allowPlain), ns: [] },
];
interleave(allow, WARMUP, ITERATIONS);

const deny: Sample[] = [
  { name: 'writ', run: () => writ(denyText), ns: [] },
  { name: 'cedar_validated', run: () => cedarDecide(calls.denyValidated), ns: [] },
  { name: 'cedar_plain', run: () => cedarDecide(calls.denyPlain), ns: [] },
];
interleave(deny, WARMUP / 5, DENY_ITERATIONS);

const allowBatched: BatchSample[] = allow.map((s) => ({ name: s.name, run: s.run, wall: [], cpu: [] }));
interleaveBatches(allowBatched, BATCH_ROUNDS);

// Where Writ's time goes: each step alone on the same inputs (not interleaved; indicative). Rows
// marked "not used here" are the references the hot path is proven against, for comparison.
const decoded = decodeJsonText(allowText);
if (!decoded.ok) throw new Error('decode failed');
const parsedResult = decodeToolInvocation(allowText);
if (!parsedResult.ok || !isValidatedInvocation(parsedResult.value)) {
  throw new Error('the hot path refused the lab invocation');
}
const parsed = parsedResult.value;
const body = writ(allowText).body;
const bodyText = authorizationBodyText(body, true);
const components: BatchSample[] = (
  [
    ['decodeToolInvocation (text to invocation)', () => decodeToolInvocation(allowText)],
    ['  decodeJsonText (general strict decoder)', () => decodeJsonText(allowText)],
    [
      '    reference parser alone (not used here)',
      () => parseReference(allowText, DEFAULT_JSON_LIMITS.maxDepth),
    ],
    ['  parseToolInvocation (hand-written parser)', () => parseToolInvocation(decoded.value)],
    ['    ToolInvocation zod parse (not used here)', () => ToolInvocation.safeParse(decoded.value)],
    ['authorizeToolCall, all of it', () => authorizeToolCall(contract, grant, parsed, now)],
    ['  validateContract + validateGrant', () => [validateContract(contract), validateGrant(grant)]],
    ['  invocation digest (one-pass text + sha256)', () => sha256HexOfText(invocationText(parsed))],
    ['    digestOf(invocation) (not used here)', () => digestOf(parsed)],
    ['  receipt digest (one-pass text + sha256)', () => sha256HexOfText(authorizationBodyText(body, true))],
    ['    authorizationBodyText alone', () => authorizationBodyText(body, true)],
    ['    canonicalize(receipt body) (not used here)', () => canonicalize(body)],
    ['    reference serializer (not used here)', () => canonicalizeReference(body)],
    ['    sha256 of the body text', () => sha256HexOfText(bodyText)],
  ] as const
).map(([name, run]) => ({ name, run, wall: [], cpu: [] }));
for (const c of components) for (let i = 0; i < 2_000; i++) consume(c.run());
interleaveBatches(components, COMPONENT_ROUNDS);

// ---------------------------------------------------------------------------------------------
// Report

const us = (ns: number) => `${(ns / 1000).toFixed(2)} µs`;
const times = (r: number) => `${r.toFixed(2)}x`;
const thousands = (n: number) => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
const W = 46;
const cols = (label: string, a: string, b: string, c: string) =>
  `${label.padEnd(W)}${a.padStart(12)}${b.padStart(12)}${c.padStart(12)}`;

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
    cols('writ  decode + parse + authorize + receipt', us(s.writ.median), us(s.writ.p99), us(s.writ.mean)),
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
    line('writ  decode + parse + authorize + receipt', s.writ),
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
  '',
  'decisions agree before timing (cedar: schema-validated and no schema alike)',
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
  `target: writ (decode + authorize + receipt) at least ${target}x faster than cedar evaluation alone ` +
    `(allow, fastest cedar variant): ${times(perCall)} per-call median, ${times(batchedCpu)} batched cpu ` +
    `median; ${perCall >= target ? 'met' : 'NOT met'}`,
);
if (sink === -1) console.log('');
