/**
 * `writ verify` as a function: valid (0), invalid (1) and usage errors (2), with injected files.
 * The log is checked for real (src/verify/log.ts): a bundle whose proof does not verify fails.
 */
import { describe, expect, it } from 'vitest';
import { publicKeySet } from '../../../src/core/receipts/keys.js';
import type { CliIo } from '../../../src/cli/io.js';
import { main } from '../../../src/cli/writ.js';
import { T } from '../core/fixtures.js';
import {
  authorizationBundle,
  cosign,
  realLog,
  ring,
  testWitness,
  withCheckpoint,
} from '../verify/fixtures.js';

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

const fake = authorizationBundle();
const logged = { ...fake, log: realLog(fake.signature) };
const bundle = JSON.stringify(logged);
const unlogged = JSON.stringify({ ...authorizationBundle(), log: null });
const keysFile = JSON.stringify(publicKeySet(ring(), T.now));

describe('writ verify', () => {
  it('valid: exit 0 with the log inclusion checked, and says where', async () => {
    const t = io({ 'b.json': bundle, 'keys.json': keysFile });
    expect(await main(['verify', 'b.json', '--keys', 'keys.json'], t.cli)).toBe(0);
    expect(t.out()).toMatch(/^VALID authorization receipt [0-9a-f]{64}\n/);
    expect(t.out()).toContain('keys: pinned (--keys)');
    expect(t.out()).toContain('log: included at index 3 of 6 (writ.example/log/');
    const u = io({ 'u.json': unlogged });
    expect(await main(['verify', 'u.json', '--allow-unlogged'], u.cli)).toBe(0);
    expect(u.out()).toContain('keys: from the bundle');
  });

  it('a proof that does not verify fails, with or without --allow-unlogged; unlogged fails without the flag', async () => {
    const bad = [
      // The fake section of the core tests: not a C2SP proof.
      JSON.stringify(fake),
      // The checkpoint beside the proof is not the proof's.
      JSON.stringify({
        ...logged,
        log: { ...logged.log, checkpoint: realLog(fake.signature, ring(), { after: 3 }).checkpoint },
      }),
      // A proof of another leaf position.
      JSON.stringify({ ...logged, log: realLog(fake.signature, ring(), { before: 2 }) }).replace(
        'index 2',
        'index 3',
      ),
    ];
    for (const text of bad) {
      for (const flags of [[], ['--allow-unlogged']]) {
        const t = io({ 'b.json': text });
        expect(await main(['verify', 'b.json', ...flags], t.cli)).toBe(1);
        expect(t.out()).toContain('INVALID authorization receipt');
        expect(t.out()).toContain('log_failed');
      }
    }
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

  it('text the bundle controls never reaches the terminal raw: no control character in the verdict', async () => {
    // ESC [2J ESC [H clears the screen; a forged "VALID" line would follow it. C1 CSI (U+009B) too.
    const forged = '\u001b[2J\u001b[HVALID authorization receipt\u009b1A\u2028';
    const withBody = (edit: (body: Record<string, unknown>) => void) => {
      const b = JSON.parse(bundle) as { receipt: { body: Record<string, unknown> } };
      edit(b.receipt.body);
      return JSON.stringify(b);
    };
    const texts = [
      // The tenant and the kind are shown from the body, before anything has verified them.
      withBody((body) => (body.tenant_id = forged)),
      withBody((body) => (body.receipt_kind = forged)),
      // A key of the body is named as a difference.
      withBody((body) => (body[forged] = 1)),
    ];
    for (const text of texts) {
      const t = io({ 'b.json': text });
      expect(await main(['verify', 'b.json'], t.cli)).toBe(1);
      expect(t.out()).toContain('INVALID');
      expect(t.out()).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029]/);
    }
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

  describe('--witness', () => {
    const W1 = testWitness('witness.test/w1', 21);
    const W2 = testWitness('witness.test/w2', 22);
    const W3 = testWitness('witness.test/w3', 23);
    const at = 1_765_000_000;
    const withCosigners = (...ws: (typeof W1)[]) =>
      JSON.stringify({
        ...logged,
        log: withCheckpoint(
          logged.log,
          ws.reduce((n, w) => cosign(n, w, at), logged.log.checkpoint),
        ),
      });
    const run = async (text: string, ...flags: string[]) => {
      const t = io({ 'b.json': text, 'keys.json': keysFile });
      const code = await main(['verify', 'b.json', '--keys', 'keys.json', ...flags], t.cli);
      return { code, out: t.out(), err: t.err() };
    };

    it('passes with every witness by default, or with the quorum asked, and prints who cosigned', async () => {
      const both = await run(withCosigners(W1, W2), '--witness', W1.vkey, '--witness', W2.vkey);
      expect(both.code).toBe(0);
      expect(both.out).toContain(
        `witnesses: 2 of 2 cosigned (quorum 2): ${W1.name} (time ${at}), ${W2.name}`,
      );
      const two = await run(
        withCosigners(W3, W1),
        ...['--witness', W1.vkey, '--witness', W2.vkey, '--witness', W3.vkey, '--witness-quorum', '2'],
      );
      expect(two.code).toBe(0);
      expect(two.out).toContain('witnesses: 2 of 3 cosigned (quorum 2)');
      const json = await run(withCosigners(W1), '--witness', W1.vkey, '--json');
      expect(JSON.parse(json.out)).toMatchObject({
        valid: true,
        log: { inclusion: { witnesses: { quorum: 1, cosigned: [{ name: W1.name, timestamp_unix_s: at }] } } },
      });
    });

    it('fails (exit 1) with the reason when the quorum is not met or a cosignature is bad', async () => {
      // Default quorum is all: one of two is not enough.
      const short = await run(withCosigners(W1), '--witness', W1.vkey, '--witness', W2.vkey);
      expect(short.code).toBe(1);
      expect(short.out).toContain('INVALID authorization receipt');
      expect(short.out).toContain('witness_quorum_not_met');
      expect(short.out).toContain(`cosigned by ${JSON.stringify(W1.name)}`);
      // A bundle with no cosignature at all: required by the options, so it fails.
      const none = await run(bundle, '--witness', W1.vkey);
      expect(none.code).toBe(1);
      expect(none.out).toContain('witness_quorum_not_met');
      // W2's cosignature line moved onto another checkpoint of the same log.
      const other = realLog(fake.signature, ring(), { after: 3 });
      const foreign = cosign(other.checkpoint, W2, at);
      const line = foreign.slice(foreign.lastIndexOf('\u2014'));
      const pasted = JSON.stringify({
        ...logged,
        log: withCheckpoint(logged.log, `${cosign(logged.log.checkpoint, W1, at)}${line}`),
      });
      const forged = await run(pasted, '--witness', W1.vkey, '--witness', W2.vkey, '--witness-quorum', '1');
      expect(forged.code).toBe(1);
      expect(forged.out).toContain('invalid_cosignature');
    });

    it('without --witness a cosigned checkpoint verifies as before, cosignatures ignored', async () => {
      const r = await run(withCosigners(W1));
      expect(r.code).toBe(0);
      expect(r.out).not.toContain('witnesses:');
    });

    it('usage errors (exit 2): a malformed vkey, a quorum outside 1..n, a flag without its pair', async () => {
      const plain = 'PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW';
      for (const flags of [
        ['--witness'],
        ['--witness', 'not-a-vkey'],
        ['--witness', plain],
        ['--witness', W1.vkey.replace(/\+[0-9a-f]{8}\+/, '+00000000+')],
        ['--witness', W1.vkey, '--witness-quorum', '2'],
        ['--witness', W1.vkey, '--witness-quorum', '0'],
        ['--witness', W1.vkey, '--witness-quorum', '-1'],
        ['--witness', W1.vkey, '--witness-quorum', 'all'],
        ['--witness', W1.vkey, '--witness-quorum', '1', '--witness-quorum', '1'],
        ['--witness-quorum', '1'],
        ['--witness', W1.vkey, '--witness', W1.vkey],
        ['--witness', W1.vkey, '--allow-unlogged'],
      ]) {
        const r = await run(withCosigners(W1, W2), ...flags);
        expect(r.code, JSON.stringify(flags)).toBe(2);
        expect(r.err, JSON.stringify(flags)).toContain('usage: writ verify');
        expect(r.out).toBe('');
      }
    });
  });
});
