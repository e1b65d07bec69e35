/**
 * `npm run lab:tools`: run the authorized tool loop lab (src/lab/tool-loop.ts), print its
 * cases and pinned summary, and write the canonical report to
 * `target/labs/tool-loop/<contract-sha256>.json`.
 *
 * Exits 1 when any case, baseline or replay check does not match its declared expectation.
 * The file holds exactly the report's RFC 8785 bytes (no trailing newline), so two runs can be
 * compared with `cmp`.
 */
import { emitLab, runLab } from './lab-output.js';
import { runToolLoopLab } from '../src/lab/tool-loop.js';

function main(): number {
  const lab = runLab(runToolLoopLab);
  if (lab === null) return 1;
  const r = lab.report;

  const cases = r.cases.map((c) => ({
    passed: c.passed,
    id: c.id,
    expected: c.expected.class,
    actual: c.actual.class,
    detail: c.actual.violations.length === 0 ? '-' : c.actual.violations.join(','),
  }));

  const replayed = [r.replay.authorization_receipt, r.replay.execution_receipt].filter((x) => x.ok).length;
  const summary: [string, string][] = [
    ['baseline authorization', r.baseline.authorization],
    ['baseline execution', r.baseline.execution],
    [
      'receipt replay',
      `${replayed} / 2 verified, forged receipt ${r.replay.forged_authorization_receipt.ok ? 'ACCEPTED' : 'rejected'}`,
    ],
    ['mutation cases', `${r.summary.passed} / ${r.summary.cases}`],
    ['contract SHA-256', r.digests.contract_sha256],
    ['grant SHA-256', r.digests.grant_sha256],
    ['invocation SHA-256', r.digests.invocation_sha256],
    ['authorization-receipt SHA-256', r.digests.authorization_receipt_sha256],
    ['execution-receipt SHA-256', r.digests.execution_receipt_sha256],
  ];
  return emitLab({
    cases,
    summary,
    folder: 'tool-loop',
    name: r.digests.contract_sha256,
    bytes: lab.bytes,
    sha256: lab.sha256,
    failures: r.summary.failures,
  });
}

process.exitCode = main();
