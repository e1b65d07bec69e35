/**
 * `npm run eval:signals`: measure the observation signal detector on the public benchmark at
 * `shared/signals-benchmark/corpus.jsonl` (beside the repository, or beside any directory above
 * it; `--corpus <path>` overrides).
 *
 * The corpus is read at run time and never copied into the project: its credential items are fake
 * values in real formats that secret scanners would flag. Nothing here is part of `npm test`; the
 * numbers are a development aid. Improve families of rules, not items: the goals are judged on
 * data nobody tuned to.
 *
 * Each text is scanned alone, as the current signals release reads it (`scanUnder` at
 * `OBSERVATION_RECEIPT_VERSION`: what a new receipt binds for text content). Prints detection per
 * kind, language and placement, credential recall per provider, false alarms per genre (ordinary
 * output and security documentation apart), and throughput (KB/s and p50/p99 per-KB cost over
 * items). `--baseline <git-rev>` also runs the release that was current at that revision: its
 * `src/` tree is read with `git archive` into a temporary directory (with this checkout's
 * `node_modules` linked beside it) and its `scanUnder` at its own current receipt version is used
 * (its `detectSignals` with default options at revisions before `signals/releases.ts` existed).
 * `--baseline writ-signals/<n>` compares against release `<n>` of this checkout instead (the
 * receipt version that binds it), and `--as-written` is `--baseline writ-signals/2` (the
 * detector's default rules). Both run on the same items in the same run, so the cost ratio is
 * measured under the same load. `--rounds <n>` sets the timing rounds (5); `--misses <label>`
 * lists missed items' ids.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import {
  OBSERVATION_RECEIPT_VERSION,
  OBSERVATION_RECEIPT_VERSIONS,
  type ObservationReceiptVersion,
  SIGNALS_RELEASE,
  SIGNALS_RELEASES,
} from '../src/core/observation/schema.js';
import { scanUnder } from '../src/core/observation/signals/releases.js';

interface Item {
  readonly id: string;
  readonly label: 'injection' | 'credential' | 'benign';
  readonly kind: string;
  readonly lang: string;
  readonly placement?: string;
  readonly text: string;
}

interface Report {
  readonly signals: readonly string[];
  readonly hits: readonly { readonly signal: string; readonly rule: string }[];
}
type Detector = (text: string) => Report;

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

function loadCorpus(path: string): Item[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => {
      const o = JSON.parse(l) as Omit<Item, 'text'> & { text_b64: string };
      return {
        id: o.id,
        label: o.label,
        kind: o.kind,
        lang: o.lang,
        ...(o.placement === undefined ? {} : { placement: o.placement }),
        text: Buffer.from(o.text_b64, 'base64').toString('utf8'),
      };
    });
}

/** Directories made for `--baseline <git-rev>`, removed when the run ends. */
const tempDirs: string[] = [];

/**
 * The release that was current at `rev`: its whole `src/` tree (the detector imports its rules,
 * its schema and zod), extracted from git into a temporary directory whose `node_modules` is this
 * checkout's. Earlier versions of this script copied `signals.ts` alone with a stub schema, which
 * stopped loading once the rules moved to `signals/*.ts` and the detector imported values from
 * its schema.
 */
async function loadBaseline(rev: string): Promise<{ name: string; detect: Detector }> {
  const dir = mkdtempSync(join(tmpdir(), 'writ-eval-signals-'));
  tempDirs.push(dir);
  const commit = execFileSync('git', ['rev-parse', '--verify', `${rev}^{commit}`], {
    cwd: repoRoot,
    encoding: 'utf8',
  }).trim();
  const tar = execFileSync('git', ['archive', '--format=tar', commit, 'src'], {
    cwd: repoRoot,
    maxBuffer: 512 * 1024 * 1024,
  });
  execFileSync('tar', ['-x', '-C', dir], { input: tar });
  symlinkSync(join(repoRoot, 'node_modules'), join(dir, 'node_modules'), 'dir');
  const observation = join(dir, 'src', 'core', 'observation');
  const short = commit.slice(0, 7);
  const releases = join(observation, 'signals', 'releases.ts');
  if (existsSync(releases)) {
    const schema = (await import(pathToFileURL(join(observation, 'schema.ts')).href)) as {
      OBSERVATION_RECEIPT_VERSION: number;
      SIGNALS_RELEASE?: string;
    };
    const mod = (await import(pathToFileURL(releases).href)) as {
      scanUnder: (version: number, text: string) => Report;
    };
    const version = schema.OBSERVATION_RECEIPT_VERSION;
    return {
      name: `baseline ${rev} (${short}: ${schema.SIGNALS_RELEASE ?? `receipt version ${version}`})`,
      detect: (t) => mod.scanUnder(version, t),
    };
  }
  const mod = (await import(pathToFileURL(join(observation, 'signals.ts')).href)) as {
    detectSignals: Detector;
  };
  return { name: `baseline ${rev} (${short}: detectSignals)`, detect: mod.detectSignals };
}

