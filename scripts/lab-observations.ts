/**
 * `npm run lab:observations`: run the untrusted tool observation lab
 * (src/core/observation/lab.ts), print its cases and pinned summary, and write the canonical
 * report to `target/labs/observations/<observation-receipt-sha256>.json`.
 *
 * Exits 1 when the baseline, a replay check or any case does not match its declared expectation.
 * The file holds exactly the report's RFC 8785 bytes (no trailing newline), so two runs can be
 * compared with `cmp`.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { runObservationLab, type ObservationLab } from '../src/core/observation/lab.js';

function main(): number {
  let lab: ObservationLab;
  try {
    lab = runObservationLab();
  } catch (e) {
    console.error(`lab failed: ${e instanceof Error ? e.message : String(e)}`);
    return 1;
  }
  const r = lab.report;

  const rows = r.cases.map((c) => [
    c.passed ? 'ok' : 'MISMATCH',
    c.id,
    c.expected.class,
    c.actual.class,
    c.actual.violations.length === 0 ? (c.actual.error ?? '-') : c.actual.violations.join(','),
  ]);
  console.log(table([['', 'case', 'expected', 'actual', 'violations'], ...rows]));
  console.log('');

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
    ['report bytes', thousands(lab.bytes.byteLength)],
    ['report SHA-256', lab.sha256],
  ];
  for (const [k, v] of summary) console.log(`${k.padEnd(35)}${v}`);

  const dir = path.join(import.meta.dirname, '..', 'target', 'labs', 'observations');
  const file = path.join(dir, `${r.digests.observation_receipt_sha256}.json`);
  mkdirSync(dir, { recursive: true });
  writeFileSync(file, lab.bytes);
  console.log('');
  console.log(`wrote ${path.relative(process.cwd(), file)}`);

  if (r.summary.failures.length > 0) {
    console.error(`\nlab mismatches: ${r.summary.failures.join('; ')}`);
    return 1;
  }
  return 0;
}

function table(rows: readonly (readonly string[])[]): string {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  return rows
    .map((row) =>
      row
        .map((cell, i) => cell.padEnd(widths[i] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** `2122` -> `2,122`, independent of the host locale. */
function thousands(n: number): string {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

process.exitCode = main();
