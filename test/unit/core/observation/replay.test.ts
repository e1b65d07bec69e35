// Stored observation receipts are verified by recomputation: any change to any field, at any
// depth, fails replay. Property-tested over every leaf of the stored receipt.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalize, digestOf } from '../../../../src/core/canonical/canonical.js';
import { decodeJsonText, type JsonValue } from '../../../../src/core/canonical/json.js';
import {
  verifyErrorObservationReceipt,
  verifyObservationReceipt,
} from '../../../../src/core/observation/replay.js';
import { validateErrorObservation, validateObservation } from '../../../../src/core/observation/validate.js';
import { baseInput, errorInput, mustValidate } from './fixtures.js';

const INPUT = baseInput();
const RECEIPT = mustValidate(INPUT).receipt;
/** The same observation as a version 1 receipt (signals of the frozen `writ-signals/1` detector). */
const RECEIPT_V1 = (() => {
  const r = validateObservation(INPUT, { receiptVersion: 1 });
  if (!r.ok) throw new Error(r.error.message);
  return r.value.receipt;
})();
/** As version 5 (writ-signals/4: JSON strings read four levels deep, credentials as normalized). */
const RECEIPT_V5 = (() => {
  const r = validateObservation(INPUT, { receiptVersion: 5 });
  if (!r.ok) throw new Error(r.error.message);
  return r.value.receipt;
})();
/** As version 4 (writ-signals/3: JSON strings read one level deep). */
const RECEIPT_V4 = (() => {
  const r = validateObservation(INPUT, { receiptVersion: 4 });
  if (!r.ok) throw new Error(r.error.message);
  return r.value.receipt;
})();
/** As version 3 (writ-signals/2: the payload's text alone, before JSON strings were read too). */
const RECEIPT_V3 = (() => {
  const r = validateObservation(INPUT, { receiptVersion: 3 });
  if (!r.ok) throw new Error(r.error.message);
  return r.value.receipt;
})();
/** And as version 2 (writ-signals/2, before the received bytes' digest and size were bound). */
const RECEIPT_V2 = (() => {
  const r = validateObservation(INPUT, { receiptVersion: 2 });
  if (!r.ok) throw new Error(r.error.message);
  return r.value.receipt;
})();

/** The receipt as a verifier reads it from storage: canonical bytes, strictly decoded. */
function stored(v: unknown): JsonValue {
  const d = decodeJsonText(canonicalize(v));
  if (!d.ok) throw new Error(d.error.message);
  return d.value;
}

/** Every path to a leaf (or an empty container) of a JSON value. */
function leaves(v: JsonValue, path: (string | number)[] = []): (string | number)[][] {
  if (v !== null && typeof v === 'object') {
    const entries: [string | number, JsonValue][] = Array.isArray(v)
      ? v.map((x, i) => [i, x])
      : Object.entries(v);
    if (entries.length === 0) return [path];
    return entries.flatMap(([k, x]) => leaves(x, [...path, k]));
  }
  return [path];
}

function setAt(root: JsonValue, path: (string | number)[], value: JsonValue): JsonValue {
  const copy = structuredClone(root);
  let cur = copy as Record<string | number, JsonValue>;
  for (const k of path.slice(0, -1)) cur = cur[k] as Record<string | number, JsonValue>;
  cur[path[path.length - 1] as string | number] = value;
  return copy;
}

