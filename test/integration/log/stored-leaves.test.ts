/**
 * Issue 10 ("Bounded D1"): new signature rows store the envelope in its positional form
 * (src/db/signature-rows.ts), rows written before keep the canonical object. The log takes the
 * same leaves from both: a tenant's log over mixed rows has the checkpoint of the canonical
 * envelopes, and a row the reader does not accept stops the drain (and its bundle is a 500)
 * rather than become another leaf.
 */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { logSequencerStub } from '../../../durable-objects/log-sequencer.js';
import { canonicalize, digestOf } from '../../../src/core/canonical/canonical.js';
import { rootFromLeaves } from '../../../src/core/log/merkle.js';
import { encodeBase64 } from '../../../src/core/receipts/base64.js';
import type { SignatureEnvelope } from '../../../src/core/receipts/signing.js';
import { insertReceiptStatements } from '../../../src/db/receipts.js';
import { encodeSignatureEnvelope } from '../../../src/db/signature-rows.js';
import { d1TenantStore } from '../../../src/db/tenant-store.js';
import { receiptSigner } from '../../../src/platform/receipt-keys.js';
import { shardDb } from '../../../src/platform/shards.js';
import { authorizedRollback } from '../executions/helpers.js';
import { call, seedTenant, shardOf, tenantD1 } from '../platform/harness.js';
import type { Seeded } from '../../../scripts/seed.js';

const utf8 = (t: string) => new TextEncoder().encode(t);

/** A fabricated receipt of the tenant (the log never interprets bodies). */
function fake(tenant_id: string, n: number, at: number) {
  const body = { receipt_kind: 'authorization', tenant_id, n };
  return {
    tenant_id,
    kind: 'authorization' as const,
    receipt: { sha256: digestOf(body), body },
    outcome: 'denied',
    created_at_unix_ms: at,
  };
}

/**
 * Store `n` receipts, every other one with its signature row as the writer before issue 10 wrote
 * it (the canonical envelope object); returns each receipt's canonical envelope, in `seq` order.
 */
async function mixedRows(s: Seeded, n: number): Promise<{ sha256: string; leaf: string; old: boolean }[]> {
  const db = shardDb(env, shardOf(s));
  const sign = receiptSigner(env);
  const out: { sha256: string; leaf: string; old: boolean }[] = [];
  for (let i = 0; i < n; i++) {
    const r = fake(s.tenant_id, i, Date.now());
    const envelope: SignatureEnvelope = await sign(r.receipt, r.created_at_unix_ms);
    const leaf = canonicalize(envelope);
    const old = i % 2 === 0;
    const [receipt, signature] = await insertReceiptStatements(db, sign, r);
    if (old) {
      await db.batch([receipt!]);
      await tenantD1(s)
        .prepare(
          'INSERT INTO receipt_signatures (tenant_id, receipt_sha256, envelope, created_at_unix_ms) VALUES (?, ?, ?, ?)',
        )
        .bind(s.tenant_id, r.receipt.sha256, leaf, r.created_at_unix_ms)
        .run();
    } else {
      await db.batch([receipt!, signature!]);
    }
    out.push({ sha256: r.receipt.sha256, leaf, old });
  }
  return out;
}

async function storedEnvelopes(s: Seeded): Promise<{ receipt_sha256: string; envelope: string }[]> {
  const r = await tenantD1(s)
    .prepare('SELECT receipt_sha256, envelope FROM receipt_signatures WHERE tenant_id = ? ORDER BY seq')
    .bind(s.tenant_id)
    .all<{ receipt_sha256: string; envelope: string }>();
  return r.results;
}

