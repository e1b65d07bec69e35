/**
 * `writ metrics` against the Worker (its own `fetch`) with a fresh tenant: sections of counts, or
 * the service's answer with `--json`; a key without the admin role is refused (exit 1), a bad
 * window is a usage error (exit 2) that sends nothing.
 */
import { exports } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import type { CliIo } from '../../../src/cli/io.js';
import { parseWindow } from '../../../src/cli/metrics.js';
import { main } from '../../../src/cli/writ.js';
import { BASE, authorize, authorizeBody, createRun, seedTenant } from '../platform/harness.js';

function io(env: Record<string, string>) {
  const out: string[] = [];
  const err: string[] = [];
  let requests = 0;
  const cli: CliIo = {
    readFile: () => Promise.reject(new Error('no files')),
    stdout: (t) => out.push(t),
    stderr: (t) => err.push(t),
    env: { WRIT_URL: BASE, ...env },
    fetch: (request) => {
      requests++;
      return exports.default.fetch(request);
    },
    sleep: async () => undefined,
  };
  return { cli, out: () => out.join(''), err: () => err.join(''), requests: () => requests };
}

describe('writ metrics', () => {
  it('prints the counts of the window, or the answer as JSON; never a key', async () => {
    const s = await seedTenant('climetrics');
    const denied = await authorize(s, authorizeBody(s, await createRun(s)));
    expect(denied.status).toBe(403);
    const admin = { WRIT_ADMIN_KEY: s.admin.api_key };

    const text = io(admin);
    expect(await main(['metrics', '--window', '1h'], text.cli)).toBe(0);
    const printed = text.out();
    expect(printed).toContain(`tenant ${s.tenant_id}`);
    expect(printed).toMatch(/authorization\s+denied\s+1/);
    for (const v of denied.body.violations as string[]) expect(printed).toMatch(new RegExp(`${v}\\s+1`));
    expect(printed).toContain('quarantined contracts: 0');
    expect(printed).not.toContain(s.admin.api_key);

    const json = io(admin);
    expect(await main(['metrics', '--json'], json.cli)).toBe(0);
    const m = JSON.parse(json.out());
    expect(m.window.window_ms).toBe(86_400_000);
    expect(m.receipts.by_kind.authorization).toEqual({ denied: 1 });
    expect(json.out()).not.toContain(s.admin.api_key);
  });

  it('refuses a key without the admin role (exit 1) and a bad window before sending (exit 2)', async () => {
    const s = await seedTenant('climetrics');
    const agent = io({ WRIT_KEY: s.agent.api_key });
    expect(await main(['metrics'], agent.cli)).toBe(1);
    expect(agent.err()).toMatch(/403 forbidden_role/);
    for (const window of ['0', '1w', '-5m', '1.5h', '']) {
      const bad = io({ WRIT_ADMIN_KEY: s.admin.api_key });
      expect(await main(['metrics', '--window', window], bad.cli), window).toBe(2);
      expect(bad.requests(), window).toBe(0);
    }
    const extra = io({ WRIT_ADMIN_KEY: s.admin.api_key });
    expect(await main(['metrics', 'now'], extra.cli)).toBe(2);
    // In range for the CLI, out of range for the service: the service's 400, exit 1.
    const long = io({ WRIT_ADMIN_KEY: s.admin.api_key });
    expect(await main(['metrics', '--window', '8d'], long.cli)).toBe(1);
    expect(long.err()).toMatch(/400 invalid_request/);
  });

  it('reads windows in minutes, hours, days or milliseconds', () => {
    expect(parseWindow('15m')).toBe(900_000);
    expect(parseWindow('24h')).toBe(86_400_000);
    expect(parseWindow('7d')).toBe(604_800_000);
    expect(parseWindow('60000')).toBe(60_000);
    for (const bad of ['', '0', '01h', '1 h', '1H', '1w', '1e5', '-1m'])
      expect(parseWindow(bad), bad).toBeNull();
  });
});
