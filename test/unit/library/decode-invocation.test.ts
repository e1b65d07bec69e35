/**
 * `decodeToolInvocation` held to its definition: the strict decoder, then the schema.
 *
 * `decodeToolInvocation(text, limits)` first tries a fast route: `JSON.parse` straight into the
 * hand-written acceptor, kept only under a depth floor and the size bound, without escaped
 * surrogates, without attributes named `constructor` / `prototype`, and with as many members in
 * the text as keys in the accepted value (no duplicate dropped). Otherwise `decodeJsonText` and
 * `parseToolInvocation` decide. The claim is "for every text and limits, the general route's
 * answer", so these tests compute the general route independently (`decodeJsonText`, then
 * `parseToolInvocation`, or `err(fromJsonError(...))`) and compare the whole `Result` with
 * `toStrictEqual`, error objects included; when both succeed, the canonical text is identical and
 * both values are recorded as validated (`isValidatedInvocation`).
 *
 * Inputs: valid invocations (the fixtures and generated ones) rendered as JSON text with random key
 * order, random whitespace and random `\uXXXX` escapes (surrogate pairs escaped whole, or by one
 * half), then mutated as values (duplicate members at every level, forbidden and unknown keys,
 * number spellings, raw and escaped lone surrogates, mixed pairs, arrays, deep nesting, missing
 * and retyped members) and as text (truncation, one corrupted character, long whitespace), under
 * the default limits, depth bounds 0 to 32 and byte bounds around the text's UTF-8 length. Every
 * check of the fast route has a named example below that fails without it.
 *
 * A fixed seed keeps runs reproducible; change it locally to explore.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalizeReference } from '../../../src/core/canonical/canonical.js';
import { invocationText, isValidatedInvocation } from '../../../src/core/canonical/canonical-forms.js';
import { type CoreError, fromJsonError } from '../../../src/core/errors.js';
import { decodeToolInvocation, parseToolInvocation } from '../../../src/library/invocation.js';
import {
  DEFAULT_JSON_LIMITS,
  decodeJsonText,
  type JsonDecodeReason,
  type JsonLimits,
  utf8ByteLength,
} from '../../../src/core/canonical/json.js';
import { buildToolLoopFixture } from '../../../src/lab/tool-loop.js';
import type { ToolInvocation } from '../../../src/core/model.js';
import { err, type Result } from '../../../src/core/result.js';
import { buildInvocation } from '../core/fixtures.js';
import {
  approvalArb,
  attributeNameArbWith,
  countArb,
  identifierArb,
  idempotencyKeyArb,
  sha256Arb,
  targetArbOf,
} from './invocation-arbitraries.js';

const SEED = 0xdec0;
const RUNS = { seed: SEED, endOnFailure: true } as const;

type Decoded = Result<ToolInvocation, CoreError>;

// ---------------------------------------------------------------------------------------------
// The check: the public function against the general route, computed here

function generalRoute(text: string, limits: JsonLimits): Decoded {
  const d = decodeJsonText(text, limits);
  return d.ok ? parseToolInvocation(d.value) : err(fromJsonError(d.error));
}

/**
 * A result as JSON, -0 marked. JSON.stringify escapes lone surrogates: a raw one in a failure
 * message cannot cross the test pool's UTF-8 WebSocket, and would hide the failure.
 */
function show(r: Decoded): string {
  return JSON.stringify(r, (_k, v: unknown) => (Object.is(v, -0) ? '<-0>' : v));
}

function label(text: string, limits: JsonLimits): string {
  const t = text.length > 600 ? `${text.slice(0, 300)} …(${text.length} units)… ${text.slice(-300)}` : text;
  return `input ${JSON.stringify(t)} limits ${JSON.stringify(limits)}`;
}

/** `decodeToolInvocation` gives exactly the general route's answer; returns it. */
function expectAgrees(text: string, limits: JsonLimits = DEFAULT_JSON_LIMITS): Decoded {
  const got = decodeToolInvocation(text, limits);
  const want = generalRoute(text, limits);
  const at = label(text, limits);
  expect(show(got), at).toBe(show(want));
  expect(got, at).toStrictEqual(want);
  if (got.ok && want.ok) {
    const canonical = canonicalizeReference(want.value);
    expect(canonicalizeReference(got.value), at).toBe(canonical);
    expect(invocationText(got.value), at).toBe(canonical);
    // The hand-written parser takes every valid invocation of at most 32 attributes; past that
    // zod decides on both routes, and the value is not recorded as validated.
    const small = Object.keys(want.value.target.attributes).length <= 32;
    expect(isValidatedInvocation(got.value), at).toBe(small);
    expect(isValidatedInvocation(want.value), at).toBe(small);
  }
  return got;
}

/** The outcome a named example expects (besides agreeing with the general route). */
type Outcome = 'ok' | 'invalid_invocation' | JsonDecodeReason;

function expectOutcome(r: Decoded, outcome: Outcome): void {
  if (outcome === 'ok') {
    expect(r.ok ? 'ok' : show(r)).toBe('ok');
  } else if (outcome === 'invalid_invocation') {
    expect(r.ok ? 'ok' : r.error.reason).toBe('invalid_invocation');
  } else {
    expect(r.ok ? 'ok' : [r.error.reason, ...r.error.issues.map((i) => i.message)]).toStrictEqual([
      'malformed_json',
      outcome,
    ]);
  }
}

// ---------------------------------------------------------------------------------------------
// A seeded source of choices for the renderer and the mutations

type Rng = () => number;

