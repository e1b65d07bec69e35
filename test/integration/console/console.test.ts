/**
 * The approval console through the Worker's own `fetch`, as a browser would drive it: a cookie
 * jar, same-origin form posts, hidden fields read back from the rendered HTML. Covers sign-in,
 * review, approve then authorize with the resulting approval, deny, digests that changed after
 * render, self-approval, CSRF and origin checks, cookie flags, CSP, and hidden characters.
 */
import { describe, expect, it } from 'vitest';
import { parsePublicKeySet } from '../../../src/core/receipts/keys.js';
import { verifyBundle } from '../../../src/verify/bundle.js';
import { receiptLogVerifier } from '../../../src/verify/log.js';
import { DEMO_POLICY, PURGE_CONTRACT, type Seeded } from '../../../scripts/seed.js';
import {
  BASE,
  ROLLBACK_INPUT,
  authorize,
  authorizeBody,
  call,
  createRun,
  seedTenant,
  workerFetch,
} from '../platform/harness.js';

interface Page {
  readonly status: number;
  readonly text: string;
  readonly headers: Headers;
}

/** A minimal browser: a cookie jar, same-origin posts unless told otherwise, no redirects followed. */
class Browser {
  readonly jar = new Map<string, string>();

  /** The session cookie's value (`__Host-writ_console`), or null. */
  get cookie(): string | null {
    return this.jar.get('__Host-writ_console') ?? null;
  }

  set cookie(value: string | null) {
    if (value === null) this.jar.delete('__Host-writ_console');
    else this.jar.set('__Host-writ_console', value);
  }

  async request(path: string, init: RequestInit = {}): Promise<Page> {
    const headers = new Headers(init.headers);
    if (this.jar.size > 0) {
      headers.set('cookie', [...this.jar].map(([k, v]) => `${k}=${v}`).join('; '));
    }
    const res = await workerFetch(`${BASE}${path}`, { ...init, headers, redirect: 'manual' });
    for (const line of res.headers.getSetCookie()) {
      const m = /^([^=;]+)=([^;]*)/.exec(line);
      if (m === null) continue;
      const [, name, value] = m as unknown as [string, string, string];
      if (value.length > 0 && !/Max-Age=0/i.test(line)) this.jar.set(name, value);
      else this.jar.delete(name);
    }
    return { status: res.status, text: await res.text(), headers: res.headers };
  }

  get(path: string): Promise<Page> {
    return this.request(path);
  }

  post(path: string, fields: Record<string, string>, headers: Record<string, string> = {}): Promise<Page> {
    return this.request(path, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: BASE, ...headers },
      body: new URLSearchParams(fields).toString(),
    });
  }
}

function field(html: string, name: string): string {
  const m = new RegExp(`name="${name}" value="([^"]*)"`).exec(html);
  if (m === null) throw new Error(`no field ${name}`);
  return m[1] as string;
}

async function signIn(key: string): Promise<{ b: Browser; csrf: string }> {
  const b = new Browser();
  const form = await b.get('/console/sign-in');
  const r = await b.post('/console/sign-in', { csrf: field(form.text, 'csrf'), api_key: key });
  expect(r.status).toBe(303);
  expect(r.headers.get('location')).toBe('/console/pending');
  const pending = await b.get('/console/pending');
  return { b, csrf: field(pending.text, 'csrf') };
}

async function requestApproval(s: Seeded, input: unknown = ROLLBACK_INPUT, key = s.agent.api_key) {
  const r = await call('POST', '/v1/approval-requests', {
    key,
    body: { tool_contract_sha256: s.rollback_contract_sha256, input },
  });
  expect(r.status).toBe(201);
  return r.body.approval_id as string;
}

