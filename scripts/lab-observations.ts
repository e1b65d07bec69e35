/**
 * `npm run lab:observations`: run the untrusted tool observation lab
 * (src/lab/observations.ts), print its cases and pinned summary, and write the canonical
 * report to `target/labs/observations/<observation-receipt-sha256>.json`.
 *
 * Exits 1 when the baseline, a replay check or any case does not match its declared expectation.
 * The file holds exactly the report's RFC 8785 bytes (no trailing newline), so two runs can be
 * compared with `cmp`.
 */
import { emitLab, runLab } from './lab-output.js';
import { runObservationLab } from '../src/lab/observations.js';

function main(): number {
  const lab = runLab(runObservationLab);
  if (lab === null) return 1;
  const r = lab.report;

  const cases = r.cases.map((c) => ({
    passed: c.passed,
    id: c.id,
    expected: c.expected.class,
    actual: c.actual.class,
    detail: c.actual.violations.length === 0 ? (c.actual.error ?? '-') : c.actual.violations.join(','),
  }));

  const summary: [string, string][] = [
    ['baseline', r.baseline.class],
    ['authority', r.baseline.authority ?? '-'],
    ['signals', r.baseline.signal_hits.map((h) => `${h.signal} (${h.rule})`).join(', ') || '-'],
    [
      'receipt replay',
      `${r.replay.observation_receipt.ok ? 'verified' : 'FAILED'}, signal-stripped receipt ${
        r.replay.stripped_signals_receipt.ok ? 'ACCEPTED' : 'rejected'
      }`,
    ],
    ['mutation cases', `${r.summary.passed} / ${r.summary.cases}`],
    ['policy SHA-256', r.digests.policy_sha256],
    ['observation-policy SHA-256', r.digests.observation_policy_sha256],
    ['execution-receipt SHA-256', r.digests.execution_receipt_sha256],
    ['observation-receipt SHA-256', r.digests.observation_receipt_sha256],
  ];
  return emitLab({
    cases,
    summary,
    folder: 'observations',
    name: r.digests.observation_receipt_sha256,
    bytes: lab.bytes,
    sha256: lab.sha256,
    failures: r.summary.failures,
  });
}

process.exitCode = main();