/** mulberry32: a small deterministic generator, seeded by fast-check. */
function rngOf(seed: number): Rng {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[Math.floor(rng() * xs.length)] as T;
const chance = (rng: Rng, p: number): boolean => rng() < p;
const below = (rng: Rng, n: number): number => Math.floor(rng() * n);

// ---------------------------------------------------------------------------------------------
// JSON text as a tree: members can be duplicated, numbers spelled as written

type StrNode = { t: 'str'; v: string };
/** Written verbatim: a number, a literal, or prepared JSON text. */
type LitNode = { t: 'lit'; v: string };
type ArrNode = { t: 'arr'; items: Node[] };
type ObjNode = { t: 'obj'; members: Member[] };
type Node = StrNode | LitNode | ArrNode | ObjNode;
type Member = { key: StrNode | LitNode; value: Node };

const str = (v: string): StrNode => ({ t: 'str', v });
const lit = (v: string): LitNode => ({ t: 'lit', v });

function toNode(v: unknown, rng: Rng): Node {
  if (typeof v === 'string') return str(v);
  if (typeof v === 'number') return lit(Object.is(v, -0) ? '-0' : String(v));
  if (v === null || typeof v === 'boolean') return lit(String(v));
  if (Array.isArray(v)) return { t: 'arr', items: v.map((x) => toNode(x, rng)) };
  const keys = Object.keys(v as object);
  for (let i = keys.length - 1; i > 0; i--) {
    const j = below(rng, i + 1);
    [keys[i], keys[j]] = [keys[j] as string, keys[i] as string];
  }
  return {
    t: 'obj',
    members: keys.map((k) => ({ key: str(k), value: toNode((v as Record<string, unknown>)[k], rng) })),
  };
}

/** How text is written: whitespace and escape rates, hex case, whether a pair may be split. */
interface Style {
  readonly ws: number;
  readonly escape: number;
  readonly upper: boolean;
  /** Whether a surrogate pair may be written with one half escaped (text the decoder refuses). */
  readonly splitPairs: boolean;
}

const WS = [' ', '\n', '\r', '\t'];
const SHORT_ESCAPES: Readonly<Record<number, string>> = {
  0x08: '\\b',
  0x09: '\\t',
  0x0a: '\\n',
  0x0c: '\\f',
  0x0d: '\\r',
};

function hex(c: number, upper: boolean): string {
  const h = c.toString(16).padStart(4, '0');
  return `\\u${upper ? h.toUpperCase() : h}`;
}

function quote(v: string, s: Style, rng: Rng): string {
  let out = '"';
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i);
    const d = v.charCodeAt(i + 1);
    if (c >= 0xd800 && c <= 0xdbff && d >= 0xdc00 && d <= 0xdfff) {
      const mode = pick(rng, s.splitPairs ? ['raw', 'both', 'high', 'low'] : ['raw', 'raw', 'both']);
      out += mode === 'both' || mode === 'high' ? hex(c, s.upper) : String.fromCharCode(c);
      out += mode === 'both' || mode === 'low' ? hex(d, s.upper) : String.fromCharCode(d);
      i++;
    } else if (c === 0x22) out += chance(rng, s.escape) ? hex(c, s.upper) : '\\"';
    else if (c === 0x5c) out += chance(rng, s.escape) ? hex(c, s.upper) : '\\\\';
    else if (c < 0x20) {
      const short = SHORT_ESCAPES[c];
      out += short !== undefined && !chance(rng, s.escape) ? short : hex(c, s.upper);
    } else if (c === 0x2f && chance(rng, s.escape)) out += '\\/';
    // A lone surrogate (only mutations put one here): raw or escaped.
    else if (c >= 0xd800 && c <= 0xdfff) out += chance(rng, 0.5) ? hex(c, s.upper) : v.charAt(i);
    else out += chance(rng, s.escape) ? hex(c, s.upper) : v.charAt(i);
  }
  return `${out}"`;
}

function render(root: Node, s: Style, rng: Rng): string {
  const ws = (): string => {
    if (!chance(rng, s.ws)) return '';
    let out = '';
    for (let n = 1 + below(rng, 3); n > 0; n--) out += pick(rng, WS);
    return out;
  };
  const go = (n: Node): string => {
    switch (n.t) {
      case 'str':
        return quote(n.v, s, rng);
      case 'lit':
        return n.v;
      case 'arr': {
        let out = `[${ws()}`;
        n.items.forEach((item, i) => {
          out += `${i > 0 ? `${ws()},${ws()}` : ''}${go(item)}`;
        });
        return `${out}${ws()}]`;
      }
      case 'obj': {
        let out = `{${ws()}`;
        n.members.forEach((m, i) => {
          out += `${i > 0 ? `${ws()},${ws()}` : ''}${go(m.key)}${ws()}:${ws()}${go(m.value)}`;
        });
        return `${out}${ws()}}`;
      }
    }
  };
  return `${ws()}${go(root)}${ws()}`;
}

// ---------------------------------------------------------------------------------------------
// Valid invocations

