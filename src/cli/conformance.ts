/**
 * `writ conformance keygen` and `writ conformance executor <url>`: the executor conformance kit
 * (issue 11). The kit signs authorization receipts with its own test key, sends an executor
 * endpoint a valid request and requests it must refuse (missing, unsigned, untrusted key, denied,
 * expired, back-dated signature, deadline beyond the policy limit, mutated, replayed, wrong
 * audience, other input), and reports each one it wrongly
 * accepted. The endpoint contract is docs/executors.md.
 *
 * Keys: `keygen` draws a fresh Ed25519 key, writes the kit's private key ring (`--ring`) and the
 * matching public key set (`--keys`); the executor under test is started trusting that key set
 * and nothing else (a test key must never be trusted in production). `executor` signs with the
 * ring. Nothing of the key travels in a request: an executor that took keys from a request would
 * trust anyone.
 *
 * Exit 0: every case answered as the contract requires. Exit 1: a case was wrongly accepted (or
 * the valid request was refused, so the run proved nothing). Exit 2: usage.
 */
import { digestOf, sha256Hex } from '../core/canonical/canonical.js';
import { canonicalize } from '../core/canonical/canonical.js';
import { type JsonValue, utf8Encode } from '../core/canonical/json.js';
import { AuthorizationReceiptBodyV2 } from '../core/model.js';
import { POLICY_LIMITS } from '../core/policy.js';
import { generateKeyRing, type KeyRing, parseKeyRing, publicKeySet } from '../core/receipts/keys.js';
import { signReceipt, type SignatureEnvelope } from '../core/receipts/signing.js';
import { type CliIo, EXIT, type ExitCode } from './io.js';
import { table } from './remote.js';

export const CONFORMANCE_USAGE = [
  'usage: writ conformance keygen --ring <kit-ring.json> --keys <kit-keys.json>',
  '       writ conformance executor <url> --ring <kit-ring.json> --release <executor release>',
  '                                 [--principal <executor principal id>] [--json]',
].join('\n');

/** The request an executor endpoint receives (docs/executors.md). */
export const EXECUTOR_REQUEST_VERSION = 1;
export const KIT_ISSUER = 'writ-conformance.invalid';
const KIT_TENANT = 'ten-conformance';
/** How long a kit receipt may be dispatched after issue. */
const DISPATCH_WINDOW_MS = 5 * 60_000;
/** Kit keys are valid from a day before they are made, so the expired case's past issue time is inside. */
const KEY_BACKDATE_MS = 24 * 60 * 60_000;

export type Expectation = 'accept' | 'refuse';

interface KitReceipt {
  readonly sha256: string;
  readonly body: AuthorizationReceiptBodyV2;
}

export interface ConformanceCase {
  readonly name: string;
  readonly expect: Expectation;
  readonly description: string;
  /** The JSON text sent; the replay case re-sends the valid case's bytes. */
  readonly body: string;
}

export interface CaseResult {
  readonly case: string;
  readonly expected: Expectation;
  /** HTTP status, or 0 when the endpoint could not be reached. */
  readonly status: number;
  readonly accepted: boolean;
  /** The executor's refusal reason, when it gave one. */
  readonly reason: string | null;
  readonly verdict: 'pass' | 'wrongly_accepted' | 'wrongly_refused';
}

export interface KitAudience {
  readonly executor_release: string;
  readonly executor_principal_id: string | null;
}

/** A fresh key ring document and its public key set, from 32 random bytes. */
export function kitKeys(seed: Uint8Array, now: number) {
  const doc = generateKeyRing(seed, KIT_ISSUER, now - KEY_BACKDATE_MS);
  const ring = parseKeyRing(JSON.stringify(doc));
  if (!ring.ok) throw new Error(ring.error.message);
  return { ring: doc, keys: publicKeySet(ring.value, now) };
}

/**
 * Every case, in the order sent: the valid one first, then its replay, then the rest. Each
 * refused case but the replay carries a receipt of its own (fresh invocation and key), so an
 * executor that refuses it for having seen it before would still be caught by another case.
 */