/** Release `writ-signals/<n>` of this checkout, as the newest receipt version binding it reads. */
function releaseBaseline(release: string): { name: string; detect: Detector } {
  const versions = OBSERVATION_RECEIPT_VERSIONS.filter((v) => SIGNALS_RELEASES[v] === release);
  const version = versions[versions.length - 1] as ObservationReceiptVersion | undefined;
  if (version === undefined) throw new Error(`no receipt version binds ${release}`);
  return { name: `baseline ${release} (receipt version ${version})`, detect: (t) => scanUnder(version, t) };
}

const INJECTION_SIGNALS = new Set(['instruction_like_text', 'authority_claim']);

function found(item: Item, r: Report): boolean {
  if (item.label === 'injection') return r.signals.some((s) => INJECTION_SIGNALS.has(s));
  if (item.label === 'credential') return r.signals.includes('credential_like_text');
  return r.signals.length > 0;
}

function pct(n: number, d: number): string {
  return d === 0 ? '-' : `${((100 * n) / d).toFixed(1)} %`;
}

function table(title: string, rows: Map<string, { n: number; hit: number }>, minItems = 1): string[] {
  const lines = [title];
  for (const [k, v] of [...rows.entries()].sort((a, b) => b[1].n - a[1].n || a[0].localeCompare(b[0]))) {
    if (v.n < minItems) continue;
    lines.push(`  ${k.padEnd(28)}${`${v.hit} / ${v.n}`.padStart(11)}  ${pct(v.hit, v.n).padStart(8)}`);
  }
  return lines;
}

function tally(items: readonly Item[], ok: readonly boolean[], key: (i: Item) => string) {
  const m = new Map<string, { n: number; hit: number }>();
  items.forEach((it, i) => {
    const k = key(it);
    const v = m.get(k) ?? { n: 0, hit: 0 };
    v.n++;
    if (ok[i]) v.hit++;
    m.set(k, v);
  });
  return m;
}

function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
}

interface Timing {
  readonly perKbUs: number[];
  readonly totalMs: number;
  readonly bytes: number;
}

/**
 * Cost per KB of each item (microseconds): the median of `rounds` runs of that item. With two
 * detectors, runs alternate item by item, so a change in machine load affects both alike.
 */
function time(detectors: readonly Detector[], items: readonly Item[], rounds: number): Timing[] {
  const out = detectors.map(() => ({ perKbUs: [] as number[], totalMs: 0, bytes: 0 }));
  for (const it of items) {
    const bytes = Buffer.byteLength(it.text);
    const kb = Math.max(bytes / 1024, 1 / 1024);
    const runs = detectors.map(() => [] as number[]);
    for (let r = 0; r < rounds; r++) {
      detectors.forEach((d, i) => {
        const t0 = performance.now();
        d(it.text);
        (runs[i] as number[]).push(performance.now() - t0);
      });
    }
    runs.forEach((rs, i) => {
      rs.sort((a, b) => a - b);
      const med = quantile(rs, 0.5);
      const t = out[i] as { perKbUs: number[]; totalMs: number; bytes: number };
      t.totalMs += med;
      t.bytes += bytes;
      t.perKbUs.push((med * 1000) / kb);
    });
  }
  for (const t of out) t.perKbUs.sort((a, b) => a - b);
  return out;
}