/** Names of Object.prototype members (lowercase) included; `constructor`/`prototype` are the decoder's to refuse. */
const attributeNameArb = attributeNameArbWith([
  'tostring',
  'valueof',
  'hasownproperty',
  'proto',
  'isprototypeof',
]);
/** No control character, DEL or `*`; well-formed; 1 to 128 UTF-16 units. */
const attributeValueArb = fc.oneof(
  { weight: 4, arbitrary: fc.stringMatching(/^[a-z0-9.@:/ -]{1,24}$/) },
  {
    weight: 3,
    arbitrary: fc
      .string({ unit: 'grapheme', minLength: 1, maxLength: 12 })
      .filter((s) => s.length <= 128 && /^[^\u0000-\u001f\u007f-\u009f*]+$/.test(s) && s.isWellFormed()),
  },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      'x'.repeat(128),
      '😀'.repeat(64),
      'a"b\\c',
      '"',
      '\\',
      '\\\\"',
      '\\ud800', // the six characters: a false hit for the escaped-surrogate check
      '\\u0041',
      'é😀\u2028\u00a0',
      '/',
      ':',
      '__proto__',
      'constructor',
    ),
  },
);

const targetArb = targetArbOf(attributeNameArb, attributeValueArb);

const generatedInvocationArb: fc.Arbitrary<ToolInvocation> = fc.record({
  invocation_id: identifierArb,
  run_envelope_sha256: sha256Arb,
  tenant_id: identifierArb,
  principal_id: identifierArb,
  policy_sha256: sha256Arb,
  tool_contract_sha256: sha256Arb,
  input_sha256: sha256Arb,
  input_bytes: countArb,
  target: targetArb,
  requested_at_unix_ms: countArb,
  idempotency_key: fc.option(idempotencyKeyArb, { nil: null }),
  approval: fc.option(approvalArb, { nil: null }),
});

const LAB: ToolInvocation = buildToolLoopFixture().invocation;
const FIXTURES: readonly ToolInvocation[] = [
  LAB,
  buildInvocation(),
  { ...buildInvocation(), approval: null, idempotency_key: null },
];

const invocationArb = fc.oneof(
  { weight: 1, arbitrary: fc.constantFrom(...FIXTURES) },
  { weight: 4, arbitrary: generatedInvocationArb },
);

const styleArb: fc.Arbitrary<Style> = fc.record({
  ws: fc.constantFrom(0, 0.2, 1),
  escape: fc.constantFrom(0, 0.05, 0.5, 1),
  upper: fc.boolean(),
  splitPairs: fc.boolean(),
});
const validStyleArb: fc.Arbitrary<Style> = styleArb.map((s) => ({ ...s, splitPairs: false }));

// ---------------------------------------------------------------------------------------------
// Limits: the default, depth bounds, and byte bounds around the text's UTF-8 length

type LimitsSpec =
  | { readonly kind: 'default' }
  | { readonly kind: 'depth'; readonly depth: number }
  | { readonly kind: 'bytes'; readonly of: 'final' | 'base'; readonly delta: number; readonly depth: number };

/** Mostly the default, so that most mutated texts reach the checks after the bounds. */
const limitsArb: fc.Arbitrary<LimitsSpec> = fc.oneof(
  { weight: 3, arbitrary: fc.constant({ kind: 'default' } as const) },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('depth' as const), depth: fc.constantFrom(0, 1, 2, 3, 4, 32) }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('bytes' as const),
      of: fc.constantFrom('final' as const, 'base' as const),
      delta: fc.constantFrom(-1, 0, 1),
      depth: fc.constantFrom(2, 3, 32),
    }),
  },
);

/** Limits every valid text fits. */
const roomyLimitsArb: fc.Arbitrary<LimitsSpec> = fc.oneof(
  fc.constant({ kind: 'default' } as const),
  fc.record({ kind: fc.constant('depth' as const), depth: fc.constantFrom(3, 4, 32, 1000) }),
  fc.record({
    kind: fc.constant('bytes' as const),
    of: fc.constant('final' as const),
    delta: fc.constantFrom(0, 1),
    depth: fc.constantFrom(3, 32),
  }),
);

/** `base` is the rendered text before any text-level mutation, `text` the input. */
function limitsFor(spec: LimitsSpec, base: string, text: string): JsonLimits {
  switch (spec.kind) {
    case 'default':
      return DEFAULT_JSON_LIMITS;
    case 'depth':
      return { maxBytes: DEFAULT_JSON_LIMITS.maxBytes, maxDepth: spec.depth };
    case 'bytes':
      return {
        maxBytes: utf8ByteLength(spec.of === 'base' ? base : text) + spec.delta,
        maxDepth: spec.depth,
      };
  }
}

// ---------------------------------------------------------------------------------------------
// Mutations of the tree

const isStrKey = (m: Member, key: string): boolean => m.key.t === 'str' && m.key.v === key;

function memberObj(o: ObjNode | undefined, key: string): ObjNode | undefined {
  const v = o?.members.find((m) => isStrKey(m, key))?.value;
  return v?.t === 'obj' ? v : undefined;
}

type Where = 'root' | 'approval' | 'target' | 'attributes';

function objAt(root: ObjNode, where: Where): ObjNode | undefined {
  switch (where) {
    case 'root':
      return root;
    case 'approval':
      return memberObj(root, 'approval');
    case 'target':
      return memberObj(root, 'target');
    case 'attributes':
      return memberObj(memberObj(root, 'target'), 'attributes');
  }
}

/** Every object in the tree, outermost first. */
function objects(n: Node, out: ObjNode[] = []): ObjNode[] {
  if (n.t === 'obj') {
    out.push(n);
    for (const m of n.members) objects(m.value, out);
  } else if (n.t === 'arr') for (const i of n.items) objects(i, out);
  return out;
}

/** Every string node (values and keys). */
function strings(n: Node, out: StrNode[] = []): StrNode[] {
  if (n.t === 'str') out.push(n);
  else if (n.t === 'obj') {
    for (const m of n.members) {
      if (m.key.t === 'str') out.push(m.key);
      strings(m.value, out);
    }
  } else if (n.t === 'arr') for (const i of n.items) strings(i, out);
  return out;
}

