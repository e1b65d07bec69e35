// Pins the untrusted tool observation lab (src/lab/observations.ts): its outcomes and every
// digest `npm run lab:observations` prints. A change to canonical encoding, a check, a violation
// code, a signal rule that fires on the lab payload, or the tool-loop fixture shows here as a
// changed digest. Update a pin only together with the change that explains it.
import { describe, expect, it } from 'vitest';
import { canonicalize, sha256Hex } from '../../../src/core/canonical/canonical.js';
import { decodeJsonText } from '../../../src/core/canonical/json.js';
import { OBSERVATION_LAB_CASES, runObservationLab } from '../../../src/lab/observations.js';

const PINNED = {
  policy_sha256: '528633eee64774c23dd4aeaf65bfcbc16216349888d9eb6c2b6c00964016286b',
  observation_policy_sha256: '42c1319ecaa0decb981fc58b715aa4723c74e0373f2efdcba94b8648ab06da5f',
  execution_receipt_sha256: '288e3084ec6fb8ce58c420eb6c219482a15c1d9e26603c8af02fd4d6dc961f07',
  // Observation receipt version 7 (`writ-signals/6`): the baseline's signals are unchanged, the
  // receipt's version and release (so its digest, and the report's bytes) are not.
  observation_receipt_sha256: '1dfff088c7b42a8026bf091c69f1320ac91abf70e0f8b56b36c0d4b1511a0c69',
  report_bytes: 5288,
  report_sha256: 'da7bfa6a6d683146b7a2472cb2fcf456410c475c58cb393d314541bfa3a9f1af',
} as const;

describe('observation lab', () => {
  const lab = runObservationLab();
  const r = lab.report;

  it('accepts the baseline only as untrusted evidence, with its instruction signal', () => {
    expect(r.baseline).toEqual({
      class: 'accepted_untrusted_evidence',
      authority: 'untrusted_evidence_only',
      signals: ['instruction_like_text'],
      signal_hits: [
        { signal: 'instruction_like_text', rule: 'instruction.override', encoding: 'plain' },
        { signal: 'instruction_like_text', rule: 'instruction.tool_call', encoding: 'plain' },
      ],
      violations: [],
    });
  });

  it('replays the baseline receipt and rejects a signal-stripped, re-hashed copy', () => {
    expect(r.replay.observation_receipt).toEqual({ ok: true, differences: [] });
    expect(r.replay.stripped_signals_receipt).toEqual({
      ok: false,
      differences: ['body.signal_hits', 'body.signals', 'sha256'],
    });
  });

  it('matches every declared case outcome, 10 / 10', () => {
    expect(r.cases.map((c) => c.id)).toEqual([
      'tenant_drift',
      'policy_drift',
      'contract_drift',
      'invocation_drift',
      'execution_receipt_mutated',
      'payload_digest_mismatch',
      'byte_count_mismatch',
      'disallowed_media_type',
      'observed_before_completion',
      'indeterminate_execution',
    ]);
    expect(r.cases.map((c) => c.id)).toEqual(OBSERVATION_LAB_CASES.map((c) => c.id));
    for (const c of r.cases) {
      expect({
        id: c.id,
        class: c.actual.class,
        violations: c.actual.violations,
        error: c.actual.error,
      }).toEqual({
        id: c.id,
        class: c.expected.class,
        violations: c.expected.violations,
        error: null,
      });
      expect(c.passed).toBe(true);
    }
    expect(r.summary).toEqual({ cases: 10, passed: 10, failures: [] });
  });

  it('pins the policy, execution-receipt and observation-receipt digests', () => {
    expect({
      policy_sha256: r.digests.policy_sha256,
      observation_policy_sha256: r.digests.observation_policy_sha256,
      execution_receipt_sha256: r.digests.execution_receipt_sha256,
      observation_receipt_sha256: r.digests.observation_receipt_sha256,
    }).toEqual({
      policy_sha256: PINNED.policy_sha256,
      observation_policy_sha256: PINNED.observation_policy_sha256,
      execution_receipt_sha256: PINNED.execution_receipt_sha256,
      observation_receipt_sha256: PINNED.observation_receipt_sha256,
    });
  });

  it('pins the report bytes and their SHA-256', () => {
    expect(lab.bytes.byteLength).toBe(PINNED.report_bytes);
    expect(lab.sha256).toBe(PINNED.report_sha256);
  });

  it('is deterministic and canonical', () => {
    const again = runObservationLab();
    expect(again.text).toBe(lab.text);
    const decoded = decodeJsonText(lab.text, { maxBytes: 1 << 20, maxDepth: 32 });
    expect(decoded.ok && canonicalize(decoded.value)).toBe(lab.text);
    expect(sha256Hex(lab.bytes)).toBe(lab.sha256);
  });
});