function evaluate(name: string, detector: Detector, items: readonly Item[]): string[] {
  const reports = items.map((it) => detector(it.text));
  const ok = items.map((it, i) => found(it, reports[i] as Report));
  const out: string[] = [`== ${name}`];
  const sub = (label: Item['label']) =>
    items.map((it, i) => [it, ok[i] as boolean] as const).filter(([it]) => it.label === label);
  const inj = sub('injection');
  const injItems = inj.map(([it]) => it);
  const injOk = inj.map(([, o]) => o);
  const injHit = injOk.filter(Boolean).length;
  const en = inj.filter(([it]) => it.lang === 'en');
  const nonEn = inj.filter(([it]) => it.lang !== 'en');
  out.push(
    `injections found: ${injHit} / ${inj.length} (${pct(injHit, inj.length)}); English ${pct(en.filter(([, o]) => o).length, en.length)}, other languages ${pct(nonEn.filter(([, o]) => o).length, nonEn.length)}`,
  );
  out.push(
    ...table(
      '  by kind',
      tally(injItems, injOk, (i) => i.kind),
    ),
  );
  out.push(
    ...table(
      '  by language',
      tally(injItems, injOk, (i) => i.lang),
    ),
  );
  out.push(
    ...table(
      '  by placement',
      tally(injItems, injOk, (i) => `${i.placement ?? '-'}`),
    ),
  );
  out.push(
    ...table(
      '  English by kind',
      tally(injItems, injOk, (i) => (i.lang === 'en' ? i.kind : '(other language)')),
    ),
  );

  const cred = sub('credential');
  const credItems = cred.map(([it]) => it);
  const credOk = cred.map(([, o]) => o);
  const byProvider = tally(credItems, credOk, (i) => i.kind);
  const providersFound = [...byProvider.values()].filter((v) => v.hit > 0).length;
  out.push(
    `credentials found: ${credOk.filter(Boolean).length} / ${cred.length} (${pct(credOk.filter(Boolean).length, cred.length)}); providers/formats with at least one item found: ${providersFound} / ${byProvider.size} (${pct(providersFound, byProvider.size)})`,
  );
  out.push(
    `  providers missed entirely: ${
      [...byProvider.entries()]
        .filter(([, v]) => v.hit === 0)
        .map(([k]) => k)
        .sort()
        .join(', ') || '-'
    }`,
  );
  out.push(...table('  by provider (2+ items)', byProvider, 2));

  const ben = sub('benign');
  const benItems = ben.map(([it]) => it);
  const benOk = ben.map(([, o]) => o);
  const isDoc = (i: Item) => i.kind === 'security_doc' || i.kind === 'security_advisory';
  const ord = ben.filter(([it]) => !isDoc(it));
  const doc = ben.filter(([it]) => isDoc(it));
  out.push(
    `false alarms: ordinary ${ord.filter(([, o]) => o).length} / ${ord.length} (${pct(ord.filter(([, o]) => o).length, ord.length)}); security documentation ${doc.filter(([, o]) => o).length} / ${doc.length} (${pct(doc.filter(([, o]) => o).length, doc.length)})`,
  );
  out.push(
    ...table(
      '  false alarms by genre',
      tally(benItems, benOk, (i) => i.kind),
    ),
  );
  const ruleCounts = new Map<string, number>();
  items.forEach((it, i) => {
    if (it.label !== 'benign' || !ok[i]) return;
    for (const h of (reports[i] as Report).hits) ruleCounts.set(h.rule, (ruleCounts.get(h.rule) ?? 0) + 1);
  });
  out.push(
    `  rules behind false alarms: ${
      [...ruleCounts.entries()]
        .sort((a, b) => b[1] - a[1])
        .map(([r, n]) => `${r} ${n}`)
        .join(', ') || '-'
    }`,
  );
  const missLabel = arg('--misses');
  if (missLabel !== undefined) {
    const ids = items.filter((it, i) => it.label === missLabel && (it.label === 'benign' ? ok[i] : !ok[i]));
    out.push(`  ${missLabel === 'benign' ? 'false alarms' : 'misses'} (${missLabel}):`);
    for (const it of ids) {
      const r = reports[items.indexOf(it)] as Report;
      out.push(`    ${it.id} ${it.kind} ${it.lang} ${r.hits.map((h) => h.rule).join(' ')}`);
    }
  }
  return out;
}