export function buildCases(
  ring: KeyRing,
  audience: KitAudience,
  now: number,
  random: (n: number) => Uint8Array,
): ConformanceCase[] {
  const stranger = parseKeyRing(
    JSON.stringify(generateKeyRing(random(32), KIT_ISSUER, now - KEY_BACKDATE_MS)),
  );
  if (!stranger.ok) throw new Error(stranger.error.message);
  const fresh = () => {
    const nonce = sha256Hex(random(16)).slice(0, 24);
    return { nonce, input: { conformance: true, nonce } as JsonValue };
  };
  const request = (receipt: unknown, signature: unknown, input: JsonValue) =>
    JSON.stringify({
      writ_executor_request: EXECUTOR_REQUEST_VERSION,
      authorization_receipt: receipt,
      signature,
      input,
    });
  const issue = (o: Partial<AuthorizationReceiptBodyV2> = {}, signer: KeyRing = ring, signedAt?: number) => {
    const { nonce, input } = fresh();
    const receipt = authorization(audience, input, nonce, now, o);
    return {
      receipt,
      signature: sign(signer, receipt, signedAt ?? receipt.body.evaluated_at_unix_ms),
      input,
    };
  };

  const valid = issue();
  const cases: ConformanceCase[] = [
    {
      name: 'valid',
      expect: 'accept',
      description: 'a signed, unexpired receipt for this executor and this input',
      body: request(valid.receipt, valid.signature, valid.input),
    },
  ];
  const refuse = (name: string, description: string, body: string) =>
    cases.push({ name, expect: 'refuse', description, body });
  refuse('replayed', 'the valid request again, byte for byte', cases[0]?.body as string);
  const m = issue();
  refuse('missing', 'no authorization receipt', request(null, m.signature, m.input));
  const u = issue();
  refuse('unsigned', 'a valid receipt without its signature', request(u.receipt, null, u.input));
  const k = issue({}, stranger.value);
  refuse(
    'untrusted_key',
    'signed by a key the executor does not trust',
    request(k.receipt, k.signature, k.input),
  );
  const d = issue({ decision: 'denied', violations: ['approval_missing'] });
  refuse('denied', 'a signed denial', request(d.receipt, d.signature, d.input));
  const e = issue({
    evaluated_at_unix_ms: now - 2 * DISPATCH_WINDOW_MS,
    requested_at_unix_ms: now - 2 * DISPATCH_WINDOW_MS,
    dispatch_deadline_unix_ms: now - DISPATCH_WINDOW_MS,
  });
  refuse('expired', 'signed, past its dispatch deadline', request(e.receipt, e.signature, e.input));
  // A key's window is checked at the signature's date, which its signer chooses: a date other
  // than the evaluation's is how a retired (stolen) key would make a receipt evaluated today.
  const b = issue({}, ring, now - DISPATCH_WINDOW_MS);
  refuse(
    'backdated_signature',
    'signed by the trusted key, the signature dated before the evaluation',
    request(b.receipt, b.signature, b.input),
  );
  const l = issue({ dispatch_deadline_unix_ms: now + POLICY_LIMITS.authorizationMaxDispatchMs + 1 });
  refuse(
    'deadline_beyond_limit',
    'signed, its deadline more than the policy limit (one hour) after the evaluation',
    request(l.receipt, l.signature, l.input),
  );
  const x = issue();
  const mutated = {
    sha256: x.receipt.sha256,
    body: {
      ...x.receipt.body,
      dispatch_deadline_unix_ms: x.receipt.body.dispatch_deadline_unix_ms + 86_400_000,
    },
  };
  refuse(
    'mutated',
    'the deadline moved after signing (digest and signature kept)',
    request(mutated, x.signature, x.input),
  );
  const w = issue({ executor_release: `${audience.executor_release} (other)` });
  refuse('wrong_audience', 'signed for another executor release', request(w.receipt, w.signature, w.input));
  if (audience.executor_principal_id !== null) {
    const p = issue({ executor_principal_id: `${audience.executor_principal_id}-other` });
    refuse(
      'wrong_principal',
      'signed for another executor principal',
      request(p.receipt, p.signature, p.input),
    );
  }
  const i = issue();
  refuse(
    'input_mismatch',
    'a valid receipt with other input bytes',
    request(i.receipt, i.signature, fresh().input),
  );
  return cases;
}