describe('stored signature envelopes and the log', { timeout: 60_000 }, () => {
  it('new rows are positional, old rows objects; the log over both has the canonical envelopes as leaves', async () => {
    const s = await seedTenant('leaves-mixed');
    const rows = await mixedRows(s, 6);
    const stored = await storedEnvelopes(s);
    expect(stored.map((r) => r.receipt_sha256)).toEqual(rows.map((r) => r.sha256));
    for (const [i, r] of stored.entries()) {
      expect(r.envelope[0]).toBe(rows[i]!.old ? '{' : '[');
      if (!rows[i]!.old) expect(r.envelope.length).toBeLessThan(rows[i]!.leaf.length - 180);
    }
    // Every reader gets the canonical envelope back: the drain's port ...
    const store = d1TenantStore(shardDb(env, shardOf(s)), s.tenant_id, {
      sign: receiptSigner(env),
      committed: () => {},
    });
    expect((await store.signaturesAfter(0, 100)).map((r) => r.envelope)).toEqual(rows.map((r) => r.leaf));
    for (const r of rows) expect((await store.receiptSignature(r.sha256))?.envelope).toBe(r.leaf);
    // ... and so the log: its checkpoint names the root over exactly those bytes, as before.
    const log = logSequencerStub(env, s.tenant_id);
    expect(await log.drain(s.tenant_id)).toMatchObject({ appended: rows.length, size: rows.length });
    const cp = await log.checkpoint(s.tenant_id);
    const root = encodeBase64(rootFromLeaves(rows.map((r) => utf8(r.leaf))));
    expect(cp.checkpoint.split('\n').slice(0, 3)).toEqual([
      `writ.test/log/${s.tenant_id}`,
      String(rows.length),
      root,
    ]);
    for (const [i, r] of rows.entries()) {
      expect(await log.inclusion(s.tenant_id, r.sha256)).toMatchObject({ status: 'included', index: i });
    }
  });

  it('a receipt of POST /v1/authorize: positional row, bundle with the signed envelope', async () => {
    const s = await seedTenant('leaves-bundle');
    const a = await authorizedRollback(s);
    const [row] = (await storedEnvelopes(s)).filter((r) => r.receipt_sha256 === a.sha256);
    expect(row?.envelope.startsWith('[')).toBe(true);
    const b = await call('GET', `/v1/receipts/${a.sha256}/bundle`, { key: s.admin.api_key });
    expect(b.status).toBe(200);
    expect(b.body.signature).toMatchObject({
      signature_version: 1,
      alg: 'Ed25519',
      tenant_id: s.tenant_id,
      receipt_kind: 'authorization',
      receipt_sha256: a.sha256,
    });
    const values = JSON.parse(row!.envelope) as unknown[];
    expect(values.slice(0, 6)).toEqual([
      1,
      b.body.signature.issued_at_unix_ms,
      b.body.signature.issuer,
      b.body.signature.key_id,
      'authorization',
      b.body.signature.signature,
    ]);
  });

  it('a positional row the reader does not accept stops the drain, and its bundle is a 500: never another leaf', async () => {
    const s = await seedTenant('leaves-bad');
    const [good] = await mixedRows(s, 1);
    const log = logSequencerStub(env, s.tenant_id);
    expect(await log.drain(s.tenant_id)).toMatchObject({ appended: 1, size: 1 });
    // A second receipt whose positional row carries another signature than the one its check binds.
    const db = shardDb(env, shardOf(s));
    const sign = receiptSigner(env);
    const r = fake(s.tenant_id, 1, Date.now());
    const [receipt] = await insertReceiptStatements(db, sign, r);
    await db.batch([receipt!]);
    const leaf = canonicalize(await sign(r.receipt, r.created_at_unix_ms));
    const values = JSON.parse(
      encodeSignatureEnvelope(leaf, { tenant_id: s.tenant_id, receipt_sha256: r.receipt.sha256 }),
    ) as unknown[];
    values[5] = otherSignature(String(values[5]));
    await tenantD1(s)
      .prepare(
        'INSERT INTO receipt_signatures (tenant_id, receipt_sha256, envelope, created_at_unix_ms) VALUES (?, ?, ?, ?)',
      )
      .bind(s.tenant_id, r.receipt.sha256, JSON.stringify(values), r.created_at_unix_ms)
      .run();
    const failed = await log.drain(s.tenant_id).then(
      () => 'drained',
      (e: unknown) => (e instanceof Error ? e.message : String(e)),
    );
    expect(failed).toMatch(/signature envelope does not match its row/);
    expect((await log.checkpoint(s.tenant_id)).size).toBe(1);
    expect(await log.inclusion(s.tenant_id, good!.sha256)).toMatchObject({ status: 'included', index: 0 });
    expect(await log.inclusion(s.tenant_id, r.receipt.sha256)).toMatchObject({ status: 'not_logged' });
  });

  it('a positional row edited after the write (another valid signature) makes its bundle a 500', async () => {
    const s = await seedTenant('leaves-edit');
    const a = await authorizedRollback(s);
    expect((await call('GET', `/v1/receipts/${a.sha256}/bundle`, { key: s.admin.api_key })).status).toBe(200);
    const [row] = (await storedEnvelopes(s)).filter((r) => r.receipt_sha256 === a.sha256);
    expect(row?.envelope[0]).toBe('[');
    const values = JSON.parse(row!.envelope) as unknown[];
    values[5] = otherSignature(String(values[5]));
    await editEnvelope(s, a.sha256, JSON.stringify(values));
    const b = await call('GET', `/v1/receipts/${a.sha256}/bundle`, { key: s.admin.api_key });
    expect(b.status).toBe(500);
    expect(JSON.stringify(b.body)).not.toContain(String(values[5]));
  });
});

/** The same signature with its first character changed: still canonical base64 of 64 bytes. */
const otherSignature = (sig: string) => (sig[0] === 'A' ? 'B' : 'A') + sig.slice(1);

/** Rewrite a signature row's envelope (append-only: the trigger is dropped and put back). */
async function editEnvelope(s: Seeded, sha256: string, value: string) {
  const d1 = tenantD1(s);
  const trigger = await d1
    .prepare("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'receipt_signatures_no_update'")
    .first<{ sql: string }>();
  if (trigger === null) throw new Error('the append-only trigger is missing');
  await d1.batch([
    d1.prepare('DROP TRIGGER receipt_signatures_no_update'),
    d1
      .prepare('UPDATE receipt_signatures SET envelope = ? WHERE tenant_id = ? AND receipt_sha256 = ?')
      .bind(value, s.tenant_id, sha256),
    d1.prepare(trigger.sql),
  ]);
}