function insertAt(o: ObjNode, m: Member, rng: Rng): void {
  o.members.splice(below(rng, o.members.length + 1), 0, m);
}

/** A value that differs from `n` (often still valid for its field), or `n` itself. */
function altered(n: Node, rng: Rng): Node {
  switch (n.t) {
    case 'str': {
      const last = n.v.slice(-1);
      return str(pick(rng, [`${n.v}x`, `${n.v.slice(0, -1)}${last === 'a' ? 'b' : 'a'}`, '']));
    }
    case 'lit':
      return lit(pick(rng, ['7', '0', 'null', n.v]));
    default:
      return n;
  }
}

function duplicate(o: ObjNode | undefined, rng: Rng): void {
  if (o === undefined || o.members.length === 0) return;
  const m = pick(rng, o.members);
  insertAt(o, { key: m.key, value: chance(rng, 0.5) ? m.value : altered(m.value, rng) }, rng);
}

function setAttribute(root: ObjNode, key: StrNode | LitNode, value: Node, rng: Rng): void {
  const attrs = objAt(root, 'attributes');
  if (attrs !== undefined) insertAt(attrs, { key, value }, rng);
}

/** Members holding a number (the counts and instants). */
function numberMembers(root: ObjNode): Member[] {
  return objects(root).flatMap((o) =>
    o.members.filter((m) => m.value.t === 'lit' && /^-?\d/.test(m.value.v)),
  );
}

const NUMBERS = [
  '1e3',
  '1E+3',
  '1.0',
  '-0',
  '-0.0',
  '0e5',
  '1e-400',
  '1e400',
  '-1e400',
  '9007199254740991',
  '9007199254740992',
  '9007199254740993',
  '9007199254740991.0',
  '9007199254740992.0',
  '-9007199254740993',
  '1.5',
  '-1',
  '01',
  '1.',
  '+1',
  '.5',
  '0x10',
  'NaN',
  'Infinity',
  '"5"',
];

const LONE_SURROGATES = ['\ud800', '\udbff', '\udc00', '\udfff', '\ud83d', '\ude00'];

/** A value nested `depth` levels deep, arrays and objects mixed. */
function nested(depth: number, rng: Rng): Node {
  let n: Node = str('x');
  for (let i = 0; i < depth; i++) {
    n = chance(rng, 0.5) ? { t: 'arr', items: [n] } : { t: 'obj', members: [{ key: str('a'), value: n }] };
  }
  return n;
}

const MUTATIONS = {
  'duplicate a root member': (root: ObjNode, rng: Rng) => duplicate(objAt(root, 'root'), rng),
  'duplicate an approval member': (root: ObjNode, rng: Rng) => duplicate(objAt(root, 'approval'), rng),
  'duplicate a target member': (root: ObjNode, rng: Rng) => duplicate(objAt(root, 'target'), rng),
  'duplicate an attribute': (root: ObjNode, rng: Rng) => {
    const attrs = objAt(root, 'attributes');
    if (attrs !== undefined && attrs.members.length === 0)
      attrs.members.push({ key: str('a'), value: str('v') });
    duplicate(attrs, rng);
  },
  'add a forbidden attribute': (root: ObjNode, rng: Rng) =>
    setAttribute(root, str(pick(rng, ['constructor', 'prototype', '__proto__'])), str('x'), rng),
  'add a forbidden attribute, escaped': (root: ObjNode, rng: Rng) =>
    setAttribute(
      root,
      lit(pick(rng, ['"__pro\\u0074o__"', '"constructo\\u0072"', '"\\u0070rototype"', '"__proto\\u005F_"'])),
      str('x'),
      rng,
    ),
  'add an attribute named like an Object.prototype member': (root: ObjNode, rng: Rng) =>
    setAttribute(
      root,
      str(pick(rng, ['tostring', 'valueof', 'hasownproperty', 'toString', '__defineGetter__'])),
      str('x'),
      rng,
    ),
  'add an unknown key': (root: ObjNode, rng: Rng) => {
    const o = objAt(root, pick(rng, ['root', 'approval', 'target'] as const));
    const key = pick(rng, ['extra', 'Tenant_id', 'tenant_id ', 'approval_id', 'type', '__proto__', '']);
    if (o !== undefined) insertAt(o, { key: str(key), value: str('x') }, rng);
  },
  'respell a number': (root: ObjNode, rng: Rng) => {
    const ms = numberMembers(root);
    if (ms.length > 0) pick(rng, ms).value = lit(pick(rng, NUMBERS));
  },
  'insert a lone surrogate': (root: ObjNode, rng: Rng) => {
    const s = pick(rng, strings(root));
    const at = below(rng, s.v.length + 1);
    s.v = s.v.slice(0, at) + pick(rng, LONE_SURROGATES) + s.v.slice(at);
  },
  'insert an emoji': (root: ObjNode, rng: Rng) => {
    const s = pick(rng, strings(root));
    const at = below(rng, s.v.length + 1);
    s.v = `${s.v.slice(0, at)}😀${s.v.slice(at)}`;
  },
  'write an attribute value with a prepared surrogate': (root: ObjNode, rng: Rng) =>
    setAttribute(
      root,
      str('s'),
      lit(
        pick(rng, [
          '"\\ud83d\ude00"', // escaped high, raw low
          '"\ud83d\\ude00"', // raw high, escaped low
          '"a\\uD83D\uDE00b"',
          '"\\ud83d\\ude00"', // both escaped: a pair
          '"\\ud800"',
          '"x\\udfffy"',
          '"\\uDBFF\\uDBFF"',
          '"\\\\ud800"', // an escaped backslash, then `ud800`: six plain characters
        ]),
      ),
      rng,
    ),
  'insert a control character': (root: ObjNode, rng: Rng) => {
    const s = pick(rng, strings(root));
    const at = below(rng, s.v.length + 1);
    s.v = s.v.slice(0, at) + pick(rng, ['\n', '\u0000', '\u001f', '\u007f', '*']) + s.v.slice(at);
  },
  'wrap a value in an array': (root: ObjNode, rng: Rng) => {
    const m = pick(
      rng,
      objects(root).flatMap((o) => o.members),
    );
    if (m !== undefined) m.value = { t: 'arr', items: [m.value] };
  },
  'nest deeply inside an attribute value': (root: ObjNode, rng: Rng) =>
    setAttribute(root, str('deep'), nested(pick(rng, [1, 2, 5, 28, 29, 30, 31, 32, 40]), rng), rng),
  'drop a member': (root: ObjNode, rng: Rng) => {
    const o = pick(rng, objects(root));
    if (o.members.length > 0) o.members.splice(below(rng, o.members.length), 1);
  },
  'retype a member': (root: ObjNode, rng: Rng) => {
    const m = pick(
      rng,
      objects(root).flatMap((o) => o.members),
    );
    if (m !== undefined) m.value = lit(pick(rng, ['null', 'true', '0', '"x"', '{}', '[]', '""']));
  },
  'make the approval null': (root: ObjNode) => {
    const m = root.members.find((x) => isStrKey(x, 'approval'));
    if (m !== undefined) m.value = lit('null');
  },
  'add 33 attributes': (root: ObjNode, rng: Rng) => {
    for (let i = 0; i < 33; i++) setAttribute(root, str(`k${i}`), str('v'), rng);
  },
} satisfies Record<string, (root: ObjNode, rng: Rng) => void>;

