/**
 * The service commands of `writ` as functions with an injected fetch: argument and environment
 * handling, exit codes, tables and `--json`, retries reported on stderr, keys never printed.
 * (Against the Worker itself: test/integration/client/cli.test.ts.)
 */
import { describe, expect, it } from 'vitest';
import type { CliIo } from '../../../src/cli/io.js';
import { main } from '../../../src/cli/writ.js';

const KEY = 'writ_SECRETsecretSECRETsecretSECRETsecretSECRE';
const OTHER = 'writ_OTHERotherOTHERotherOTHERotherOTHERother';
const SHA = 'a'.repeat(64);

function io(
  env: Record<string, string>,
  answers: readonly (readonly [number, unknown, Record<string, string>?])[] = [],
) {
  const out: string[] = [];
  const err: string[] = [];
  const seen: { url: string; authorization: string | null }[] = [];
  let i = 0;
  const cli: CliIo = {
    readFile: () => Promise.reject(new Error('no files')),
    stdout: (t) => out.push(t),
    stderr: (t) => err.push(t),
    env,
    sleep: async () => undefined,
    fetch: async (request) => {
      seen.push({ url: request.url, authorization: request.headers.get('authorization') });
      const a = answers[Math.min(i++, answers.length - 1)];
      if (a === undefined) throw new Error('no answer scripted');
      return new Response(JSON.stringify(a[1]), {
        status: a[0],
        headers: { 'content-type': 'application/json', ...(a[2] ?? {}) },
      });
    },
  };
  return { cli, out: () => out.join(''), err: () => err.join(''), seen };
}

const receipt = (replay: unknown) => ({
  kind: 'authorization',
  outcome: 'authorized',
  receipt: { sha256: SHA, body: { decision: 'authorized' } },
  evidence: {},
  created_at_unix_ms: 0,
  replay,
});

describe('writ receipt', () => {
  it('replay ok: exit 0; differences: exit 1 with the fields; --json for scripts', async () => {
    const ok = io({ WRIT_URL: 'https://w.test', WRIT_KEY: KEY }, [
      [200, receipt({ ok: true, differences: [] })],
    ]);
    expect(await main(['receipt', 'replay', SHA], ok.cli)).toBe(0);
    expect(ok.out()).toContain('REPLAY OK authorization receipt');
    expect(ok.seen[0]).toEqual({ url: `https://w.test/v1/receipts/${SHA}`, authorization: `Bearer ${KEY}` });

    const bad = io({ WRIT_URL: 'https://w.test', WRIT_KEY: KEY }, [
      [200, receipt({ ok: false, differences: ['decision', 'violations'] })],
    ]);
    expect(await main(['receipt', 'replay', SHA, '--json'], bad.cli)).toBe(1);
    expect(JSON.parse(bad.out())).toMatchObject({
      replay: 'differences',
      differences: ['decision', 'violations'],
    });

    const exec = io({ WRIT_URL: 'https://w.test', WRIT_KEY: KEY }, [
      [200, { ...receipt(null), kind: 'execution' }],
    ]);
    expect(await main(['receipt', 'replay', SHA], exec.cli)).toBe(0);
    expect(exec.out()).toContain('not replayed by the service');
  });

  it('usage errors exit 2 before any request', async () => {
    for (const [argv, env, message] of [
      [['receipt', 'replay', 'xyz'], { WRIT_URL: 'https://w.test', WRIT_KEY: KEY }, '64 lowercase hex'],
      [['receipt', 'frob', SHA], { WRIT_URL: 'https://w.test', WRIT_KEY: KEY }, 'unknown subcommand'],
      [['receipt', 'get', SHA], { WRIT_KEY: KEY }, 'no service URL'],
      [['receipt', 'get', SHA], { WRIT_URL: 'https://w.test' }, 'no key'],
      [['receipt', 'get', SHA, '--key'], { WRIT_URL: 'https://w.test' }, '--key needs a value'],
      [['approvals', 'approve'], { WRIT_URL: 'https://w.test', WRIT_KEY: KEY }, 'approval id'],
      [
        ['approvals', 'approve', 'apr-1', '--expires-in-ms', '-5'],
        { WRIT_URL: 'https://w.test', WRIT_KEY: KEY },
        'positive integer',
      ],
      [
        ['approvals', 'approve', 'apr-1', '--expires-in-ms', '1.5'],
        { WRIT_URL: 'https://w.test', WRIT_KEY: KEY },
        'positive integer',
      ],
      [
        ['approvals', 'list', '--status', 'weird'],
        { WRIT_URL: 'https://w.test', WRIT_KEY: KEY },
        '--status is one of',
      ],
      [
        ['approvals', 'deny', 'apr-1', '--expires-in-ms', '5'],
        { WRIT_URL: 'https://w.test', WRIT_KEY: KEY },
        'deny takes no',
      ],
      [['lab'], {}, 'which lab'],
      [['lab', 'tools', '--key', KEY], {}, '--url and --key go with --service'],
      [['lab', 'tools', '--service', 'ftp://x'], { WRIT_ADMIN_KEY: KEY }, 'http(s) URL'],
      [['lab', 'tools', '--service', 'https://w.test'], {}, 'no key'],
    ] as const) {
      const t = io(env, []);
      expect(await main(argv, t.cli), argv.join(' ')).toBe(2);
      expect(t.err()).toContain(message);
      expect(t.seen).toEqual([]);
      expect(t.err()).not.toContain('SECRET');
    }
  });
});

