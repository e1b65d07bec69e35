/**
 * The service commands of `writ` as functions, against the Worker (its own `fetch`) with a fresh
 * tenant: approvals, receipt replay, and the tool-loop laboratory over HTTP.
 */
import { exports } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import type { CliIo } from '../../../src/cli/io.js';
import type { HttpLabReport } from '../../../src/cli/lab-service.js';
import { LAB_CASES } from '../../../src/lab/tool-loop.js';
import { main } from '../../../src/cli/writ.js';
import { BASE, ROLLBACK_INPUT, call, seedTenant } from '../platform/harness.js';

function io(env: Record<string, string>) {
  const out: string[] = [];
  const err: string[] = [];
  const cli: CliIo = {
    readFile: () => Promise.reject(new Error('no files')),
    stdout: (t) => out.push(t),
    stderr: (t) => err.push(t),
    env: { WRIT_URL: BASE, ...env },
    fetch: (request) => exports.default.fetch(request),
    sleep: async () => undefined,
  };
  return { cli, out: () => out.join(''), err: () => err.join('') };
}

describe('writ approvals and writ receipt against the Worker', () => {
  it('lists, approves and denies; replays an authorization receipt; never prints a key', async () => {
    const s = await seedTenant('cli');
    const ask = async () => {
      const r = await call('POST', '/v1/approval-requests', {
        key: s.agent.api_key,
        body: { tool_contract_sha256: s.rollback_contract_sha256, input: ROLLBACK_INPUT },
      });
      return r.body.approval_id as string;
    };
    const first = await ask();
    const second = await ask();
    const approver = { WRIT_APPROVER_KEY: s.approver.api_key };

    const list = io(approver);
    expect(await main(['approvals', 'list'], list.cli)).toBe(0);
    expect(list.out()).toContain(first);
    expect(list.out()).toContain('execute_rollback');

    const ok = io(approver);
    expect(await main(['approvals', 'approve', first, '--expires-in-ms', '600000'], ok.cli)).toBe(0);
    expect(ok.out()).toMatch(new RegExp(`^${first} approved until `));
    const again = io(approver);
    expect(await main(['approvals', 'approve', first], again.cli)).toBe(1);
    expect(again.err()).toMatch(/409 conflict/);

    const no = io(approver);
    expect(await main(['approvals', 'deny', second, '--reason', 'not now', '--json'], no.cli)).toBe(0);
    expect(JSON.parse(no.out())).toMatchObject({ approval_id: second, status: 'denied' });

    // The agent may not approve (its own request, and not an approver): refused, exit 1.
    const self = io({ WRIT_KEY: s.agent.api_key });
    expect(await main(['approvals', 'list'], self.cli)).toBe(1);
    expect(self.err()).toMatch(/403 forbidden_role/);

    const run = await call('POST', '/v1/runs', {
      key: s.agent.api_key,
      body: { max_calls: 2, max_external_writes: 1, max_duration_ms: 600_000 },
    });
    const auth = await call('POST', '/v1/authorize', {
      key: s.agent.api_key,
      body: {
        tool_contract_sha256: s.rollback_contract_sha256,
        input: ROLLBACK_INPUT,
        idempotency_key: 'cli-replay-0001',
        approval_id: first,
        run_id: run.body.run_id,
      },
    });
    expect(auth.status).toBe(200);
    const sha = auth.body.receipt.sha256 as string;
    const replay = io(approver);
    expect(await main(['receipt', 'replay', sha], replay.cli)).toBe(0);
    expect(replay.out()).toBe(
      `REPLAY OK authorization receipt ${sha} (authorized): recomputed from its evidence\n`,
    );
    const json = io(approver);
    expect(await main(['receipt', 'replay', sha, '--json'], json.cli)).toBe(0);
    expect(JSON.parse(json.out())).toEqual({
      sha256: sha,
      kind: 'authorization',
      outcome: 'authorized',
      replay: 'ok',
      differences: [],
    });
    const get = io(approver);
    expect(await main(['receipt', 'get', sha], get.cli)).toBe(0);
    expect(get.out()).toContain('"decision": "authorized"');
    const missing = io(approver);
    expect(await main(['receipt', 'get', 'f'.repeat(64)], missing.cli)).toBe(1);
    expect(missing.err()).toMatch(/404 not_found/);

    for (const t of [list, ok, again, no, self, replay, json, get, missing]) {
      for (const key of [s.approver.api_key, s.agent.api_key]) expect(t.out() + t.err()).not.toContain(key);
    }
  });
});

describe('writ lab tools --service against the Worker', () => {
  it('runs the baseline and every expressible mutation with the lab predicted class; contract drift is not expressible', async () => {
    const s = await seedTenant('lab');
    const t = io({ WRIT_ADMIN_KEY: s.admin.api_key });
    const code = await main(['lab', 'tools', '--service', BASE, '--json'], t.cli);
    const report = JSON.parse(t.out()) as HttpLabReport;
    expect(report.cases.filter((c) => c.status === 'failed')).toEqual([]);
    expect(code).toBe(0);
    expect(report.baseline).toEqual({
      authorization: 'authorized',
      execution: 'verified_succeeded',
      authorization_receipt_replay: 'ok',
    });
    expect(report.cases.map((c) => c.id)).toEqual(LAB_CASES.map((c) => c.id));
    expect(report.summary).toEqual({ cases: 10, passed: 9, failed: 0, not_expressible: 1 });
    expect(report.cases.find((c) => c.status === 'not_expressible')?.id).toBe('contract_drift');
    expect(t.err()).toContain('[10/10] indeterminate_execution');
    expect(t.out() + t.err()).not.toContain(s.admin.api_key);

    const table = io({ WRIT_ADMIN_KEY: s.admin.api_key });
    expect(await main(['lab', 'tools', '--service', BASE], table.cli)).toBe(0);
    expect(table.out()).toMatch(/n\/a\s+contract_drift\s+denied\s+not expressible over HTTP/);
    expect(table.out()).toContain('9 passed, 0 failed, 1 not expressible over HTTP (of 10)');
  });
});
