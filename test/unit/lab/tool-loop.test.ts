// Pins the tool loop lab (src/lab/tool-loop.ts): its outcomes and every digest it prints.
// A change to canonical encoding, to a check or violation code, or to the fixture shows here as a
// changed digest. Update a pin only together with the change that explains it.
import { describe, expect, it } from 'vitest';
import { canonicalize, sha256Hex } from '../../../src/core/canonical/canonical.js';
import { decodeJsonText } from '../../../src/core/canonical/json.js';
import { LAB_CASES, runToolLoopLab } from '../../../src/lab/tool-loop.js';

const PINNED = {
  contract_sha256: '15e07af15a6da9c49d0168be1318bc55e631d71792ea8a485758c9206da73808',
  grant_sha256: 'a58fdc8f4d565106b6800298523f8aa0a25970e6335e7bed3db54dfff644bb27',
  invocation_sha256: '2ec5fb28779d38fe1b46e8ef0256284760ab862562a8fc08212e520d41ad8959',
  authorization_receipt_sha256: 'e7c7144eb18179a86c13639c0aec516e5e7073c76be678ac1c21787f88795cbe',
  execution_receipt_sha256: '3e9825bfbea53483c6d71f9c60a4313768fdb8573df40922277be11beaa9e20d',
  report_sha256: '7c54e00fb589311b3ab3c300e6825c36dd3e81772914993c461400105d9311ac',
  report_bytes: 5125,
} as const;

describe('tool loop lab', () => {
  const lab = runToolLoopLab();
  const r = lab.report;

  it('authorizes and verifies the baseline rollback', () => {
    expect(r.baseline).toEqual({
      authorization: 'authorized',
      authorization_violations: [],
      execution: 'verified_succeeded',
      execution_violations: [],
      reconciliation_required: false,
    });
  });

  it('replays both baseline receipts and rejects a consistently re-hashed forgery', () => {
    expect(r.replay.authorization_receipt).toEqual({ ok: true, differences: [] });
    expect(r.replay.execution_receipt).toEqual({ ok: true, differences: [] });
    expect(r.replay.forged_authorization_receipt).toEqual({
      ok: false,
      differences: ['body.decision', 'body.violations', 'sha256'],
    });
  });

  it('matches every declared case outcome, 10 / 10', () => {
    expect(r.cases.map((c) => c.id)).toEqual(LAB_CASES.map((c) => c.id));
    expect(r.cases).toHaveLength(10);
    for (const c of r.cases) {
      expect({ id: c.id, ...c.actual }).toEqual({ id: c.id, ...c.expected });
      expect(c.passed).toBe(true);
    }
    expect(r.summary).toEqual({ cases: 10, passed: 10, failures: [] });
  });

  it('pins the contract, grant, invocation and receipt digests', () => {
    expect({
      contract_sha256: r.digests.contract_sha256,
      grant_sha256: r.digests.grant_sha256,
      invocation_sha256: r.digests.invocation_sha256,
      authorization_receipt_sha256: r.digests.authorization_receipt_sha256,
      execution_receipt_sha256: r.digests.execution_receipt_sha256,
    }).toEqual({
      contract_sha256: PINNED.contract_sha256,
      grant_sha256: PINNED.grant_sha256,
      invocation_sha256: PINNED.invocation_sha256,
      authorization_receipt_sha256: PINNED.authorization_receipt_sha256,
      execution_receipt_sha256: PINNED.execution_receipt_sha256,
    });
  });

  it('pins the report bytes and their SHA-256', () => {
    expect(lab.bytes.byteLength).toBe(PINNED.report_bytes);
    expect(lab.sha256).toBe(PINNED.report_sha256);
    expect(sha256Hex(lab.bytes)).toBe(PINNED.report_sha256);
    expect(new TextDecoder().decode(lab.bytes)).toBe(lab.text);
  });

  it('writes canonical bytes: decoding and re-canonicalizing gives the same text', () => {
    const decoded = decodeJsonText(lab.text);
    expect(decoded.ok).toBe(true);
    if (decoded.ok) expect(canonicalize(decoded.value)).toBe(lab.text);
  });

  it('is deterministic: a second run gives byte-identical output', () => {
    const again = runToolLoopLab();
    expect(again.text).toBe(lab.text);
    expect(again.sha256).toBe(lab.sha256);
  });
});