describe('observation receipt replay', () => {
  it('verifies the stored baseline receipt', () => {
    expect(verifyObservationReceipt(stored(RECEIPT), INPUT)).toEqual({ ok: true, differences: [] });
  });

  it('detects a consistently re-hashed forgery (rejection rewritten as acceptance)', () => {
    const rejectedInput = baseInput();
    rejectedInput.observation.tenant_id = 'globex';
    const rejected = mustValidate(rejectedInput).receipt;
    const body = {
      ...rejected.body,
      decision: 'accepted_untrusted_evidence',
      authority: 'untrusted_evidence_only',
      violations: [],
    };
    expect(verifyObservationReceipt(stored({ sha256: digestOf(body), body }), rejectedInput)).toEqual({
      ok: false,
      differences: ['body.authority', 'body.decision', 'body.violations', 'sha256'],
    });
  });

  it('detects a removed field, an added field and a changed envelope digest', () => {
    const r = stored(RECEIPT) as { sha256: string; body: Record<string, JsonValue> };
    const { signals: _dropped, ...without } = r.body;
    expect(verifyObservationReceipt({ ...r, body: without }, INPUT).differences).toContain('body.signals');
    expect(
      verifyObservationReceipt({ ...r, body: { ...r.body, trusted: true } }, INPUT).differences,
    ).toContain('body.trusted');
    expect(verifyObservationReceipt({ ...r, signature: 'x' }, INPUT).differences).toContain('signature');
    expect(verifyObservationReceipt({ ...r, sha256: 'f'.repeat(64) }, INPUT).differences).toEqual(['sha256']);
    expect(verifyObservationReceipt(null, INPUT)).toEqual({ ok: false, differences: ['receipt'] });
  });

  it.each([
    ['version 6 (current)', RECEIPT],
    ['version 5 (writ-signals/4, JSON strings four levels deep)', RECEIPT_V5],
    ['version 4 (writ-signals/3, JSON strings one level deep)', RECEIPT_V4],
    ['version 3 (writ-signals/2, received bytes bound)', RECEIPT_V3],
    ['version 2 (writ-signals/2)', RECEIPT_V2],
    ['version 1 (writ-signals/1)', RECEIPT_V1],
  ])(
    'any single-field mutation of a stored %s receipt fails replay (property)',
    { timeout: 60_000 },
    (_v, receipt) => {
      const base = stored(receipt);
      expect(verifyObservationReceipt(base, INPUT)).toEqual({ ok: true, differences: [] });
      const paths = leaves(base);
      expect(paths.length).toBeGreaterThan(30);
      // The version fields are what replay dispatches on: always among the mutated paths.
      const versionPaths = paths.filter((p) => p[1] === 'receipt_version' || p[1] === 'signals_release');
      expect(versionPaths.length).toBe(receipt.body.receipt_version === 1 ? 1 : 2);
      fc.assert(
        fc.property(
          fc.oneof(fc.constantFrom(...paths), fc.constantFrom(...versionPaths)),
          fc.jsonValue({ maxDepth: 2 }),
          (path, value) => {
            const before = path.reduce<JsonValue>(
              (v, k) => (v as Record<string | number, JsonValue>)[k] as JsonValue,
              base,
            );
            fc.pre(canonicalize(value) !== canonicalize(before));
            const mutated = setAt(base, path, value as JsonValue);
            const report = verifyObservationReceipt(mutated, INPUT);
            expect(report.ok).toBe(false);
            const top = path[0] === 'body' ? `body.${String(path[1])}` : String(path[0]);
            expect(report.differences).toContain(top);
          },
        ),
        { numRuns: 300 },
      );
    },
  );

  it('also for the error-observation receipt', () => {
    const input = errorInput();
    const r = validateErrorObservation(input);
    if (!r.ok) throw new Error(r.error.message);
    expect(verifyErrorObservationReceipt(stored(r.value.receipt), input)).toEqual({
      ok: true,
      differences: [],
    });
    const body = { ...r.value.receipt.body, error_code: 'ok' };
    expect(verifyErrorObservationReceipt({ sha256: digestOf(body), body }, input).differences).toEqual([
      'body.error_code',
      'sha256',
    ]);
  });

  it('reports inputs that cannot be evaluated instead of comparing against nothing', () => {
    const bad = { ...INPUT, now: -1 };
    expect(verifyObservationReceipt(RECEIPT, bad)).toEqual({
      ok: false,
      differences: ['recompute_failed: invalid_request'],
    });
  });
});