/**
 * `shared/` sits beside the repository or one of the directories above it. From a git worktree
 * elsewhere, it sits beside the main checkout, which owns the common git directory.
 */
function defaultCorpus(): string {
  const rel = join('shared', 'signals-benchmark', 'corpus.jsonl');
  // Beside the repository or beside any directory above it (a clone under `wt/<name>/`).
  for (let dir = resolve(repoRoot, '..'); ; dir = dirname(dir)) {
    const candidate = join(dir, rel);
    if (existsSync(candidate)) return candidate;
    if (dirname(dir) === dir) break;
  }
  const beside = resolve(repoRoot, '..', rel);
  try {
    const common = execFileSync('git', ['rev-parse', '--path-format=absolute', '--git-common-dir'], {
      cwd: repoRoot,
      encoding: 'utf8',
    }).trim();
    const main = resolve(dirname(common), '..', rel);
    if (existsSync(main)) return main;
  } catch {
    // Not a git checkout: fall through to the default path, reported as unreadable.
  }
  return beside;
}

async function main(): Promise<number> {
  const corpusPath = arg('--corpus') ?? defaultCorpus();
  let items: Item[];
  try {
    items = loadCorpus(corpusPath);
  } catch (e) {
    console.error(`cannot read the benchmark at ${corpusPath}: ${(e as Error).message}`);
    return 2;
  }
  const rounds = Number(arg('--rounds') ?? '5');
  const baselineArg = process.argv.includes('--as-written') ? SIGNALS_RELEASES[2] : arg('--baseline');
  let baselineRun: { name: string; detect: Detector } | null = null;
  try {
    if (baselineArg !== undefined)
      baselineRun = /^writ-signals\/[0-9]+$/.test(baselineArg)
        ? releaseBaseline(baselineArg)
        : await loadBaseline(baselineArg);
  } catch (e) {
    console.error(`cannot load the baseline ${baselineArg ?? ''}: ${(e as Error).message}`);
    return 2;
  }
  const baseline = baselineRun?.detect ?? null;
  const current: Detector = (t) => scanUnder(OBSERVATION_RECEIPT_VERSION, t);
  const currentName = `current (${SIGNALS_RELEASE}, receipt version ${OBSERVATION_RECEIPT_VERSION})`;

  const lines: string[] = [`benchmark: ${corpusPath} (${items.length} items)`, ''];
  if (baselineRun !== null) lines.push(...evaluate(baselineRun.name, baselineRun.detect, items), '');
  lines.push(...evaluate(currentName, current, items), '');

  // Warm up both, then time them interleaved per round so load affects both alike.
  for (const d of [baseline, current]) if (d !== null) for (const it of items) d(it.text);
  const timings = time(baseline === null ? [current] : [current, baseline], items, rounds);
  const cur = timings[0] as Timing;
  const base = baseline === null ? null : (timings[1] as Timing);
  const fmt = (name: string, t: Timing) =>
    `${name.padEnd(10)} ${((t.bytes / 1024 / t.totalMs) * 1000).toFixed(0).padStart(7)} KB/s   per-KB cost p50 ${quantile(t.perKbUs, 0.5).toFixed(0).padStart(6)} us   p99 ${quantile(t.perKbUs, 0.99).toFixed(0).padStart(6)} us`;
  lines.push('throughput (median of rounds per item):');
  if (base !== null) lines.push(`  ${fmt('baseline', base)}`);
  lines.push(`  ${fmt('current', cur)}`);
  if (base !== null)
    lines.push(
      `  ratio current / baseline: p50 ${(quantile(cur.perKbUs, 0.5) / quantile(base.perKbUs, 0.5)).toFixed(2)}x, p99 ${(quantile(cur.perKbUs, 0.99) / quantile(base.perKbUs, 0.99)).toFixed(2)}x`,
    );
  console.log(lines.join('\n'));
  return 0;
}

try {
  process.exitCode = await main();
} finally {
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
}