describe('writ approvals', () => {
  it('WRIT_KEY wins over a per-role key; WRIT is accepted as the URL (npm run dev exports it)', async () => {
    const t = io({ WRIT: 'https://dev.test', WRIT_KEY: KEY, APPROVER_KEY: OTHER }, [[200, { items: [] }]]);
    expect(await main(['approvals', 'list'], t.cli)).toBe(0);
    expect(t.out()).toBe('no pending approval requests\n');
    expect(t.seen[0]).toEqual({
      url: 'https://dev.test/v1/approval-requests?status=pending',
      authorization: `Bearer ${KEY}`,
    });
    const r = io({ WRIT_URL: 'https://w.test', APPROVER_KEY: OTHER }, [[200, { items: [] }]]);
    expect(await main(['approvals', 'list', '--status', 'consumed'], r.cli)).toBe(0);
    expect(r.seen[0]).toEqual({
      url: 'https://w.test/v1/approval-requests?status=consumed',
      authorization: `Bearer ${OTHER}`,
    });
    // Requests no approver decided in time are listed too (the API's `expired`).
    const x = io({ WRIT_URL: 'https://w.test', APPROVER_KEY: OTHER }, [[200, { items: [] }]]);
    expect(await main(['approvals', 'list', '--status', 'expired'], x.cli)).toBe(0);
    expect(x.out()).toBe('no expired approval requests\n');
    expect(x.seen[0]).toEqual({
      url: 'https://w.test/v1/approval-requests?status=expired',
      authorization: `Bearer ${OTHER}`,
    });
  });

  it('a rate-limited approve is retried after Retry-After, with progress on stderr; a refusal exits 1 without the key', async () => {
    const approved = { approval_id: 'apr-1', status: 'approved', expires_at_unix_ms: 0, input_sha256: SHA };
    const t = io({ WRIT_URL: 'https://w.test', WRIT_KEY: KEY }, [
      [
        429,
        { error: { code: 'rate_limited', message: 'slow down', issues: [], request_id: 'r1' } },
        { 'retry-after': '3' },
      ],
      [200, approved],
    ]);
    expect(await main(['approvals', 'approve', 'apr-1'], t.cli)).toBe(0);
    expect(t.err()).toContain(
      'rate_limited on POST /v1/approval-requests/{approval_id}/approve, retrying in 3000 ms',
    );
    expect(t.out()).toBe(`apr-1 approved until 1970-01-01T00:00:00.000Z (input_sha256 ${SHA})\n`);

    const no = io({ WRIT_URL: 'https://w.test', WRIT_KEY: KEY }, [
      [
        403,
        {
          error: {
            code: 'self_approval',
            message: 'an approver cannot decide its own request',
            issues: [],
            request_id: 'r2',
          },
        },
      ],
    ]);
    expect(await main(['approvals', 'deny', 'apr-1'], no.cli)).toBe(1);
    expect(no.err()).toBe(
      'writ approvals deny: POST /v1/approval-requests/{approval_id}/deny answered 403 self_approval: an approver cannot decide its own request (request r2)\n',
    );
    expect(no.out() + no.err()).not.toContain('SECRET');
  });
});

describe('writ lab (in process)', () => {
  it('tools and observations print their case tables and exit 0; --json is the canonical report', async () => {
    for (const which of ['tools', 'observations']) {
      const t = io({});
      expect(await main(['lab', which], t.cli)).toBe(0);
      expect(t.out()).toMatch(/^\s+case\s+expected\s+actual\s+violations\n/);
      expect(t.out()).toContain('report SHA-256');
      expect(t.out()).not.toContain('MISMATCH');
      const j = io({});
      expect(await main(['lab', which, '--json'], j.cli)).toBe(0);
      expect(JSON.parse(j.out())).toHaveProperty('cases');
    }
  });

  it('help lists every command', async () => {
    const t = io({});
    expect(await main(['help'], t.cli)).toBe(0);
    for (const c of ['verify', 'receipt', 'approvals', 'metrics', 'lab']) expect(t.out()).toContain(`  ${c}`);
  });
});
