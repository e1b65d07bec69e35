/**
 * Output shared by the lab CLIs: the case table, the pinned summary, the report file and the
 * exit status. The labs themselves are pure (src/core); only this file touches the filesystem.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export interface LabCaseRow {
  readonly passed: boolean;
  readonly id: string;
  readonly expected: string;
  readonly actual: string;
  readonly detail: string;
}

export interface LabOutput {
  readonly cases: readonly LabCaseRow[];
  readonly summary: readonly (readonly [string, string])[];
  /** Folder under `target/labs/`. */
  readonly folder: string;
  /** File name without `.json` (a digest). */
  readonly name: string;
  readonly bytes: Uint8Array;
  readonly sha256: string;
  readonly failures: readonly string[];
}

/** Print the lab, write its canonical report, and return the process exit status. */
export function emitLab(out: LabOutput): number {
  const rows = out.cases.map((c) => [c.passed ? 'ok' : 'MISMATCH', c.id, c.expected, c.actual, c.detail]);
  console.log(table([['', 'case', 'expected', 'actual', 'violations'], ...rows]));
  console.log('');
  const summary: (readonly [string, string])[] = [
    ...out.summary,
    ['report bytes', thousands(out.bytes.byteLength)],
    ['report SHA-256', out.sha256],
  ];
  for (const [k, v] of summary) console.log(`${k.padEnd(35)}${v}`);

  const dir = path.join(import.meta.dirname, '..', 'target', 'labs', out.folder);
  const file = path.join(dir, `${out.name}.json`);
  mkdirSync(dir, { recursive: true });
  // Exactly the report's RFC 8785 bytes, no trailing newline: two runs compare with `cmp`.
  writeFileSync(file, out.bytes);
  console.log('');
  console.log(`wrote ${path.relative(process.cwd(), file)}`);

  if (out.failures.length > 0) {
    console.error(`\nlab mismatches: ${out.failures.join('; ')}`);
    return 1;
  }
  return 0;
}

/** Run `build`, reporting an exception as a failed lab rather than a stack trace. */
export function runLab<T>(build: () => T): T | null {
  try {
    return build();
  } catch (e) {
    console.error(`lab failed: ${e instanceof Error ? e.message : String(e)}`);
    return null;
  }
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
export function thousands(n: number): string {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}
