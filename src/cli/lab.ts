/**
 * `writ lab tools|observations [--json]`: run a laboratory in process (src/lab), print its case
 * table and pinned digests; `writ lab tools --service <url>` runs the tool-loop cases against a
 * running Writ over HTTP instead (src/cli/lab-service.ts), with a tenant admin key.
 *
 * Exit 0: every case matched its declared class. Exit 1: a mismatch (or, over HTTP, a failed case,
 * a baseline that did not verify, or a service error). Exit 2: usage. `npm run lab:tools` /
 * `lab:observations` also write the canonical report under `target/labs/`; this command prints it
 * with `--json`.
 */
import { runObservationLab } from '../lab/observations.js';
import { runToolLoopLab } from '../lab/tool-loop.js';
import { type CliIo, EXIT, type ExitCode } from './io.js';
import { httpLabPassed, runToolLoopOverHttp } from './lab-service.js';
import { describeFailure, parseRemoteArgs, remoteTarget, table } from './remote.js';

export const LAB_USAGE = [
  'usage: writ lab tools|observations [--json]',
  '       writ lab tools --service <url> [--key TENANT_ADMIN_KEY] [--json]',
].join('\n');

export async function runLabCommand(argv: readonly string[], io: CliIo): Promise<ExitCode> {
  const args = parseRemoteArgs(argv, ['--service']);
  if (typeof args === 'string') return usage(io, args);
  const [which, ...extra] = args.rest;
  if (extra.length > 0) return usage(io, `unexpected "${extra[0]?.slice(0, 32)}"`);
  const service = args.values.service;
  if (which === 'tools' && service !== undefined) return serviceLab(io, service, args);
  if (args.url !== null || args.key !== null) return usage(io, '--url and --key go with --service');
  if (which === 'tools') {
    if (service !== undefined) return usage(io, '--service is for lab tools');
    return local(io, args.json, 'tool-loop', () => {
      const lab = runToolLoopLab();
      const r = lab.report;
      return {
        lab,
        cases: r.cases.map(
          (c) =>
            [c.passed, c.id, c.expected.class, c.actual.class, c.actual.violations.join(',') || '-'] as const,
        ),
        summary: [
          ['baseline', `${r.baseline.authorization} / ${r.baseline.execution}`],
          ['mutation cases', `${r.summary.passed} / ${r.summary.cases}`],
          ['authorization-receipt SHA-256', r.digests.authorization_receipt_sha256],
          ['execution-receipt SHA-256', r.digests.execution_receipt_sha256],
        ],
        failures: r.summary.failures,
      };
    });
  }
  if (which === 'observations') {
    if (service !== undefined) return usage(io, '--service is for lab tools');
    return local(io, args.json, 'observations', () => {
      const lab = runObservationLab();
      const r = lab.report;
      return {
        lab,
        cases: r.cases.map(
          (c) =>
            [
              c.passed,
              c.id,
              c.expected.class,
              c.actual.class,
              c.actual.violations.join(',') || (c.actual.error ?? '-'),
            ] as const,
        ),
        summary: [
          ['baseline', `${r.baseline.class} (${r.baseline.authority ?? '-'})`],
          ['mutation cases', `${r.summary.passed} / ${r.summary.cases}`],
          ['observation-receipt SHA-256', r.digests.observation_receipt_sha256],
        ],
        failures: r.summary.failures,
      };
    });
  }
  return usage(
    io,
    which === undefined ? 'which lab: tools or observations' : `unknown lab "${which.slice(0, 32)}"`,
  );
}

interface LocalLab {
  readonly lab: { readonly text: string; readonly sha256: string };
  readonly cases: readonly (readonly [boolean, string, string, string, string])[];
  readonly summary: readonly (readonly [string, string])[];
  readonly failures: readonly string[];
}

function local(io: CliIo, json: boolean, name: string, run: () => LocalLab): ExitCode {
  let r: LocalLab;
  try {
    r = run();
  } catch (e) {
    io.stderr(`writ lab: ${name} failed: ${e instanceof Error ? e.message : String(e)}\n`);
    return EXIT.invalid;
  }
  if (json) io.stdout(`${r.lab.text}\n`);
  else {
    io.stdout(
      table([
        ['', 'case', 'expected', 'actual', 'violations'],
        ...r.cases.map(([ok, ...rest]) => [ok ? 'ok' : 'MISMATCH', ...rest]),
      ]),
    );
    io.stdout(
      `\n${[...r.summary, ['report SHA-256', r.lab.sha256] as const].map(([k, v]) => `${k.padEnd(32)}${v}`).join('\n')}\n`,
    );
  }
  if (r.failures.length > 0) {
    io.stderr(`writ lab: ${name} mismatches: ${r.failures.join('; ')}\n`);
    return EXIT.invalid;
  }
  return EXIT.ok;
}

async function serviceLab(
  io: CliIo,
  url: string,
  args: Exclude<ReturnType<typeof parseRemoteArgs>, string>,
): Promise<ExitCode> {
  if (!/^https?:\/\/\S+$/.test(url)) return usage(io, '--service is an http(s) URL');
  if (args.url !== null) return usage(io, '--service names the URL; --url is not needed');
  const target = remoteTarget({ ...args, url }, io, 'admin');
  if (typeof target === 'string') return usage(io, target.replace('--url or set WRIT_URL', '--service'));
  let report;
  try {
    report = await runToolLoopOverHttp({
      baseUrl: target.url,
      adminKey: target.key,
      ...(io.fetch === undefined ? {} : { fetch: io.fetch }),
      ...(io.sleep === undefined ? {} : { sleep: io.sleep }),
      ...(io.now === undefined ? {} : { now: io.now }),
      progress: (line) => io.stderr(`writ lab tools: ${line}\n`),
    });
  } catch (e) {
    io.stderr(describeFailure('lab tools', e));
    return EXIT.invalid;
  }
  if (args.json) io.stdout(`${JSON.stringify(report)}\n`);
  else {
    io.stdout(
      table([
        ['', 'case', 'expected', 'actual', 'violations'],
        ...report.cases.map((c) => [
          c.status === 'passed' ? 'ok' : c.status === 'failed' ? 'MISMATCH' : 'n/a',
          c.id,
          c.expected.class,
          c.actual === null ? 'not expressible over HTTP' : c.actual.class,
          c.actual === null
            ? '-'
            : c.actual.violations.join(',') || (c.actual.class === c.expected.class ? '-' : c.actual.detail),
        ]),
      ]),
    );
    const b = report.baseline;
    io.stdout(
      `\n${[
        ['service', report.service],
        ['baseline', `${b.authorization} / ${b.execution}, receipt replay ${b.authorization_receipt_replay}`],
        [
          'mutation cases',
          `${report.summary.passed} passed, ${report.summary.failed} failed, ${report.summary.not_expressible} not expressible over HTTP (of ${report.summary.cases})`,
        ],
        ...report.not_expressible_checks.map((x) => ['not expressible', x] as const),
      ]
        .map(([k, v]) => `${k.padEnd(18)}${v}`)
        .join('\n')}\n`,
    );
  }
  return httpLabPassed(report) ? EXIT.ok : EXIT.invalid;
}

function usage(io: CliIo, why: string): ExitCode {
  io.stderr(`writ lab: ${why}\n${LAB_USAGE}\n`);
  return EXIT.usage;
}