/** The approve form's fields as rendered on the request's page. */
async function approveFields(b: Browser, id: string): Promise<Record<string, string>> {
  const page = await b.get(`/console/approvals/${id}`);
  expect(page.status).toBe(200);
  const form = page.text.slice(page.text.indexOf(`action="/console/approvals/${id}/approve"`));
  return {
    csrf: field(form, 'csrf'),
    input_sha256: field(form, 'input_sha256'),
    tool_contract_sha256: field(form, 'tool_contract_sha256'),
    policy_sha256: field(form, 'policy_sha256'),
    expires_in_ms: '300000',
  };
}

async function status(s: Seeded, id: string): Promise<string> {
  return (await call('GET', `/v1/approval-requests/${id}`, { key: s.approver.api_key })).body.status;
}

describe('approval console', () => {
  it('signs in with an encrypted HttpOnly cookie and serves every page under a strict CSP', async () => {
    const s = await seedTenant('console');
    const b = new Browser();
    const form = await b.get('/console/sign-in');
    expect(form.status).toBe(200);
    const csp = form.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'none'");
    expect(csp).toContain("style-src 'self'");
    expect(csp).toContain("form-action 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(form.headers.get('cache-control')).toBe('no-store');
    // Under \`no-referrer\`, browsers send \`Origin: null\` on form posts and every form would fail.
    expect(form.headers.get('referrer-policy')).toBe('same-origin');
    expect(form.text).not.toMatch(/<script|\son[a-z]+=|\sstyle=/i);
    const r = await b.post('/console/sign-in', {
      csrf: field(form.text, 'csrf'),
      api_key: s.approver.api_key,
    });
    expect(r.status).toBe(303);
    const set = r.headers.getSetCookie().find((l) => l.startsWith('__Host-writ_console=')) ?? '';
    expect(set).toMatch(/^__Host-writ_console=[A-Za-z0-9_-]{40,}/);
    expect(set).toContain('HttpOnly');
    expect(set).toContain('Secure');
    expect(set).toContain('SameSite=Strict');
    expect(set).toContain('Path=/');
    expect(set).toContain('Max-Age=3600');
    expect(set).not.toContain('Domain');
    // The key is neither in the cookie nor in any page.
    expect(set).not.toContain(s.approver.api_key);
    expect(set).not.toContain(s.approver.api_key.slice(5));
    const pending = await b.get('/console/pending');
    expect(pending.status).toBe(200);
    expect(pending.text).toContain(s.approver.principal_id);
    expect(pending.text).not.toContain(s.approver.api_key);
    expect(pending.headers.get('content-security-policy')).toBe(csp);
    const css = await b.get('/console/style.css');
    expect(css.status).toBe(200);
    expect(css.headers.get('content-type')).toContain('text/css');
  });

  it('refuses a wrong key, an agent key, a tampered cookie and a revoked key', async () => {
    const s = await seedTenant('console');
    const b = new Browser();
    const form = await b.get('/console/sign-in');
    const bad = await b.post('/console/sign-in', {
      csrf: field(form.text, 'csrf'),
      api_key: `writ_${'A'.repeat(43)}`,
    });
    expect(bad.status).toBe(401);
    expect(bad.text).toContain('that API key is not valid');
    const agent = await b.post('/console/sign-in', {
      csrf: field(bad.text, 'csrf'),
      api_key: s.agent.api_key,
    });
    expect(agent.status).toBe(403);
    expect(agent.text).toContain('neither the approver nor the tenant_admin role');
    expect((await b.get('/console/pending')).status).toBe(303);

    const { b: ok } = await signIn(s.approver.api_key);
    const cookie = ok.cookie as string;
    // One flipped character of the ciphertext: the session does not open.
    ok.cookie = cookie.slice(0, -2) + (cookie.at(-2) === 'A' ? 'B' : 'A') + cookie.slice(-1);
    const tampered = await ok.get('/console/pending');
    expect(tampered.status).toBe(303);
    expect(tampered.headers.get('location')).toBe('/console/sign-in');

    const { b: later } = await signIn(s.approver.api_key);
    const revoke = await call('POST', `/v1/principals/${s.approver.principal_id}/revoke`, {
      key: s.admin.api_key,
    });
    expect(revoke.status).toBe(200);
    expect((await later.get('/console/pending')).status).toBe(303);
  });

  it('shows a pending request; approving it lets the agent authorize exactly that call, once', async () => {
    const s = await seedTenant('console');
    const id = await requestApproval(s);
    const { b } = await signIn(s.approver.api_key);
    const pending = await b.get('/console/pending');
    expect(pending.text).toContain(id);
    expect(pending.text).toContain('execute_rollback');
    expect(pending.text).toContain('execute_rollback 2026.01.0');
    expect(pending.text).toContain('external_write');
    expect(pending.text).toContain('Changes something in an outside system');
    expect(pending.text).toContain(s.agent.principal_id);
    expect(pending.text).toContain('matches');
    // Indented canonical JSON with highlighted keys, in RFC 8785 order.
    expect(pending.text).toContain(
      '<span class="k">&quot;environment&quot;</span>: <span class="s">&quot;production&quot;</span>',
    );
    expect(pending.text.indexOf('&quot;environment&quot;')).toBeLessThan(
      pending.text.indexOf('&quot;from_version&quot;'),
    );

    const fields = await approveFields(b, id);
    expect(fields.policy_sha256).toBe(s.policy_sha256);
    expect(fields.tool_contract_sha256).toBe(s.rollback_contract_sha256);
    const r = await b.post(`/console/approvals/${id}/approve`, fields);
    expect(r.status).toBe(303);
    expect(r.headers.get('location')).toBe(`/console/approvals/${id}?done=approved`);
    const shown = await b.get(`/console/approvals/${id}?done=approved`);
    expect(shown.text).toContain('Approved.');
    const view = await call('GET', `/v1/approval-requests/${id}`, { key: s.approver.api_key });
    expect(view.body.status).toBe('approved');
    expect(view.body.decided_by).toBe(s.approver.principal_id);
    expect(view.body.expires_at_unix_ms - view.body.decided_at_unix_ms).toBe(300_000);

    const run = await createRun(s);
    const z = await authorize(s, authorizeBody(s, run, { approval_id: id }));
    expect(z.status).toBe(200);
    expect(z.body.decision).toBe('authorized');
    const again = await authorize(s, authorizeBody(s, run, { approval_id: id }));
    expect(again.status).toBe(403);

    const history = await b.get('/console/history');
    expect(history.status).toBe(200);
    expect(history.text).toContain(id);
    const receipt = /href="\/console\/receipts\/([0-9a-f]{64})"/.exec(history.text);
    expect(receipt).not.toBeNull();
    const sha = (receipt as RegExpExecArray)[1] as string;
    const rp = await b.get(`/console/receipts/${sha}`);
    expect(rp.status).toBe(200);
    expect(rp.text).toContain('authorized');

    // The receipt page links its offline bundle (issue 11), which verifies with the published keys.
    expect(rp.text).toContain(`href="/console/receipts/${sha}/bundle"`);
    const dl = await b.get(`/console/receipts/${sha}/bundle`);
    expect(dl.status).toBe(200);
    expect(dl.headers.get('content-disposition')).toBe(`attachment; filename="writ-bundle-${sha}.json"`);
    const keys = parsePublicKeySet((await call('GET', '/.well-known/writ-keys')).body);
    if (!keys.ok) throw new Error(keys.error.message);
    const verdict = verifyBundle(JSON.parse(dl.text), {
      trustedKeys: keys.value,
      logVerifier: receiptLogVerifier,
    });
    expect(verdict).toMatchObject({ valid: true });
    // Signed out, the bundle is not served (the sign-in page instead).
    expect((await new Browser().get(`/console/receipts/${sha}/bundle`)).status).toBe(303);
  });

  it('denies with a reason; a missing reason is refused', async () => {
    const s = await seedTenant('console');
    const id = await requestApproval(s);
    const { b, csrf } = await signIn(s.approver.api_key);
    const empty = await b.post(`/console/approvals/${id}/deny`, { csrf, reason: '  ' });
    expect(empty.status).toBe(400);
    expect(await status(s, id)).toBe('pending');
    // A C1 control (CSI redraws a terminal that shows the reason) is refused here as the JSON
    // API's deny refuses it (`Label`): the same reason may not enter through another door.
    const c1 = await b.post(`/console/approvals/${id}/deny`, { csrf, reason: 'no \u009b2J thanks' });
    expect(c1.status).toBe(400);
    expect(await status(s, id)).toBe('pending');
    const api = await call('POST', `/v1/approval-requests/${id}/deny`, {
      key: s.approver.api_key,
      body: { reason: 'no \u009b2J thanks' },
    });
    expect(api.status).toBe(400);
    const r = await b.post(`/console/approvals/${id}/deny`, {
      csrf,
      reason: 'wrong window\r\nretry at 14:00',
    });
    expect(r.status).toBe(303);
    const view = await call('GET', `/v1/approval-requests/${id}`, { key: s.approver.api_key });
    expect(view.body).toMatchObject({ status: 'denied', decision_reason: 'wrong window retry at 14:00' });
    const history = await b.get('/console/history?status=denied');
    expect(history.text).toContain('wrong window retry at 14:00');
  });

  it('refuses an approval whose input, contract or policy differs from what was rendered', async () => {
    const s = await seedTenant('console');
    const id = await requestApproval(s);
    const { b } = await signIn(s.approver.api_key);
    const fields = await approveFields(b, id);
    const other = 'f'.repeat(64);

    const input = await b.post(`/console/approvals/${id}/approve`, { ...fields, input_sha256: other });
    expect(input.status).toBe(409);
    expect(input.text).toContain('the input changed after the request was shown');
    const contract = await b.post(`/console/approvals/${id}/approve`, {
      ...fields,
      tool_contract_sha256: other,
    });
    expect(contract.status).toBe(409);
    expect(contract.text).toContain('the tool contract changed after the request was shown');
    expect(await status(s, id)).toBe('pending');

    // The policy changes between render and submit.
    const put = await call('PUT', '/v1/policy', {
      key: s.admin.api_key,
      body: { ...DEMO_POLICY, approval_max_lifetime_ms: 10 * 60_000 },
    });
    expect(put.status).toBe(200);
    const policy = await b.post(`/console/approvals/${id}/approve`, fields);
    expect(policy.status).toBe(409);
    expect(policy.text).toContain('the policy changed after the request was shown');
    // The re-rendered page says the request can no longer be approved, and offers no form.
    expect(policy.text).toContain('can no longer be approved');
    expect(policy.text).not.toContain(`action="/console/approvals/${id}/approve"`);
    expect(await status(s, id)).toBe('pending');
  });

  it('an expiry beyond the policy maximum is refused', async () => {
    const s = await seedTenant('console');
    const id = await requestApproval(s);
    const { b } = await signIn(s.approver.api_key);
    const fields = await approveFields(b, id);
    const r = await b.post(`/console/approvals/${id}/approve`, { ...fields, expires_in_ms: '3600000' });
    expect(r.status).toBe(400);
    expect(r.text).toContain('approval lifetime exceeds the policy');
    expect(await status(s, id)).toBe('pending');
  });

  it('the requester cannot approve its own request; the page says so', async () => {
    const s = await seedTenant('console');
    const both = await call('POST', '/v1/principals', {
      key: s.admin.api_key,
      body: { name: 'both', roles: ['agent', 'approver'] },
    });
    const key = both.body.api_key as string;
    const id = await requestApproval(s, ROLLBACK_INPUT, key);
    const { b } = await signIn(key);
    const page = await b.get(`/console/approvals/${id}`);
    expect(page.text).toContain('You requested this call yourself');
    const r = await b.post(`/console/approvals/${id}/approve`, await approveFields(b, id));
    expect(r.status).toBe(403);
    expect(r.text).toContain('the requester cannot decide its own approval request');
    expect(await status(s, id)).toBe('pending');
  });

  it("refuses a form without the CSRF token, with another session's token, or from another origin", async () => {
    const s = await seedTenant('console');
    const id = await requestApproval(s);
    const { b } = await signIn(s.approver.api_key);
    const fields = await approveFields(b, id);
    const { csrf: _csrf, ...withoutToken } = fields;
    const missing = await b.post(`/console/approvals/${id}/approve`, withoutToken);
    expect(missing.status).toBe(403);
    expect(missing.text).toContain('security token is missing or does not match');
    const { csrf: otherToken } = await signIn(s.approver.api_key);
    expect((await b.post(`/console/approvals/${id}/approve`, { ...fields, csrf: otherToken })).status).toBe(
      403,
    );
    const cross = await b.post(`/console/approvals/${id}/approve`, fields, { origin: 'https://evil.test' });
    expect(cross.status).toBe(403);
    expect(cross.text).toContain('cross-origin');
    // No Origin and no Sec-Fetch-Site: not provably same-origin.
    const bare = await b.request(`/console/approvals/${id}/approve`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(fields).toString(),
    });
    expect(bare.status).toBe(403);
    // Sign-in itself needs the token of the session the form was served with.
    const fresh = new Browser();
    await fresh.get('/console/sign-in');
    expect((await fresh.post('/console/sign-in', { api_key: s.approver.api_key })).status).toBe(403);
    expect(await status(s, id)).toBe('pending');
    // Sign-out needs it too, then the session is gone.
    expect((await b.post('/console/sign-out', {})).status).toBe(403);
    expect((await b.post('/console/sign-out', { csrf: fields.csrf as string })).status).toBe(303);
    expect((await b.get('/console/pending')).status).toBe(303);
  });

  it('makes invisible and direction-changing characters visible and warns', async () => {
    const s = await seedTenant('console');
    const input = { ...ROLLBACK_INPUT, to_version: 'v41\u202e1v\u200b', note: 'a\u2066b\u{e0041}' };
    const id = await requestApproval(s, input);
    const { b } = await signIn(s.approver.api_key);
    const page = await b.get(`/console/approvals/${id}`);
    expect(page.text).toContain('⟨U+202E⟩');
    expect(page.text).toContain('⟨U+200B⟩');
    expect(page.text).toContain('⟨U+2066⟩');
    expect(page.text).toContain('⟨U+E0041⟩');
    expect(page.text).toContain('Warning: hidden characters.');
    expect(page.text).toMatch(/4\s+invisible or\s+direction-changing characters/);
    for (const ch of ['\u202e', '\u200b', '\u2066', '\u{e0041}']) expect(page.text).not.toContain(ch);
    const pending = await b.get('/console/pending');
    expect(pending.text).toContain('⟨U+202E⟩');
    // A clean request carries no warning.
    const clean = await requestApproval(s);
    expect((await b.get(`/console/approvals/${clean}`)).text).not.toContain('Warning: hidden characters.');
  });

  it('pages the pending queue and the history by cursor, through the approvals service', async () => {
    const s = await seedTenant('console');
    const ids: string[] = [];
    for (let i = 0; i < 12; i++)
      ids.push(await requestApproval(s, { ...ROLLBACK_INPUT, to_version: `v${i}` }));
    const { b } = await signIn(s.approver.api_key);
    const first = await b.get('/console/pending');
    expect((first.text.match(/Review and decide/g) ?? []).length).toBe(10);
    expect(first.text).not.toContain('rel="first"');
    const next = /href="(\/console\/pending\?cursor=[A-Za-z0-9_-]+)" rel="next"/.exec(first.text);
    expect(next).not.toBeNull();
    const second = await b.get((next as RegExpExecArray)[1] as string);
    expect(second.status).toBe(200);
    // Oldest first: the second page holds the last two, and is the last page.
    expect((second.text.match(/Review and decide/g) ?? []).length).toBe(2);
    for (const id of ids.slice(10)) expect(second.text).toContain(id);
    expect(second.text).not.toContain('rel="next"');
    expect(second.text).toContain('href="/console/pending" rel="first"');
    // A cursor is validated by the service: a forged or foreign one is a 400 page, not a list.
    expect((await b.get('/console/pending?cursor=bm90LWEtY3Vyc29y')).status).toBe(400);
    const history = /\?cursor=([A-Za-z0-9_-]+)/.exec((next as RegExpExecArray)[1] as string)?.[1] ?? '';
    expect((await b.get(`/console/history?status=denied&cursor=${history}`)).status).toBe(400);

    // History: one outcome per tab, each paged the same way.
    for (const id of ids.slice(0, 3)) {
      await call('POST', `/v1/approval-requests/${id}/deny`, {
        key: s.approver.api_key,
        body: { reason: 'no' },
      });
    }
    const denied = await b.get('/console/history?status=denied');
    expect(denied.status).toBe(200);
    for (const id of ids.slice(0, 3)) expect(denied.text).toContain(id);
    expect(denied.text).toContain('href="/console/history?status=denied" aria-current="page"');
    expect((await b.get('/console/history?status=consumed')).text).toContain('None.');
  });

  it('an irreversible request needs a second, distinct approver on the page too', async () => {
    const s = await seedTenant('console');
    const pinned = await call('POST', '/v1/contracts', { key: s.admin.api_key, body: PURGE_CONTRACT });
    const r = await call('POST', '/v1/approval-requests', {
      key: s.agent.api_key,
      body: { tool_contract_sha256: pinned.body.tool_contract_sha256, input: ROLLBACK_INPUT },
    });
    const id = r.body.approval_id as string;
    const first = await signIn(s.approver.api_key);
    const before = await first.b.get(`/console/approvals/${id}`);
    expect(before.text).toContain('Give the first of two approvals');
    expect(before.text).toContain('none has approved yet');
    const ok = await first.b.post(`/console/approvals/${id}/approve`, await approveFields(first.b, id));
    expect(ok.status).toBe(303);
    expect(await status(s, id)).toBe('pending');
    const after = await first.b.get(`/console/approvals/${id}`);
    expect(after.text).toContain(
      'You gave the first approval: a second, distinct approver must complete it.',
    );
    expect(after.text).not.toContain(`action="/console/approvals/${id}/approve"`);
    // Posting the form again anyway (a stale tab) is refused by the service, and the page says why.
    const again = await first.b.post(`/console/approvals/${id}/approve`, {
      csrf: first.csrf,
      input_sha256: r.body.input_sha256,
      tool_contract_sha256: pinned.body.tool_contract_sha256,
      policy_sha256: s.policy_sha256,
      expires_in_ms: '300000',
    });
    expect(again.status).toBe(403);
    expect(again.text).toContain('second, distinct approver');

    const p2 = await call('POST', '/v1/principals', {
      key: s.admin.api_key,
      body: { name: 'second', roles: ['approver'] },
    });
    const second = await signIn(p2.body.api_key);
    const page = await second.b.get(`/console/approvals/${id}`);
    expect(page.text).toContain('Give the second approval');
    expect(page.text).toContain(s.approver.principal_id);
    const done = await second.b.post(`/console/approvals/${id}/approve`, await approveFields(second.b, id));
    expect(done.status).toBe(303);
    expect(await status(s, id)).toBe('approved');
    const history = await second.b.get('/console/history?status=approved');
    expect(history.text).toContain(`${s.approver.principal_id}</span> then`);
  });

  it('a read-only call cannot be put in the approval queue', async () => {
    const s = await seedTenant('console');
    const r = await call('POST', '/v1/approval-requests', {
      key: s.agent.api_key,
      body: {
        tool_contract_sha256: s.read_contract_sha256,
        input: { service: 'api', environment: 'production' },
      },
    });
    expect(r.status).toBe(409);
    expect(r.body.error.message).toBe('effect "read_only" does not need approval under the policy in force');
  });
});
