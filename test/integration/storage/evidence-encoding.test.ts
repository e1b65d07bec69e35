/**
 * Issue 10, "Bounded D1": authorization evidence stored positionally (src/db/evidence-encoding.ts)
 * reads everywhere as the evidence object it stands for: `GET /v1/receipts/{sha}` (and its
 * replay), offline bundles (checked with `writ verify`'s library), and tenant moves, whose exports
 * carry the object as before and whose imports store the array again. Rows written as objects
 * before it (simulated by rewriting a row) read as they always did; an edited array is refused.
 */
import { describe, expect, it } from 'vitest';
import { canonicalize } from '../../../src/core/canonical/canonical.js';
import { runVerify } from '../../../src/cli/verify.js';
import {
  type Json,
  READ_INPUT,
  authorize,
  call,
  createRun,
  exportTenant,
  importTo,
  seedTenant,
  shardD1,
  shardOf,
  tenantD1,
} from '../platform/harness.js';
import { authorizedRollback } from '../executions/helpers.js';

/** Each test seeds a tenant over HTTP; with every test file running in parallel that takes seconds. */
const SLOW_MS = 60_000;

/** The evidence of an allowed read-only call as `authorizationEvidence` builds it (225 bytes as an object). */
const READ_ONLY_EVIDENCE = {
  evidence_version: 2,
  trusted_state: {
    approval_required_effects: ['external_write', 'irreversible'],
    approval_unusable: false,
    contract_quarantined: false,
    grant_revoked: false,
    principal_revoked: false,
    run_violations: [],
  },
};

async function storedEvidence(db: D1Database, tenant_id: string, sha: string): Promise<string | null> {
  const r = await db
    .prepare('SELECT evidence FROM receipts WHERE tenant_id = ? AND sha256 = ?')
    .bind(tenant_id, sha)
    .first<{ evidence: string | null }>();
  return r?.evidence ?? null;
}

/**
 * Rewrite a stored receipt's evidence text, around the trigger that keeps receipts append-only,
 * as an operator with raw access would (or as a row written before the positional encoding is).
 */
