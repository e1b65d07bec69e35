/**
 * Issue 11, offline bundles for the two receipt kinds that had none: reconciliation receipts (the
 * policy's clock skew is now kept in their evidence) and refused observations whose payload or
 * error detail was withheld (replayed from digests, sizes and findings). Each bundle comes from
 * the service and is checked with the CLI verifier; a changed byte of its inputs is caught: the
 * receipts are issued under the versions that bind what these bundles carry (reconciliation
 * version 2 binds the clock skew, observation version 3 the withheld bytes' digest and size).
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Seeded } from '../../../scripts/seed.js';
import { runVerify } from '../../../src/cli/verify.js';
import { env } from 'cloudflare:workers';
import { digestOf, sha256HexOfText } from '../../../src/core/canonical/canonical.js';
import type { RawToolErrorObservation, RawToolObservation } from '../../../src/core/observation/index.js';
import { parsePublicKeySet } from '../../../src/core/receipts/keys.js';
import { verifyBundleBytes } from '../../../src/verify/bundle.js';
import { receiptLogVerifier } from '../../../src/verify/log.js';
import {
  type Json,
  authorizedRollback,
  call,
  claim,
  observe,
  reconcile,
  report,
  seedTenant,
  uniqueName,
} from '../executions/helpers.js';
import { tenantStore } from '../../../src/platform/bindings.js';
import { tenantRef } from '../platform/harness.js';

/** Each test seeds a tenant over HTTP; with every test file running in parallel that takes seconds. */
const SLOW_MS = 30_000;
const OUTPUT = '{"generation":8,"status":"rolled_back"}';
const ERROR_DETAIL = '{"error":"conflict"}';

afterEach(() => {
  vi.useRealTimers();
});

/** Move the clock of this isolate (the Worker and its Durable Objects run in it too). */
function advanceTo(t: number): void {
  vi.useFakeTimers({ toFake: ['Date'] });
  vi.setSystemTime(t);
}

async function keySet(): Promise<unknown> {
  const r = await call('GET', '/.well-known/writ-keys');
  expect(r.status).toBe(200);
  return r.body;
}

/** Verify a bundle as `npx writ verify bundle.json --keys keys.json` would (injected files). */
async function cliVerify(bundle: string, keys: unknown): Promise<{ code: number; out: string }> {
  const files: Record<string, string> = { 'b.json': bundle, 'k.json': JSON.stringify(keys) };
  const out: string[] = [];
  const code = await runVerify(['b.json', '--keys', 'k.json'], {
    readFile: async (p) => new TextEncoder().encode(files[p] ?? ''),
    stdout: (t) => out.push(t),
    stderr: (t) => out.push(t),
  });
  return { code, out: out.join('') };
}

/**
 * Change every byte of the bundle's text between `from` and `to` (a section of its inputs), one at
 * a time, and return the offsets whose change the verifier did not catch.
 */
function undetected(text: string, keys: unknown, from: number, to: number): number[] {
  const k = parsePublicKeySet(keys);
  if (!k.ok) throw new Error(k.error.message);
  const bytes = new TextEncoder().encode(text);
  const missed: number[] = [];
  for (let i = from; i < to; i++) {
    const copy = bytes.slice();
    const b = copy[i] as number;
    // Digits stay digits (a changed number, not a parse error); anything else flips its low bit.
    copy[i] = b >= 0x30 && b <= 0x39 ? 0x30 + ((b - 0x30 + 1) % 10) : b ^ 1;
    const v = verifyBundleBytes(copy, { trustedKeys: k.value, logVerifier: receiptLogVerifier });
    if (v.valid) missed.push(i);
  }
  return missed;
}

/** The UTF-8 byte range of `"key":{...}` (its first occurrence at or after `after`) in compact JSON text. */
function section(text: string, key: string, after = 0): [number, number] {
  const start = text.indexOf(`"${key}":{`, after);
  if (start < 0) throw new Error(`no ${key} section`);
  let depth = 0;
  for (let i = text.indexOf('{', start); i < text.length; i++) {
    if (text[i] === '{') depth++;
    else if (text[i] === '}' && --depth === 0) {
      // The checkpoint's signature lines hold non-ASCII (an em dash): count bytes, not characters.
      const bytes = (t: string) => new TextEncoder().encode(t).byteLength;
      return [bytes(text.slice(0, start)), bytes(text.slice(0, i + 1))];
    }
  }
  throw new Error('unbalanced');
}

