/**
 * `writ help <command>` and `writ <command> --help`: every command's own usage on stdout, exit 0,
 * with nothing read, written or sent; `--help` anywhere but first stays the command's argument.
 */
import { describe, expect, it } from 'vitest';
import type { CliIo } from '../../../src/cli/io.js';
import { COMMANDS, main } from '../../../src/cli/writ.js';

function io() {
  const out: string[] = [];
  const err: string[] = [];
  let touched = 0;
  const cli: CliIo = {
    readFile: () => {
      touched++;
      return Promise.reject(new Error('no files'));
    },
    writeFile: () => {
      touched++;
      return Promise.reject(new Error('no files'));
    },
    stdout: (t) => out.push(t),
    stderr: (t) => err.push(t),
    env: { WRIT_URL: 'https://w.test', WRIT_KEY: 'writ_0_' + 'k'.repeat(43) },
    fetch: () => {
      touched++;
      return Promise.reject(new Error('no network'));
    },
  };
  return { cli, out: () => out.join(''), err: () => err.join(''), touched: () => touched };
}

describe('writ help', () => {
  const names = Object.keys(COMMANDS);

  it('lists every command with its summary in one column', async () => {
    const t = io();
    expect(await main(['help'], t.cli)).toBe(0);
    const rows = t
      .out()
      .split('\n')
      .filter((l) => /^ {2}\S/.test(l));
    expect(rows.map((l) => l.trim().split(/\s+/)[0])).toEqual(names);
    // Every summary starts at the same column, after at least two spaces.
    const starts = names.map((n, i) => (rows[i] as string).indexOf(COMMANDS[n]?.summary as string));
    expect(new Set(starts).size).toBe(1);
    for (const [i, n] of names.entries()) expect(rows[i]).toContain(`${n}  `);
  });

  it('has a usage for every command, naming the command', () => {
    expect(names.length).toBeGreaterThan(5);
    for (const name of names) expect(COMMANDS[name]?.usage).toContain(`writ ${name}`);
  });

  for (const form of ['--help', '-h', 'help'] as const) {
    it(`prints each command's usage for ${form === 'help' ? 'writ help <command>' : `writ <command> ${form}`}`, async () => {
      for (const name of names) {
        const t = io();
        const argv = form === 'help' ? ['help', name] : [name, form];
        expect(await main(argv, t.cli)).toBe(0);
        expect(t.out()).toContain(COMMANDS[name]!.usage);
        expect(t.out()).toContain(COMMANDS[name]!.summary);
        expect(t.err()).toBe('');
        expect(t.touched()).toBe(0);
      }
    });
  }

  it('refuses help for an unknown command with exit 2 and the command list', async () => {
    const t = io();
    expect(await main(['help', 'frobnicate'], t.cli)).toBe(2);
    expect(t.err()).toContain('unknown command "frobnicate"');
    expect(t.err()).toContain('commands:');
    expect(t.out()).toBe('');
  });

  it('keeps the general usage for writ help, writ --help and a bare writ', async () => {
    for (const [argv, code] of [
      [['help'], 0],
      [['--help'], 0],
      [['-h'], 0],
      [[], 2],
    ] as const) {
      const t = io();
      expect(await main(argv, t.cli)).toBe(code);
      expect(code === 0 ? t.out() : t.err()).toContain('writ help <command>');
    }
  });

  it('leaves --help after the first argument to the command, which judges it', async () => {
    const t = io();
    // approvals parses its own arguments: an option it does not know is its usage error (exit 2,
    // on stderr), so the shortcut swallowed nothing.
    expect(await main(['approvals', 'deny', 'apr-1', '--help'], t.cli)).toBe(2);
    expect(t.err()).toContain('writ approvals:');
    expect(t.out()).toBe('');
  });
});
