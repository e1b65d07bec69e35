/**
 * The executor conformance kit (`writ conformance`, issue 11) against the example executor
 * (examples/executor), which passes, and against deliberately broken variants, each of which the
 * kit catches: no audience check, no replay protection, no check at all, and an executor that
 * trusts other keys (the valid request refused: the run proves nothing and fails).
 */
import { describe, expect, it } from 'vitest';
import type { CliIo } from '../../../src/cli/io.js';
import { main } from '../../../src/cli/writ.js';
import { parsePublicKeySetText } from '../../../src/core/receipts/keys.js';
import { verifyAuthorizationReceipt } from '../../../src/verify/authorization.js';
import { createExecutor, type ExecutorOptions } from '../../../examples/executor/executor.js';

const RELEASE = 'conformance-executor 1.0';
const URL = 'https://executor.test/run';
const NOW = 1_767_225_661_000;

function io(handler?: (r: Request) => Promise<Response>) {
  const files: Record<string, string> = {};
  const out: string[] = [];
  const errs: string[] = [];
  const cli: CliIo = {
    readFile: async (path) => {
      const f = files[path];
      if (f === undefined) throw new Error('ENOENT');
      return new TextEncoder().encode(f);
    },
    writeFile: async (path, text) => {
      files[path] = text;
    },
    stdout: (t) => out.push(t),
    stderr: (t) => errs.push(t),
    now: () => NOW,
    ...(handler === undefined ? {} : { fetch: handler }),
  };
  return { cli, files, out: () => out.join(''), err: () => errs.join('') };
}

/** Keys from `keygen`, and an executor (possibly broken) trusting them. */
async function setup(variant: Partial<ExecutorOptions> = {}, principal?: string) {
  const gen = io();
  expect(await main(['conformance', 'keygen', '--ring', 'ring.json', '--keys', 'keys.json'], gen.cli)).toBe(
    0,
  );
  const keys = parsePublicKeySetText(gen.files['keys.json'] as string);
  if (!keys.ok) throw new Error(keys.error.message);
  const handler = createExecutor({
    keys: keys.value,
    audience: {
      executor_release: RELEASE,
      ...(principal === undefined ? {} : { executor_principal_id: principal }),
    },
    now: () => NOW + 1000,
    ...variant,
  });
  const t = io(handler);
  Object.assign(t.files, gen.files);
  return t;
}

async function run(t: Awaited<ReturnType<typeof setup>>, extra: string[] = []) {
  const code = await main(
    ['conformance', 'executor', URL, '--ring', 'ring.json', '--release', RELEASE, '--json', ...extra],
    t.cli,
  );
  return {
    code,
    report: JSON.parse(t.out()) as {
      ok: boolean;
      wrongly_accepted: string[];
      results: { case: string; verdict: string; reason: string | null }[];
    },
  };
}

describe('writ conformance keygen', () => {
  it('writes a private ring and the public key set it matches; nothing secret in the key set', async () => {
    const t = io();
    expect(await main(['conformance', 'keygen', '--ring', 'r.json', '--keys', 'k.json'], t.cli)).toBe(0);
    expect(JSON.parse(t.files['r.json'] as string).keys[0].seed_b64).toMatch(/^[A-Za-z0-9+/]{43}=$/);
    expect(t.files['k.json']).not.toContain('seed');
    expect(parsePublicKeySetText(t.files['k.json'] as string).ok).toBe(true);
    // Two runs draw two different keys.
    const u = io();
    await main(['conformance', 'keygen', '--ring', 'r.json', '--keys', 'k.json'], u.cli);
    expect(u.files['k.json']).not.toBe(t.files['k.json']);
  });
});