type MutationName = keyof typeof MUTATIONS;
const MUTATION_NAMES = Object.keys(MUTATIONS) as MutationName[];

const CORRUPT = [
  '"',
  '\\',
  ':',
  ',',
  '{',
  '}',
  '[',
  ']',
  'x',
  '0',
  ' ',
  '\u0000',
  '\ud800',
  '\ude00',
  'é',
  '😀',
];

const TEXT_MUTATIONS = {
  truncate: (t: string, rng: Rng) => t.slice(0, below(rng, t.length)),
  'corrupt one character': (t: string, rng: Rng) => {
    const at = below(rng, t.length);
    return t.slice(0, at) + pick(rng, CORRUPT) + t.slice(at + 1);
  },
  'insert one character': (t: string, rng: Rng) => {
    const at = below(rng, t.length + 1);
    return t.slice(0, at) + pick(rng, CORRUPT) + t.slice(at);
  },
  'long whitespace': (t: string, rng: Rng) => {
    const ws = pick(rng, [' ', '\n', '\t \r\n']).repeat(pick(rng, [1, 64, 1000]));
    return chance(rng, 0.5) ? ws + t : t + ws;
  },
  'wrap the text in an array': (t: string) => `[${t}]`,
  'trailing data': (t: string, rng: Rng) => t + pick(rng, [',', '}', ' x', '{}', '0', '\u0000']),
  'leading byte-order mark': (t: string) => `\ufeff${t}`,
} satisfies Record<string, (text: string, rng: Rng) => string>;

type TextMutationName = keyof typeof TEXT_MUTATIONS;
const TEXT_MUTATION_NAMES = Object.keys(TEXT_MUTATIONS) as TextMutationName[];

/** Render `inv` (keys shuffled by `seed`), apply the mutations, and check the two routes agree. */
function checkCase(
  inv: ToolInvocation,
  seed: number,
  style: Style,
  mutations: readonly MutationName[],
  textMutation: TextMutationName | undefined,
  spec: LimitsSpec,
): Decoded {
  const rng = rngOf(seed);
  const root = toNode(inv, rng) as ObjNode;
  for (const m of mutations) MUTATIONS[m](root, rng);
  const base = render(root, style, rng);
  const text = textMutation === undefined ? base : TEXT_MUTATIONS[textMutation](base, rng);
  return expectAgrees(text, limitsFor(spec, base, text));
}

// ---------------------------------------------------------------------------------------------
// Generated texts

