/**
 * The idempotency object's D1 mirror across a receipt key rotation (docs/receipts.md, "Rotation,
 * step by step"): an operation whose execution receipt was mirrored (and signed) before the
 * rotation must still mirror what happens to it afterwards. The new key cannot sign a receipt dated
 * before its window, and it need not: that receipt is already signed in D1.
 */
import { runInDurableObject } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { and, eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { type IdempotencyObject, operationStub } from '../../../durable-objects/idempotency.js';
import { operationId } from '../../../src/core/execution/idempotency.js';
import { reconcileOperation } from '../../../src/core/execution/reconciliation.js';
import { generateKeyRing, type KeyRingDocument } from '../../../src/core/receipts/keys.js';
import { database } from '../../../src/db/client.js';
import { decodeSignatureEnvelope } from '../../../src/db/signature-rows.js';
import {
  operations,
  receiptArchiveEntries,
  receiptArchives,
  receiptSignatures,
  receipts,
} from '../../../src/db/schema.js';
import { app } from '../../../src/http/app.js';
import { baselineRun, buildObservation } from '../../unit/core/fixtures.js';
import { BASE, type Reply } from '../platform/harness.js';
import { authorizedRollback, claim, observe, report, seedTenant, stub } from './helpers.js';

/** The ring the test Worker signs with (vitest.config.ts). */
const TEST_RING = generateKeyRing(new Uint8Array(32).fill(7), 'writ.test', 0);

/** The documented rotation: close the old key's window at `at`, add the new key from `at`. */
function rotate(doc: KeyRingDocument, seed: Uint8Array, at: number): KeyRingDocument {
  const next = generateKeyRing(seed, doc.issuer, at);
  return {
    ...doc,
    active: next.active,
    keys: [...doc.keys.map((k) => ({ ...k, signing_until_unix_ms: at })), ...next.keys],
  };
}

type Run = ReturnType<typeof baselineRun>;

/**
 * Claim and report an indeterminate operation through its object, run `between` (what the
 * deployment's history did to D1 meanwhile), rotate the object's ring to a key whose window starts
 * after the report, then reconcile: the mirror must still reach D1.
 */
async function reconcileAfterRotation(
  name: string,
  between: (tenant: string, run: Run) => Promise<void> = async () => {},
) {
  const run = baselineRun('indeterminate');
  const tenant = run.authorization.body.tenant_id;
  const key = `${name}-${Date.now()}`;
  const id = operationId(
    tenant,
    {
      tool_name: run.scenario.contract.tool_name,
      tool_contract_sha256: run.authorization.body.tool_contract_sha256,
    },
    { kind: 'idempotency_key', idempotency_key: key },
  );
  const stub = operationStub(env, id);
  const claimed = await stub.claim(
    {
      operation_id: id,
      tenant_id: tenant,
      tool_contract_sha256: run.authorization.body.tool_contract_sha256,
      tool_name: run.scenario.contract.tool_name,
      idempotency_key: key,
      input_sha256: run.authorization.body.input_sha256,
      authorization_receipt_sha256: run.authorization.sha256,
      principal_id: 'executor-1',
      lease_ms: 60_000,
      reconciliation_owner: 'role:tenant_admin',
      reconciliation_window_ms: 3_600_000,
      now: Date.now(),
    },
    0,
  );
  if (claimed.outcome !== 'proceed') throw new Error(claimed.outcome);
  const reportedAt = Date.now();
  const reported = await stub.report({
    tenant_id: tenant,
    principal_id: 'executor-1',
    fencing_token: claimed.fencing_token,
    execution_receipt: run.execution,
    observation: run.observation,
    now: reportedAt,
  });
  expect(reported).toMatchObject({ outcome: 'recorded', operation: { status: 'reconciliation_required' } });
  const executionSignature = await signatureOf(tenant, run.execution.sha256);
  expect(JSON.parse(executionSignature ?? '{}').key_id).toBe(TEST_RING.active);
  await between(tenant, run);

  // The operator rotates the ring after the report (the object's env, as a new deploy gives it).
  const rotated = rotate(TEST_RING, new Uint8Array(32).fill(9), reportedAt + 1);
  await runInDurableObject(stub, (o: IdempotencyObject) => {
    Object.defineProperty(o, 'env', {
      value: { ...env, WRIT_RECEIPT_KEYS: JSON.stringify(rotated) },
      configurable: true,
    });
  });

  const now = Date.now() + 10;
  const observation = buildObservation(run.scenario.contract, run.authorization, 'succeeded');
  const outcome = reconcileOperation({
    contract: run.scenario.contract,
    authorization: run.authorization,
    operation_id: id,
    original: run.execution,
    observation,
    reconciled_by: 'admin-1',
    now,
    max_clock_skew_ms: 60_000,
  });
  if (!outcome.ok || !outcome.value.ok) throw new Error('reconciliation did not verify');
  const receipt = outcome.value.receipt;
  const reconciled = await stub.reconcile({
    tenant_id: tenant,
    principal_id: 'admin-1',
    reconciliation_receipt: receipt,
    observation,
    max_clock_skew_ms: 60_000,
    now,
  });
  expect(reconciled).toMatchObject({ outcome: 'recorded', operation: { status: 'reconciled_succeeded' } });

  // Mirrored: the index row, the reconciliation receipt and its signature by the new key.
  const row = await database(env).select().from(operations).where(eq(operations.operation_id, id)).get();
  expect(row).toMatchObject({
    state: 'reconciled_succeeded',
    reconciliation_receipt_sha256: receipt.sha256,
  });
  expect(await storedReceipt(tenant, receipt.sha256)).toBe(receipt.sha256);
  expect(JSON.parse((await signatureOf(tenant, receipt.sha256)) ?? '{}').key_id).toBe(rotated.active);
  return { tenant, run, executionSignature };
}

/** The receipt's canonical signature envelope, read as the store reads it (either stored form). */
async function signatureOf(tenant: string, sha256: string): Promise<string | undefined> {
  const row = await database(env)
    .select()
    .from(receiptSignatures)
    .where(and(eq(receiptSignatures.tenant_id, tenant), eq(receiptSignatures.receipt_sha256, sha256)))
    .get();
  return row === undefined ? undefined : decodeSignatureEnvelope(row.envelope, row);
}

async function storedReceipt(tenant: string, sha256: string): Promise<string | undefined> {
  return (
    await database(env)
      .select({ sha256: receipts.sha256 })
      .from(receipts)
      .where(and(eq(receipts.tenant_id, tenant), eq(receipts.sha256, sha256)))
      .get()
  )?.sha256;
}

/**
 * Delete a receipt's signature row, as if it had been stored before migration 0005. The table is
 * append-only (a trigger), so the trigger is dropped for the delete and re-created as it was.
 */
async function forgetSignature(tenant: string, sha256: string): Promise<void> {
  const trigger = await env.DB.prepare("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?")
    .bind('receipt_signatures_no_delete')
    .first<{ sql: string }>();
  if (trigger === null) throw new Error('the append-only trigger is missing');
  await env.DB.batch([
    env.DB.prepare('DROP TRIGGER receipt_signatures_no_delete'),
    env.DB.prepare('DELETE FROM receipt_signatures WHERE tenant_id = ? AND receipt_sha256 = ?').bind(
      tenant,
      sha256,
    ),
    env.DB.prepare(trigger.sql),
  ]);
  expect(await signatureOf(tenant, sha256)).toBeUndefined();
}

describe('operation mirror after a key rotation', () => {
  it('a reconciliation after the rotation reaches D1, signed by the new key; the old signature stays', async () => {
    const { tenant, run, executionSignature } = await reconcileAfterRotation('rotation');
    // The execution receipt keeps the signature it was issued with.
    expect(await signatureOf(tenant, run.execution.sha256)).toBe(executionSignature);
  });

  it('a receipt stored before receipts were signed stays unsigned and does not stop the mirror', async () => {
    // As a deployment from before migration 0005 left it: the execution receipt's row, no signature.
    // No key of the rotated ring may sign it (it predates the new key's window).
    const { tenant, run } = await reconcileAfterRotation('pre-signature', (tenant, run) =>
      forgetSignature(tenant, run.execution.sha256),
    );
    expect(await storedReceipt(tenant, run.execution.sha256)).toBe(run.execution.sha256);
    expect(await signatureOf(tenant, run.execution.sha256)).toBeUndefined();
  });

  it('a pre-signature receipt that retention archived does not stop the mirror either', async () => {
    // Its row moved to an R2 archive (an archive entry names it) and it never had a signature.
    const { tenant, run } = await reconcileAfterRotation('pre-signature-archived', async (tenant, run) => {
      await forgetSignature(tenant, run.execution.sha256);
      const db = database(env);
      const archive_sha256 = 'a'.repeat(64);
      await db.batch([
        db.insert(receiptArchives).values({
          tenant_id: tenant,
          archive_sha256,
          day: Math.floor(Date.now() / 86_400_000),
          receipts: 1,
          bytes: 1,
          created_at_unix_ms: Date.now(),
        }),
        db
          .insert(receiptArchiveEntries)
          .values({ tenant_id: tenant, sha256: run.execution.sha256, archive_sha256 }),
        db
          .delete(receipts)
          .where(and(eq(receipts.tenant_id, tenant), eq(receipts.sha256, run.execution.sha256))),
      ]);
      expect(await storedReceipt(tenant, run.execution.sha256)).toBeUndefined();
    });
    // Not brought back: it stays archived, and unsigned.
    expect(await storedReceipt(tenant, run.execution.sha256)).toBeUndefined();
    expect(await signatureOf(tenant, run.execution.sha256)).toBeUndefined();
  });
});

/** A request to the app with another key ring (the Worker's; the objects keep theirs). */
async function callWith(ring: KeyRingDocument, path: string, key: string, body: unknown): Promise<Reply> {
  const res = await app.fetch(
    new Request(`${BASE}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }),
    { ...env, WRIT_RECEIPT_KEYS: JSON.stringify(ring) },
  );
  const text = await res.text();
  return { status: res.status, body: text.length > 0 ? JSON.parse(text) : null, headers: res.headers };
}

describe('a report or reconciliation under a retired active key', () => {
  it('is refused (503) before the operation records anything, like every receipt-issuing write', async () => {
    const s = await seedTenant('retired-report');
    const a = await authorizedRollback(s);
    const c = await claim(s, a.sha256);
    expect(c.status).toBe(200);
    const operation_id = c.body.operation_id as string;
    // The ring's only key, its window closed: it parses, but may not sign anything dated now.
    const retired: KeyRingDocument = {
      ...TEST_RING,
      keys: TEST_RING.keys.map((k) => ({ ...k, signing_until_unix_ms: Date.now() - 1_000 })),
    };
    const observation = observe(a.receipt, 'succeeded');
    const refused = await callWith(retired, '/v1/executions/report', s.executor.api_key, {
      operation_id,
      fencing_token: c.body.fencing_token,
      observation,
    });
    expect(refused.status).toBe(503);
    expect(refused.body.error.code).toBe('signing_unavailable');
    // Nothing recorded: the operation is still pending, with no receipt, and the owner's report
    // under a usable ring is recorded as usual.
    const held = await stub(operation_id).read(s.tenant_id);
    expect(held?.operation).toMatchObject({ status: 'pending', execution_receipt_sha256: null });
    const ok = await report(s, operation_id, c.body.fencing_token as string, observation);
    expect(ok.status).toBe(200);
    expect(ok.body.operation.status).toBe('succeeded');
  });
});