async function bundleOf(s: Seeded, sha: string): Promise<string> {
  const b = await call('GET', `/v1/receipts/${sha}/bundle`, { key: s.admin.api_key });
  expect(b.status, JSON.stringify(b.body)).toBe(200);
  return JSON.stringify(b.body);
}

async function executed(s: Seeded, outcome: 'succeeded' | 'failed_no_effect') {
  const a = await authorizedRollback(s);
  const c = await claim(s, a.sha256);
  const r = await report(s, c.body.operation_id, c.body.fencing_token, observe(a.receipt, outcome));
  expect(r.status).toBe(200);
  return { authorization: a.receipt, execution: r.body.execution_receipt as Json };
}

function common(s: Seeded, e: { authorization: Json; execution: Json }) {
  return {
    observation_id: uniqueName('obs'),
    tenant_id: s.tenant_id,
    policy_sha256: s.policy_sha256,
    tool_contract_sha256: s.rollback_contract_sha256,
    invocation_sha256: e.authorization.body.invocation_sha256 as string,
    execution_receipt_sha256: e.execution.sha256 as string,
    source_release: 'deploy-api 2026.11.3',
    media_type: 'application/json',
    observed_at_unix_ms: e.execution.body.completed_at_unix_ms as number,
  };
}

describe('offline bundles of reconciliation receipts and withheld observations', { timeout: SLOW_MS }, () => {
  it('a reconciliation receipt: bundled with the stored clock skew, verified offline; a changed byte fails', async () => {
    const s = await seedTenant('bundle-recon');
    const a = await authorizedRollback(s);
    const c = await claim(s, a.sha256);
    const id = c.body.operation_id as string;
    await report(s, id, c.body.fencing_token, observe(a.receipt, 'indeterminate'));
    // The target's clock runs 2 s ahead of ours: within the policy's 5 s skew, so the skew the
    // receipt was computed with matters to its recomputation.
    const t0 = Date.now();
    advanceTo(t0);
    const target = observe(a.receipt, 'failed_no_effect', { at: t0 + 1_995, tookMs: 5 });
    const rec = await reconcile(s, id, target, s.admin.api_key);
    expect(rec.status).toBe(201);
    const sha = rec.body.reconciliation_receipt.sha256 as string;
    expect(rec.body.reconciliation_receipt.body.reconciled_at_unix_ms).toBe(t0);
    const keys = await keySet();

    const text = await bundleOf(s, sha);
    const bundle = JSON.parse(text);
    expect(bundle.inputs).toMatchObject({
      kind: 'reconciliation',
      operation_id: id,
      max_clock_skew_ms: 5_000,
      reconciled_at_unix_ms: t0,
      original: { sha256: rec.body.execution_receipt.sha256 },
    });
    const v = await cliVerify(text, keys);
    expect(v.out).toMatch(/^VALID reconciliation receipt/);
    expect(v.code).toBe(0);
    // Every byte of the target observation is bound (its digest is in the receipt body).
    const obs = section(text, 'observation', text.indexOf('"inputs":'));
    expect(undetected(text, keys, obs[0], obs[1])).toEqual([]);
    // Version 2 binds the skew: a smaller one (which would refuse the target) and a larger one
    // (which would also have passed the check) both fail to recompute this receipt.
    expect(bundle.receipt.body).toMatchObject({ receipt_version: 2, max_clock_skew_ms: 5_000 });
    for (const skew of ['1000', '6000']) {
      const changed = text.replace('"max_clock_skew_ms":5000', `"max_clock_skew_ms":${skew}`);
      expect(changed).not.toBe(text);
      const refused = await cliVerify(changed, keys);
      expect(refused.code).toBe(1);
      expect(refused.out).toContain('receipt_mismatch');
    }

    // A version 1 receipt from before the skew was kept (its evidence is the observation alone):
    // 409 with the reason, never a guessed skew. Stored receipts are immutable, so it is written
    // as new.
    const { max_clock_skew_ms: _skew, ...current } = bundle.receipt.body;
    const body = { ...current, receipt_version: 1, reconciled_at_unix_ms: t0 + 1 };
    await tenantStore(env, tenantRef(s)).insertReceipt({
      kind: 'reconciliation',
      receipt: { sha256: digestOf(body), body },
      outcome: 'verified_failed_no_effect',
      evidence: { observation: bundle.inputs.observation },
      created_at_unix_ms: t0 + 1,
    });
    const old = await call('GET', `/v1/receipts/${digestOf(body)}/bundle`, { key: s.admin.api_key });
    expect(old.status).toBe(409);
    expect(old.body.error.code).toBe('bundle_unavailable');
    expect(old.body.error.message).toMatch(/clock skew/);
  });

  it('a refused output observation whose payload was withheld: verified offline; a changed byte of what was kept fails', async () => {
    const s = await seedTenant('bundle-withheld');
    const e = await executed(s, 'succeeded');
    const swapped = '{"generation":9,"status":"rolled_back"}';
    const raw: RawToolObservation = {
      ...common(s, e),
      source_generation: 8,
      source_as_of_unix_ms: e.execution.body.completed_at_unix_ms as number,
      payload: swapped,
      artifact: null,
      payload_sha256: sha256HexOfText(OUTPUT),
      payload_bytes: new TextEncoder().encode(OUTPUT).byteLength,
      locators: [],
    };
    const r = await call('POST', '/v1/observations', {
      key: s.executor.api_key,
      body: { kind: 'output', observation: raw },
    });
    expect(r.status).toBe(403);
    expect(r.body.decision).toBe('rejected');
    const keys = await keySet();

    const text = await bundleOf(s, r.body.receipt.sha256 as string);
    const bundle = JSON.parse(text);
    expect(bundle.inputs.kind).toBe('observation');
    expect(bundle.inputs.validation.observation).not.toHaveProperty('payload');
    expect(bundle.inputs.validation.withheld).toMatchObject({
      actual_sha256: sha256HexOfText(swapped),
      content_violations: [],
    });
    expect(text).not.toContain('"generation":9');
    const v = await cliVerify(text, keys);
    expect(v.out).toMatch(/^VALID observation receipt/);
    expect(v.code).toBe(0);
    // Version 3 (and later) binds the findings' digest and size: every byte of what was kept is bound.
    expect(bundle.receipt.body).toMatchObject({
      receipt_version: 7,
      actual_sha256: sha256HexOfText(swapped),
      actual_bytes: new TextEncoder().encode(swapped).byteLength,
    });
    const [from, to] = section(text, 'withheld');
    expect(undetected(text, keys, from, to)).toEqual([]);
    const o = section(text, 'observation', text.indexOf('"inputs":'));
    expect(undetected(text, keys, o[0], o[1])).toEqual([]);
    // Without its findings the withheld form is no replay input of any kind.
    const { withheld: _w, ...bare } = bundle.inputs.validation;
    const stripped = { ...bundle, inputs: { ...bundle.inputs, validation: bare } };
    const v2 = await cliVerify(JSON.stringify(stripped), keys);
    expect(v2.code).toBe(1);
    expect(v2.out).toContain('malformed_bundle');
  });

  it('a refused error observation whose detail was withheld: verified offline; a changed byte of what was kept fails likewise', async () => {
    const s = await seedTenant('bundle-withheld-err');
    const e = await executed(s, 'failed_no_effect');
    const raw: RawToolErrorObservation = {
      ...common(s, e),
      error_code: 'conflict',
      detail: '{"error":"other"}',
      detail_sha256: sha256HexOfText(ERROR_DETAIL),
      detail_bytes: ERROR_DETAIL.length,
    };
    const r = await call('POST', '/v1/observations', {
      key: s.executor.api_key,
      body: { kind: 'error', observation: raw },
    });
    expect(r.status).toBe(403);
    expect(r.body.decision).toBe('rejected');
    const keys = await keySet();

    const text = await bundleOf(s, r.body.receipt.sha256 as string);
    const bundle = JSON.parse(text);
    expect(bundle.inputs.kind).toBe('error_observation');
    expect(bundle.inputs.validation.observation).not.toHaveProperty('detail');
    const v = await cliVerify(text, keys);
    expect(v.out).toMatch(/^VALID error_observation receipt/);
    expect(v.code).toBe(0);
    expect(bundle.receipt.body).toMatchObject({ receipt_version: 7, actual_bytes: 17 });
    const [from, to] = section(text, 'withheld');
    expect(undetected(text, keys, from, to)).toEqual([]);
  });
});