function authorization(
  audience: KitAudience,
  input: JsonValue,
  nonce: string,
  now: number,
  o: Partial<AuthorizationReceiptBodyV2>,
): KitReceipt {
  const canonical = utf8Encode(canonicalize(input));
  const label = (what: string) => sha256Hex(utf8Encode(`writ-conformance/${what}`));
  const body = AuthorizationReceiptBodyV2.parse({
    receipt_kind: 'authorization',
    receipt_version: 2,
    tenant_id: KIT_TENANT,
    principal_id: 'prn-conformance-agent',
    policy_sha256: label('policy'),
    tool_contract_sha256: label('contract'),
    grant_sha256: label('grant'),
    invocation_sha256: label(`invocation/${nonce}`),
    trusted_state_sha256: label(`trusted/${nonce}`),
    invocation_id: `inv-${nonce}`,
    run_envelope_sha256: label('run'),
    input_sha256: sha256Hex(canonical),
    input_bytes: canonical.byteLength,
    effect: 'external_write',
    target: { type: 'conformance', attributes: { case: nonce } },
    idempotency_key: `conformance-${nonce}`,
    approval_id: null,
    requested_at_unix_ms: now,
    evaluated_at_unix_ms: now,
    decision: 'authorized',
    violations: [],
    executor_release: audience.executor_release,
    executor_principal_id: audience.executor_principal_id,
    dispatch_deadline_unix_ms: now + DISPATCH_WINDOW_MS,
    named_principal_id: null,
    named_tenant_id: null,
    ...o,
  });
  return { sha256: digestOf(body), body };
}

function sign(ring: KeyRing, receipt: KitReceipt, at: number): SignatureEnvelope {
  const s = signReceipt(ring, receipt, at);
  if (!s.ok) throw new Error(s.error.message);
  return s.value;
}

/** Send every case to `url`, in order; the answer's status alone says accepted (2xx) or not. */
export async function runCases(
  url: string,
  cases: readonly ConformanceCase[],
  fetcher: (request: Request) => Promise<Response>,
): Promise<CaseResult[]> {
  const results: CaseResult[] = [];
  for (const c of cases) {
    let status = 0;
    let reason: string | null = null;
    try {
      const res = await fetcher(
        new Request(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: c.body }),
      );
      status = res.status;
      reason = refusalReason(await res.text());
    } catch {
      // Unreachable, or the connection dropped: counts as not accepted (status 0).
    }
    const accepted = status >= 200 && status < 300;
    const verdict =
      c.expect === 'accept'
        ? accepted
          ? 'pass'
          : 'wrongly_refused'
        : accepted
          ? 'wrongly_accepted'
          : 'pass';
    results.push({ case: c.name, expected: c.expect, status, accepted, reason, verdict });
  }
  return results;
}

function refusalReason(text: string): string | null {
  try {
    const v = JSON.parse(text) as unknown;
    if (typeof v === 'object' && v !== null && 'reason' in v && typeof v.reason === 'string') {
      return v.reason.slice(0, 64);
    }
  } catch {
    // Not JSON: the status alone counts.
  }
  return null;
}

// ---------------------------------------------------------------------------------------------
// The command

interface Flags {
  readonly positional: string[];
  readonly ring: string | null;
  readonly keys: string | null;
  readonly release: string | null;
  readonly principal: string | null;
  readonly json: boolean;
}

function parseFlags(argv: readonly string[]): Flags | string {
  const f = {
    positional: [] as string[],
    ring: null,
    keys: null,
    release: null,
    principal: null,
    json: false,
  } as {
    positional: string[];
    ring: string | null;
    keys: string | null;
    release: string | null;
    principal: string | null;
    json: boolean;
  };
  const valued = {
    '--ring': 'ring',
    '--keys': 'keys',
    '--release': 'release',
    '--principal': 'principal',
  } as const;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--json') f.json = true;
    else if (Object.prototype.hasOwnProperty.call(valued, a)) {
      const v = argv[++i];
      if (v === undefined || v.startsWith('--')) return `${a} needs a value`;
      f[valued[a as keyof typeof valued]] = v;
    } else if (a.startsWith('-')) return `unknown option "${a.slice(0, 32)}"`;
    else f.positional.push(a);
  }
  return f;
}