describe('decodeToolInvocation equals the strict decoder then parseToolInvocation', () => {
  it('on valid invocations written with any key order, whitespace and escapes (all accepted)', () => {
    fc.assert(
      fc.property(invocationArb, fc.integer(), validStyleArb, roomyLimitsArb, (inv, seed, style, spec) => {
        const r = checkCase(inv, seed, style, [], undefined, spec);
        expect(r.ok ? 'ok' : show(r)).toBe('ok');
        if (r.ok) expect(canonicalizeReference(r.value)).toBe(canonicalizeReference(inv));
      }),
      { ...RUNS, numRuns: 2500 },
    );
  });

  it('on valid invocations under every limit, pairs possibly split into an escaped and a raw half', () => {
    fc.assert(
      fc.property(invocationArb, fc.integer(), styleArb, limitsArb, (inv, seed, style, spec) => {
        checkCase(inv, seed, style, [], undefined, spec);
      }),
      { ...RUNS, numRuns: 1000 },
    );
  });

  for (const name of MUTATION_NAMES) {
    it(`after one mutation: ${name}`, () => {
      fc.assert(
        fc.property(invocationArb, fc.integer(), styleArb, limitsArb, (inv, seed, style, spec) => {
          checkCase(inv, seed, style, [name], undefined, spec);
        }),
        { ...RUNS, numRuns: 150 },
      );
    });
  }

  for (const name of TEXT_MUTATION_NAMES) {
    it(`after a text mutation: ${name}`, () => {
      fc.assert(
        fc.property(invocationArb, fc.integer(), styleArb, limitsArb, (inv, seed, style, spec) => {
          checkCase(inv, seed, style, [], name, spec);
        }),
        { ...RUNS, numRuns: 150 },
      );
    });
  }

  it('after several mutations at once', () => {
    fc.assert(
      fc.property(
        invocationArb,
        fc.integer(),
        styleArb,
        fc.array(fc.constantFrom(...MUTATION_NAMES), { minLength: 1, maxLength: 4 }),
        fc.option(fc.constantFrom(...TEXT_MUTATION_NAMES), { nil: undefined }),
        limitsArb,
        (inv, seed, style, mutations, textMutation, spec) => {
          checkCase(inv, seed, style, mutations, textMutation, spec);
        },
      ),
      { ...RUNS, numRuns: 1500 },
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Named examples: each check of the fast route, and each mutation, on the lab fixture's text

const TEXT = JSON.stringify(LAB);
const PRETTY = JSON.stringify(LAB, null, 2);

/** `TEXT` with the first occurrence of `from` replaced (which must occur). */
function edit(from: string, to: string, text = TEXT): string {
  expect(text.includes(from), `${JSON.stringify(from)} occurs`).toBe(true);
  return text.replace(from, to);
}

const withAttributes = (attributes: Record<string, string>): string =>
  JSON.stringify({
    ...LAB,
    target: { ...LAB.target, attributes: { ...LAB.target.attributes, ...attributes } },
  });

/** The lab text with attribute `s` written as the given JSON string text. */
const withRawAttribute = (json: string): string => edit('"attributes":{', `"attributes":{"s":${json},`);

const number = (field: 'requested_at_unix_ms' | 'input_bytes', spelled: string): string =>
  edit(`"${field}":${LAB[field]}`, `"${field}":${spelled}`);

const bytes = (t: string): number => utf8ByteLength(t);
const depth = (maxDepth: number): JsonLimits => ({ maxBytes: DEFAULT_JSON_LIMITS.maxBytes, maxDepth });
const maxBytes = (n: number): JsonLimits => ({ maxBytes: n, maxDepth: DEFAULT_JSON_LIMITS.maxDepth });

interface Example {
  readonly name: string;
  readonly text: () => string;
  readonly limits?: JsonLimits | ((text: string) => JsonLimits);
  readonly outcome: Outcome;
}

const EXAMPLES: readonly Example[] = [
  // Valid text, the fast route's ordinary input.
  { name: 'the lab invocation', text: () => TEXT, outcome: 'ok' },
  { name: 'the lab invocation, pretty-printed', text: () => PRETTY, outcome: 'ok' },
  { name: 'the fixture invocation', text: () => JSON.stringify(buildInvocation()), outcome: 'ok' },
  {
    name: 'no approval and no idempotency key',
    text: () => JSON.stringify({ ...LAB, approval: null, idempotency_key: null }),
    outcome: 'ok',
  },
  {
    name: 'escaped characters in a key and in identifiers',
    text: () => edit('"tenant_id":"acme"', '"tenant\\u005fid":"\\u0061cm\\u0065"'),
    outcome: 'ok',
  },
  {
    name: 'attribute values with quotes, backslashes, unicode and emoji',
    text: () => withAttributes({ note: 'a"b\\c é 😀', slash: '\\', quote: '"' }),
    outcome: 'ok',
  },
  {
    name: 'attribute values named constructor and __proto__ (values, not keys)',
    text: () => withAttributes({ a: 'constructor', b: '__proto__', c: 'prototype' }),
    outcome: 'ok',
  },
  {
    name: 'attributes named like lowercase Object.prototype members',
    text: () => withAttributes({ tostring: 'x', valueof: 'y', hasownproperty: 'z' }),
    outcome: 'ok',
  },
  {
    name: '33 attributes (zod decides on both routes)',
    text: () => withAttributes(Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, 'v']))),
    outcome: 'ok',
  },

  // Surrogates: the escaped-surrogate check.
  { name: 'a pair escaped whole', text: () => withRawAttribute('"\\ud83d\\ude00"'), outcome: 'ok' },
  {
    name: 'a pair escaped whole, uppercase hex',
    text: () => withRawAttribute('"\\uD83D\\uDE00"'),
    outcome: 'ok',
  },
  {
    name: 'an escaped high half and a raw low half',
    text: () => withRawAttribute('"\\ud83d\ude00"'),
    outcome: 'lone_surrogate',
  },
  {
    name: 'an escaped high half (uppercase) and a raw low half, between letters',
    text: () => withRawAttribute('"a\\uD83D\uDE00b"'),
    outcome: 'lone_surrogate',
  },
  {
    name: 'a raw high half and an escaped low half',
    text: () => withRawAttribute('"\ud83d\\ude00"'),
    outcome: 'lone_surrogate',
  },
  {
    name: 'an escaped lone high surrogate',
    text: () => withRawAttribute('"\\ud800"'),
    outcome: 'lone_surrogate',
  },
  {
    name: 'an escaped lone low surrogate',
    text: () => withRawAttribute('"x\\udfffy"'),
    outcome: 'lone_surrogate',
  },
  { name: 'a raw lone high surrogate', text: () => withRawAttribute('"\ud800"'), outcome: 'lone_surrogate' },
  { name: 'a raw lone low surrogate', text: () => withRawAttribute('"x\udfff"'), outcome: 'lone_surrogate' },
  {
    name: 'a raw lone surrogate in an identifier',
    text: () => edit('"tenant_id":"acme"', '"tenant_id":"ac\ud800me"'),
    outcome: 'lone_surrogate',
  },
  {
    name: 'an escaped backslash before `ud800` (six plain characters)',
    text: () => withRawAttribute('"\\\\ud800"'),
    outcome: 'ok',
  },

  // Duplicates: the member count.
  {
    name: 'a duplicate root member, same value',
    text: () => edit('{', '{"tenant_id":"acme",'),
    outcome: 'duplicate_key',
  },
  {
    name: 'a duplicate root member, different value (the last one valid)',
    text: () => edit('{', '{"tenant_id":"globex",'),
    outcome: 'duplicate_key',
  },
  {
    name: 'a duplicate approval, null first',
    text: () => edit('{', '{"approval":null,'),
    outcome: 'duplicate_key',
  },
  {
    name: 'a duplicate approval member',
    text: () => edit('"approval":{', '"approval":{"effect":"read_only",'),
    outcome: 'duplicate_key',
  },
  {
    name: 'a duplicate target member',
    text: () => edit('"target":{', `"target":{"type":${JSON.stringify(LAB.target.type)},`),
    outcome: 'duplicate_key',
  },
  {
    name: 'a duplicate target.attributes',
    text: () => edit('"target":{', '"target":{"attributes":{"x":"y"},'),
    outcome: 'duplicate_key',
  },
  {
    name: 'a duplicate attribute, same value',
    text: () => withRawAttribute('"v","s":"v"'),
    outcome: 'duplicate_key',
  },
  {
    name: 'a duplicate attribute, different value',
    text: () => withRawAttribute('"v","s":"w"'),
    outcome: 'duplicate_key',
  },
  {
    name: 'a duplicate written with an escape',
    text: () => edit('{', '{"tenant\\u005fid":"acme",'),
    outcome: 'duplicate_key',
  },

  // Forbidden keys: the attribute-name check.
  {
    name: 'an attribute named constructor',
    text: () => withAttributes({ constructor: 'x' }),
    outcome: 'forbidden_key',
  },
  {
    name: 'an attribute named prototype',
    text: () => withAttributes({ prototype: 'x' }),
    outcome: 'forbidden_key',
  },
  {
    name: 'an attribute named __proto__',
    text: () => edit('"attributes":{', '"attributes":{"__proto__":"x",'),
    outcome: 'forbidden_key',
  },
  {
    name: 'an attribute named "__pro\\u0074o__"',
    text: () => edit('"attributes":{', '"attributes":{"__pro\\u0074o__":"x",'),
    outcome: 'forbidden_key',
  },
  {
    name: 'an attribute named "constructo\\u0072"',
    text: () => edit('"attributes":{', '"attributes":{"constructo\\u0072":"x",'),
    outcome: 'forbidden_key',
  },
  {
    name: 'an attribute named "\\u0070rototype"',
    text: () => edit('"attributes":{', '"attributes":{"\\u0070rototype":"x",'),
    outcome: 'forbidden_key',
  },
  {
    name: 'a root key named __proto__',
    text: () => edit('{', '{"__proto__":{},'),
    outcome: 'forbidden_key',
  },

  // Unknown keys: the schema.
  { name: 'an unknown root key', text: () => edit('{', '{"extra":1,'), outcome: 'invalid_invocation' },
  {
    name: 'an unknown approval key',
    text: () => edit('"approval":{', '"approval":{"extra":1,'),
    outcome: 'invalid_invocation',
  },
  {
    name: 'an unknown target key',
    text: () => edit('"target":{', '"target":{"extra":1,'),
    outcome: 'invalid_invocation',
  },
  {
    name: 'an attribute named toString (not an attribute name)',
    text: () => withAttributes({ toString: 'x' }),
    outcome: 'invalid_invocation',
  },

  // Numbers.
  { name: 'a count written 1e3', text: () => number('input_bytes', '1e3'), outcome: 'ok' },
  { name: 'a count written 1.0', text: () => number('input_bytes', '1.0'), outcome: 'ok' },
  { name: 'a count written -0', text: () => number('input_bytes', '-0'), outcome: 'ok' },
  { name: 'a count written 1e-400', text: () => number('input_bytes', '1e-400'), outcome: 'ok' },
  { name: 'a count written 1e400', text: () => number('input_bytes', '1e400'), outcome: 'non_finite_number' },
  {
    name: 'an instant written 9007199254740991',
    text: () => number('requested_at_unix_ms', '9007199254740991'),
    outcome: 'ok',
  },
  {
    name: 'an instant written 9007199254740992',
    text: () => number('requested_at_unix_ms', '9007199254740992'),
    outcome: 'unsafe_integer',
  },
  {
    name: 'an instant written 9007199254740993',
    text: () => number('requested_at_unix_ms', '9007199254740993'),
    outcome: 'unsafe_integer',
  },
  {
    name: 'an instant written 9007199254740992.0',
    text: () => number('requested_at_unix_ms', '9007199254740992.0'),
    outcome: 'invalid_invocation',
  },
  { name: 'a count written 1.5', text: () => number('input_bytes', '1.5'), outcome: 'invalid_invocation' },
  { name: 'a count written -1', text: () => number('input_bytes', '-1'), outcome: 'invalid_invocation' },
  { name: 'a count written 01', text: () => number('input_bytes', '01'), outcome: 'syntax' },

  // Shape.
  {
    name: 'a value wrapped in an array',
    text: () => edit('"tenant_id":"acme"', '"tenant_id":["acme"]'),
    outcome: 'invalid_invocation',
  },
  {
    name: 'the attributes wrapped in an array',
    text: () => {
      const attributes = JSON.stringify(LAB.target.attributes);
      return edit(`"attributes":${attributes}`, `"attributes":[${attributes}]`);
    },
    outcome: 'invalid_invocation',
  },
  { name: 'the whole text wrapped in an array', text: () => `[${TEXT}]`, outcome: 'invalid_invocation' },
  {
    name: 'an attribute value nested 5 deep',
    text: () => withRawAttribute('[[{"a":[["x"]]}]]'),
    outcome: 'invalid_invocation',
  },
  {
    name: 'an attribute value nested 40 deep',
    text: () => withRawAttribute(`${'['.repeat(40)}"x"${']'.repeat(40)}`),
    outcome: 'too_deep',
  },

  // Malformed text.
  { name: 'the text less its last character', text: () => TEXT.slice(0, -1), outcome: 'syntax' },
  { name: 'the text cut to 10 characters', text: () => TEXT.slice(0, 10), outcome: 'syntax' },
  { name: 'the empty text', text: () => '', outcome: 'syntax' },
  { name: 'one colon corrupted', text: () => edit(':', ';'), outcome: 'syntax' },
  {
    name: 'a raw control character in a string',
    text: () => withRawAttribute('"a\u0001"'),
    outcome: 'syntax',
  },
  { name: 'a leading byte-order mark', text: () => `\ufeff${TEXT}`, outcome: 'syntax' },

  // The size bound.
  {
    name: 'maxBytes one below the length',
    text: () => TEXT,
    limits: (t) => maxBytes(bytes(t) - 1),
    outcome: 'too_large',
  },
  { name: 'maxBytes at the length', text: () => TEXT, limits: (t) => maxBytes(bytes(t)), outcome: 'ok' },
  {
    name: 'maxBytes one above the length',
    text: () => TEXT,
    limits: (t) => maxBytes(bytes(t) + 1),
    outcome: 'ok',
  },
  {
    name: 'maxBytes at the UTF-16 length of a text with emoji (bytes exceed it)',
    text: () => withAttributes({ e: '😀'.repeat(20) }),
    limits: (t) => maxBytes(t.length),
    outcome: 'too_large',
  },
  {
    name: 'maxBytes one below the UTF-8 length of a text with emoji',
    text: () => withAttributes({ e: '😀é'.repeat(20) }),
    limits: (t) => maxBytes(bytes(t) - 1),
    outcome: 'too_large',
  },
  {
    name: 'maxBytes at the UTF-8 length of a text with emoji',
    text: () => withAttributes({ e: '😀é'.repeat(20) }),
    limits: (t) => maxBytes(bytes(t)),
    outcome: 'ok',
  },
  {
    name: 'long whitespace across a small maxBytes',
    text: () => `${' '.repeat(10_000)}${TEXT}`,
    limits: maxBytes(bytes(TEXT) + 100),
    outcome: 'too_large',
  },
  {
    name: 'long whitespace across the default maxBytes',
    text: () => `${TEXT}${'\n'.repeat(DEFAULT_JSON_LIMITS.maxBytes)}`,
    outcome: 'too_large',
  },

  // The depth floor.
  { name: 'maxDepth 0', text: () => TEXT, limits: depth(0), outcome: 'too_deep' },
  { name: 'maxDepth 1', text: () => TEXT, limits: depth(1), outcome: 'too_deep' },
  { name: 'maxDepth 2', text: () => TEXT, limits: depth(2), outcome: 'too_deep' },
  { name: 'maxDepth 2.5', text: () => TEXT, limits: depth(2.5), outcome: 'too_deep' },
  { name: 'maxDepth 3', text: () => TEXT, limits: depth(3), outcome: 'ok' },
  { name: 'maxDepth 4', text: () => TEXT, limits: depth(4), outcome: 'ok' },
  {
    name: 'maxDepth 1000 (past the decoder’s fast walk)',
    text: () => TEXT,
    limits: depth(1000),
    outcome: 'ok',
  },
  {
    name: 'maxDepth 2 with no approval (target.attributes is still depth 3)',
    text: () => JSON.stringify({ ...LAB, approval: null }),
    limits: depth(2),
    outcome: 'too_deep',
  },
];

describe('decodeToolInvocation: named examples', () => {
  for (const ex of EXAMPLES) {
    it(ex.name, () => {
      const text = ex.text();
      const limits = typeof ex.limits === 'function' ? ex.limits(text) : (ex.limits ?? DEFAULT_JSON_LIMITS);
      expectOutcome(expectAgrees(text, limits), ex.outcome);
    });
  }

  it('decodes the lab text to the lab invocation, frozen and validated', () => {
    const r = decodeToolInvocation(TEXT);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.value).toStrictEqual(LAB);
    expect(Object.isFrozen(r.value) && Object.isFrozen(r.value.target.attributes)).toBe(true);
    expect(isValidatedInvocation(r.value)).toBe(true);
  });

  it('keeps -0 as the general route does', () => {
    const r = expectAgrees(number('input_bytes', '-0'));
    expect(r.ok && Object.is(r.value.input_bytes, -0)).toBe(true);
  });
});
