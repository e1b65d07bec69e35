/**
 * `writ verify` as a function: valid (0), invalid (1) and usage errors (2), with injected files.
 * Until the log library lands, a logged bundle is "not checked" and passes only with
 * `--allow-unlogged`.
 */
import { describe, expect, it } from 'vitest';
import { publicKeySet } from '../../../src/core/receipts/keys.js';
import type { CliIo } from '../../../src/cli/io.js';
import { main } from '../../../src/cli/writ.js';
import { T } from '../core/fixtures.js';
import { authorizationBundle, ring } from '../verify/fixtures.js';

function io(files: Record<string, string | Uint8Array>) {
  const out: string[] = [];
  const errs: string[] = [];
  const cli: CliIo = {
    readFile: async (path) => {
      const f = files[path];
      if (f === undefined) throw new Error('ENOENT');
      return typeof f === 'string' ? new TextEncoder().encode(f) : f;
    },
    stdout: (t) => out.push(t),
    stderr: (t) => errs.push(t),
  };
  return { cli, out: () => out.join(''), err: () => errs.join('') };
}

const bundle = JSON.stringify(authorizationBundle());
const unlogged = JSON.stringify({ ...authorizationBundle(), log: null });
const keysFile = JSON.stringify(publicKeySet(ring(), T.now));

describe('writ verify', () => {
  it('valid: exit 0 with --allow-unlogged while the log library is missing, and says so', async () => {
    const t = io({ 'b.json': bundle, 'keys.json': keysFile });
    expect(await main(['verify', 'b.json', '--keys', 'keys.json', '--allow-unlogged'], t.cli)).toBe(0);
    expect(t.out()).toMatch(/^VALID authorization receipt [0-9a-f]{64}\n/);
    expect(t.out()).toContain('keys: pinned (--keys)');
    expect(t.out()).toContain('log: not checked (library missing)');
    const u = io({ 'u.json': unlogged });
    expect(await main(['verify', 'u.json', '--allow-unlogged'], u.cli)).toBe(0);
    expect(u.out()).toContain('keys: from the bundle');
  });

  it('a logged bundle fails while the log cannot be checked; an unlogged one fails without the flag', async () => {
    const t = io({ 'b.json': bundle });
    expect(await main(['verify', 'b.json'], t.cli)).toBe(1);
    expect(t.out()).toContain('INVALID authorization receipt');
    expect(t.out()).toContain('log_not_checked');
    const u = io({ 'u.json': unlogged });
    expect(await main(['verify', 'u.json'], u.cli)).toBe(1);
    expect(u.out()).toContain('unlogged');
  });

  it('invalid: exit 1 with the reason, in text and in --json', async () => {
    const tampered = bundle.replace('"decision":"authorized"', '"decision":"denied"');
    const t = io({ 'b.json': tampered });
    expect(await main(['verify', 'b.json', '--allow-unlogged'], t.cli)).toBe(1);
    expect(t.out()).toContain('receipt_mismatch');
    expect(t.out()).toContain('differs: body.decision');
    const j = io({ 'b.json': tampered });
    expect(await main(['verify', 'b.json', '--json', '--allow-unlogged'], j.cli)).toBe(1);
    expect(JSON.parse(j.out())).toMatchObject({ valid: false, failure: { reason: 'receipt_mismatch' } });
    const garbage = io({ 'b.json': new Uint8Array([0xff, 0xfe]) });
    expect(await main(['verify', 'b.json'], garbage.cli)).toBe(1);
  });

  it('usage errors: exit 2', async () => {
    for (const argv of [
      [],
      ['nope'],
      ['verify'],
      ['verify', 'a.json', 'b.json'],
      ['verify', 'b.json', '--keys'],
      ['verify', 'b.json', '--frobnicate'],
      ['verify', 'missing.json'],
      ['verify', 'b.json', '--keys', 'missing.json'],
      ['verify', 'b.json', '--keys', 'b.json'],
    ]) {
      const t = io({ 'b.json': bundle });
      expect(await main(argv, t.cli), JSON.stringify(argv)).toBe(2);
      expect(t.err()).not.toBe('');
    }
    const h = io({});
    expect(await main(['--help'], h.cli)).toBe(0);
    expect(h.out()).toContain('verify');
  });
});