export async function runConformance(argv: readonly string[], io: CliIo): Promise<ExitCode> {
  const [sub, ...rest] = argv;
  const flags = parseFlags(rest);
  if (typeof flags === 'string') return usage(io, flags);
  const now = (io.now ?? Date.now)();
  const random = (n: number) => crypto.getRandomValues(new Uint8Array(n));
  if (sub === 'keygen') {
    if (flags.ring === null || flags.keys === null) return usage(io, 'keygen needs --ring and --keys');
    if (flags.positional.length > 0) return usage(io, `unexpected "${flags.positional[0]?.slice(0, 32)}"`);
    if (io.writeFile === undefined) return usage(io, 'this environment cannot write files');
    const k = kitKeys(random(32), now);
    await io.writeFile(flags.ring, `${JSON.stringify(k.ring, null, 2)}\n`);
    await io.writeFile(flags.keys, `${JSON.stringify(k.keys, null, 2)}\n`);
    io.stdout(
      `wrote the kit's private key ring to ${flags.ring} and its public key set to ${flags.keys}\n` +
        'start the executor under test trusting only the public key set, then run `writ conformance executor`\n',
    );
    return EXIT.ok;
  }
  if (sub !== 'executor')
    return usage(io, sub === undefined ? 'missing subcommand' : `unknown subcommand "${sub.slice(0, 32)}"`);
  const [url, ...extra] = flags.positional;
  if (url === undefined || !/^https?:\/\//.test(url)) return usage(io, 'the executor url is http(s)://...');
  if (extra.length > 0) return usage(io, `unexpected "${extra[0]?.slice(0, 32)}"`);
  if (flags.ring === null) return usage(io, 'executor needs --ring (from `writ conformance keygen`)');
  if (flags.release === null) return usage(io, 'executor needs --release (the executor release under test)');
  let ringText: string;
  try {
    ringText = new TextDecoder().decode(await io.readFile(flags.ring));
  } catch {
    return usage(io, `cannot read ${JSON.stringify(flags.ring.slice(0, 128))}`);
  }
  const ring = parseKeyRing(ringText);
  if (!ring.ok)
    return usage(io, `${JSON.stringify(flags.ring.slice(0, 128))} is not a key ring: ${ring.error.message}`);
  const cases = buildCases(
    ring.value,
    { executor_release: flags.release, executor_principal_id: flags.principal },
    now,
    random,
  );
  const results = await runCases(url, cases, io.fetch ?? ((r) => fetch(r)));
  const wronglyAccepted = results.filter((r) => r.verdict === 'wrongly_accepted');
  const validRefused = results.some((r) => r.verdict === 'wrongly_refused');
  const ok = wronglyAccepted.length === 0 && !validRefused;
  if (flags.json) {
    io.stdout(
      `${JSON.stringify({ ok, url, wrongly_accepted: wronglyAccepted.map((r) => r.case), results })}\n`,
    );
  } else {
    const rows = [['case', 'expected', 'status', 'verdict', 'executor reason']];
    for (const r of results) {
      rows.push([
        r.case,
        r.expected,
        r.status === 0 ? 'unreachable' : String(r.status),
        r.verdict.toUpperCase(),
        r.reason ?? '',
      ]);
    }
    io.stdout(table(rows));
    if (validRefused) {
      io.stdout(
        'the valid request was refused: nothing else can be judged. Does the executor trust the kit’s key set, run --release and, with --principal, hold that principal?\n',
      );
    }
    // Say what failed: a refused valid request is not "wrongly accepted: none".
    const failures = [
      ...(validRefused ? ['the valid request was refused'] : []),
      ...(wronglyAccepted.length > 0
        ? [`wrongly accepted: ${wronglyAccepted.map((r) => r.case).join(', ')}`]
        : []),
    ];
    io.stdout(
      ok
        ? `PASS: the executor refused all ${results.length - 1} requests it must refuse\n`
        : `FAIL: ${failures.join('; ')}\n`,
    );
  }
  return ok ? EXIT.ok : EXIT.invalid;
}

function usage(io: CliIo, why: string): ExitCode {
  io.stderr(`writ conformance: ${why}\n${CONFORMANCE_USAGE}\n`);
  return EXIT.usage;
}