async function rewriteEvidence(db: D1Database, tenant_id: string, sha: string, text: string) {
  await db.batch([
    db.prepare('DROP TRIGGER receipts_no_update'),
    db
      .prepare('UPDATE receipts SET evidence = ? WHERE tenant_id = ? AND sha256 = ?')
      .bind(text, tenant_id, sha),
    db.prepare(
      "CREATE TRIGGER `receipts_no_update` BEFORE UPDATE ON `receipts` BEGIN SELECT RAISE(ABORT, 'receipt_immutable'); END",
    ),
  ]);
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

describe('positional authorization evidence', { timeout: SLOW_MS }, () => {
  it('is stored for an allowed read-only call, replays through GET, and bundles as the object did', async () => {
    const s = await seedTenant('evpos');
    const r = await authorize(s, {
      tool_contract_sha256: s.read_contract_sha256,
      input: READ_INPUT,
      run_id: await createRun(s),
    });
    expect(r.status).toBe(200);
    const sha = r.body.receipt.sha256 as string;
    const db = tenantD1(s);
    const text = await storedEvidence(db, s.tenant_id, sha);
    expect(text).toBe('[2,["external_write","irreversible"],0,0,0,0,[]]');

    const got = await call('GET', `/v1/receipts/${sha}`, { key: s.admin.api_key });
    expect(got.status).toBe(200);
    expect(got.body.evidence).toEqual(READ_ONLY_EVIDENCE);
    expect(got.body.replay).toEqual({ ok: true, differences: [] });

    const keys = await keySet();
    const bundle = await call('GET', `/v1/receipts/${sha}/bundle`, { key: s.admin.api_key });
    expect(bundle.status).toBe(200);
    const v = await cliVerify(JSON.stringify(bundle.body), keys);
    expect(v.out).toMatch(/^VALID authorization receipt/);
    expect(v.code).toBe(0);

    // The same row with its evidence as an object (every row before this encoding): the same
    // answer, the same bundle byte for byte.
    await rewriteEvidence(db, s.tenant_id, sha, canonicalize(READ_ONLY_EVIDENCE));
    const old = await call('GET', `/v1/receipts/${sha}`, { key: s.admin.api_key });
    expect(old.status).toBe(200);
    expect(old.body).toEqual(got.body);
    const oldBundle = await call('GET', `/v1/receipts/${sha}/bundle`, { key: s.admin.api_key });
    expect(oldBundle.status).toBe(200);
    expect(canonicalize(oldBundle.body as Json)).toBe(canonicalize(bundle.body as Json));
  });

  it('is stored for an approved write call (its approval in the array) and replays', async () => {
    const s = await seedTenant('evappr');
    const a = await authorizedRollback(s);
    const text = (await storedEvidence(tenantD1(s), s.tenant_id, a.sha256)) ?? '';
    expect(text.startsWith('[2,["external_write","irreversible"],0,0,0,0,[],{"approval_id":')).toBe(true);
    const got = await call('GET', `/v1/receipts/${a.sha256}`, { key: s.admin.api_key });
    expect(got.status).toBe(200);
    expect(got.body.replay).toEqual({ ok: true, differences: [] });
    expect(Object.keys(got.body.evidence as object).sort()).toEqual([
      'approval',
      'evidence_version',
      'trusted_state',
    ]);
    expect(canonicalize(got.body.evidence as Json).length).toBeGreaterThan(text.length);
  });

  it('is stored for a denial under the empty grant (the grant in the array) and replays', async () => {
    const s = await seedTenant('evdeny');
    const stranger = await call('POST', '/v1/principals', {
      key: s.admin.api_key,
      body: { name: 'no grants', roles: ['agent'] },
    });
    const run = await call('POST', '/v1/runs', {
      key: stranger.body.api_key,
      body: { max_calls: 1, max_external_writes: 0, max_duration_ms: 60_000 },
    });
    const denied = await call('POST', '/v1/authorize', {
      key: stranger.body.api_key,
      body: { tool_contract_sha256: s.read_contract_sha256, input: READ_INPUT, run_id: run.body.run_id },
    });
    expect(denied.status).toBe(403);
    const sha = denied.body.receipt.sha256 as string;
    const text = (await storedEvidence(tenantD1(s), s.tenant_id, sha)) ?? '';
    // No approval (null), then the embedded empty grant.
    expect(text).toMatch(/^\[2,\["external_write","irreversible"\],0,0,0,0,\[\],null,\{/);
    const got = await call('GET', `/v1/receipts/${sha}`, { key: s.admin.api_key });
    expect(got.status).toBe(200);
    expect(got.body.evidence.grant.grant_id).toBe('grant-none');
    expect(got.body.replay).toEqual({ ok: true, differences: [] });
  });

  it('an edited array is refused on read (500), never served as other evidence', async () => {
    const s = await seedTenant('evedit');
    const r = await authorize(s, {
      tool_contract_sha256: s.read_contract_sha256,
      input: READ_INPUT,
      run_id: await createRun(s),
    });
    const sha = r.body.receipt.sha256 as string;
    const db = tenantD1(s);
    for (const edited of [
      // The grant marked revoked: a well-formed array, no longer what the body's digest binds.
      '[2,["external_write","irreversible"],0,0,1,0,[]]',
      '[2,["external_write"],0,0,0,0,[]]',
      '[2,["external_write","irreversible"],0,0,0,0]',
      '[2,["external_write","irreversible"],0,0,0,0,[],null]',
      '[2,["external_write","irreversible"],false,false,false,false,[]]',
      '[2, ["external_write","irreversible"],0,0,0,0,[]]',
    ]) {
      await rewriteEvidence(db, s.tenant_id, sha, edited);
      const got = await call('GET', `/v1/receipts/${sha}`, { key: s.admin.api_key });
      expect(got.status).toBe(500);
    }
  });

  it('moves with its tenant: the export carries objects, old and new rows alike; the import stores arrays', async () => {
    const s = await seedTenant('evmove');
    const run = await createRun(s);
    const shas: string[] = [];
    for (let i = 0; i < 2; i++) {
      const r = await authorize(s, {
        tool_contract_sha256: s.read_contract_sha256,
        input: READ_INPUT,
        run_id: run,
      });
      expect(r.status).toBe(200);
      shas.push(r.body.receipt.sha256 as string);
    }
    const a = await authorizedRollback(s);
    shas.push(a.sha256);
    const from = shardOf(s);
    const to = 1 - from;
    const db = shardD1(from);
    // One row as written before the positional encoding: its evidence an object.
    const [oldSha, newSha] = shas as [string, string, string];
    await rewriteEvidence(db, s.tenant_id, oldSha, canonicalize(READ_ONLY_EVIDENCE));
    const before = new Map<string, Json>();
    for (const sha of shas) {
      const got = await call('GET', `/v1/receipts/${sha}`, { key: s.admin.api_key });
      expect(got.status).toBe(200);
      expect(got.body.replay).toEqual({ ok: true, differences: [] });
      before.set(sha, got.body);
    }

    const e = await exportTenant(s.tenant_id, true);
    expect(e.status).toBe(200);
    const lines = e.text
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as { table: string; row: Record<string, unknown> });
    const exported = new Map(
      lines.filter((l) => l.table === 'receipts').map((l) => [l.row.sha256 as string, l.row.evidence]),
    );
    // What an export carried before: the evidence object's canonical text, for both rows.
    for (const sha of shas) {
      expect(exported.get(sha)).toBe(canonicalize(before.get(sha).evidence as Json));
    }
    expect(exported.get(newSha)).toBe(canonicalize(READ_ONLY_EVIDENCE));

    // An export whose positional array was edited is refused whole.
    const positional = '[2,["external_write","irreversible"],0,0,0,0,[]]';
    const withArray = (array: string) =>
      e.text.replace(JSON.stringify(canonicalize(READ_ONLY_EVIDENCE)), JSON.stringify(array));
    const edited = withArray(positional.replace('0,0,0,0', '0,0,1,0'));
    expect(edited).not.toBe(e.text);
    const refused = await importTo(to, edited);
    expect(refused.status).toBe(400);
    expect(refused.body.error.message).toMatch(/receipt evidence does not match its encoding/);

    const imported = await importTo(to, e.text);
    expect(imported.status).toBe(201);
    const keys = imported.body.keys as { principal_id: string; api_key: string }[];
    const admin = keys.find((k) => k.principal_id === s.admin.principal_id)?.api_key as string;
    // Re-encoded on import: every authorization's evidence is an array on the new shard.
    for (const sha of shas) {
      const text = (await storedEvidence(shardD1(to), s.tenant_id, sha)) ?? '';
      expect(text.startsWith('[2,')).toBe(true);
      const got = await call('GET', `/v1/receipts/${sha}`, { key: admin });
      expect(got.status).toBe(200);
      expect(got.body).toEqual(before.get(sha));
    }
  });
});