describe('writ conformance executor', () => {
  it('the example executor passes: the valid request accepted, every other one refused for its reason', async () => {
    const { code, report } = await run(await setup());
    expect(code).toBe(0);
    expect(report.ok).toBe(true);
    expect(report.wrongly_accepted).toEqual([]);
    expect(Object.fromEntries(report.results.map((r) => [r.case, r.reason]))).toEqual({
      valid: null,
      replayed: 'replayed',
      missing: 'missing',
      unsigned: 'signature_missing',
      untrusted_key: 'unknown_key',
      denied: 'denied',
      expired: 'expired',
      backdated_signature: 'signature_mismatch',
      deadline_beyond_limit: 'malformed',
      mutated: 'digest_mismatch',
      wrong_audience: 'wrong_audience',
      input_mismatch: 'input_mismatch',
    });
  });

  it('with --principal it also sends a receipt for another principal; the example refuses it', async () => {
    const { code, report } = await run(await setup({}, 'prn-executor-1'), ['--principal', 'prn-executor-1']);
    expect(code).toBe(0);
    expect(report.results.find((r) => r.case === 'wrong_principal')?.reason).toBe('wrong_audience');
  });

  it('catches an executor that takes its audience from the receipt', async () => {
    const broken: ExecutorOptions['verify'] = (receipt, o) => {
      const named = (receipt as { body?: { executor_release?: unknown } } | null)?.body?.executor_release;
      return verifyAuthorizationReceipt(receipt, {
        ...o,
        audience: { executor_release: typeof named === 'string' ? named : o.audience.executor_release },
      });
    };
    const { code, report } = await run(await setup({ verify: broken }));
    expect(code).toBe(1);
    expect(report.wrongly_accepted).toEqual(['wrong_audience']);
  });

  it('catches an executor without replay protection', async () => {
    const { code, report } = await run(await setup({ claimOnce: () => true }));
    expect(code).toBe(1);
    expect(report.wrongly_accepted).toEqual(['replayed']);
  });

  it('catches an executor that checks nothing, and says so in the table', async () => {
    const t = await setup({
      verify: (r) => ({ ok: true, receipt: r as never, signature: null as never }),
      claimOnce: () => true,
    });
    // The broken verifier returns the raw value; the example reads the body from it.
    const code = await main(
      ['conformance', 'executor', URL, '--ring', 'ring.json', '--release', RELEASE],
      t.cli,
    );
    expect(code).toBe(1);
    expect(t.out()).toMatch(/^case +expected +status +verdict/);
    expect(t.out()).toContain('WRONGLY_ACCEPTED');
    expect(t.out()).toMatch(/FAIL: wrongly accepted: replayed, .*wrong_audience, input_mismatch\n$/);
  });

  it('fails when the valid request is refused (the executor trusts other keys): nothing was proven', async () => {
    const t = await setup();
    // The kit signs with a fresh ring the executor was never told to trust.
    const gen = io();
    await main(['conformance', 'keygen', '--ring', 'ring.json', '--keys', 'keys.json'], gen.cli);
    t.files['ring.json'] = gen.files['ring.json'] as string;
    const { code, report } = await run(t);
    expect(code).toBe(1);
    expect(report.ok).toBe(false);
    expect(report.results[0]).toMatchObject({
      case: 'valid',
      verdict: 'wrongly_refused',
      reason: 'unknown_key',
    });
    // The table's verdict names that failure (it once read "FAIL: wrongly accepted: none").
    const table = io(t.cli.fetch);
    Object.assign(table.files, t.files);
    expect(
      await main(['conformance', 'executor', URL, '--ring', 'ring.json', '--release', RELEASE], table.cli),
    ).toBe(1);
    expect(table.out()).toMatch(/\nFAIL: the valid request was refused\n$/);
  });

  it('an unreachable executor fails the run', async () => {
    const t = await setup();
    const down = io(async () => {
      throw new TypeError('fetch failed');
    });
    Object.assign(down.files, t.files);
    const { code, report } = await run(down);
    expect(code).toBe(1);
    expect(report.results.every((r) => r.verdict !== 'wrongly_accepted')).toBe(true);
    expect(report.results[0]?.verdict).toBe('wrongly_refused');
  });

  it('usage errors exit 2', async () => {
    const t = await setup();
    expect(await main(['conformance'], t.cli)).toBe(2);
    expect(await main(['conformance', 'executor', URL, '--release', RELEASE], t.cli)).toBe(2);
    expect(await main(['conformance', 'executor', URL, '--ring', 'ring.json'], t.cli)).toBe(2);
    expect(
      await main(['conformance', 'executor', 'ftp://x', '--ring', 'ring.json', '--release', RELEASE], t.cli),
    ).toBe(2);
    expect(
      await main(['conformance', 'executor', URL, '--ring', 'missing.json', '--release', RELEASE], t.cli),
    ).toBe(2);
    t.files['bad.json'] = '{}';
    expect(
      await main(['conformance', 'executor', URL, '--ring', 'bad.json', '--release', RELEASE], t.cli),
    ).toBe(2);
    expect(await main(['conformance', 'keygen', '--ring', 'r.json'], t.cli)).toBe(2);
    expect(await main(['conformance', 'executor', URL, '--bogus'], t.cli)).toBe(2);
  });
});
