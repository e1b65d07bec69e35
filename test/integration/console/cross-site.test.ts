/**
 * A link to the console from another site (an email, a chat message) arrives without the session
 * cookie: it is SameSite=Strict, so the browser holds it back on a cross-site navigation, but a
 * response to that navigation may still set cookies. The console must not answer it as signed
 * out (a signed-out cookie written over the session, or the session deleted): it answers a page
 * whose link, followed from the console's own origin, brings the cookie. Only a cookie that was
 * sent is ever cleared.
 */
import { describe, expect, it } from 'vitest';
import { BASE, seedTenant, workerFetch } from '../platform/harness.js';

const COOKIE = '__Host-writ_console';
const SIGN_IN_COOKIE = '__Host-writ_console_signin';

async function get(path: string, headers: Record<string, string> = {}) {
  const res = await workerFetch(`${BASE}${path}`, { headers, redirect: 'manual' });
  return { status: res.status, text: await res.text(), headers: res.headers };
}

const csrfOf = (html: string) => /name="csrf" value="([^"]*)"/.exec(html)?.[1] as string;

/** The sign-in form posted from the console's origin with `signIn` as its sign-in cookie. */
function postSignIn(signIn: string, csrf: string, api_key: string): Promise<Response> {
  return workerFetch(`${BASE}/console/sign-in`, {
    method: 'POST',
    redirect: 'manual',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      origin: BASE,
      cookie: `${SIGN_IN_COOKIE}=${signIn}`,
    },
    body: new URLSearchParams({ csrf, api_key }).toString(),
  });
}

/** A signed-in session cookie of the seeded approver. */
async function signedInCookie(): Promise<string> {
  const s = await seedTenant('cross-site');
  const form = await get('/console/sign-in');
  const anon = /__Host-writ_console_signin=([^;]*)/.exec(form.headers.get('set-cookie') ?? '')?.[1] as string;
  const res = await postSignIn(anon, csrfOf(form.text), s.approver.api_key);
  await res.arrayBuffer();
  expect(res.status).toBe(303);
  return /__Host-writ_console=([^;]*)/.exec(res.headers.get('set-cookie') ?? '')?.[1] as string;
}

describe('a console link followed from another site', () => {
  it('answers a same-origin link to the same address, and writes no cookie', async () => {
    for (const path of [
      '/console/pending',
      '/console/sign-in',
      '/console',
      '/console/history?status=approved&limit=5',
    ]) {
      const r = await get(path, { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'navigate' });
      expect(r.status, path).toBe(200);
      expect(r.headers.get('set-cookie'), path).toBeNull();
      expect(r.text).toContain(`href="${path.replace('&', '&amp;')}"`);
      expect(r.headers.get('content-security-policy')).toContain("script-src 'none'");
      expect(r.headers.get('cache-control')).toBe('no-store');
    }
  });

  it('the session survives it: the same page opened from the console is signed in', async () => {
    const cookie = await signedInCookie();
    const cross = await get('/console/pending', { 'sec-fetch-site': 'cross-site' });
    expect(cross.headers.get('set-cookie')).toBeNull();
    const same = await get('/console/pending', {
      'sec-fetch-site': 'same-origin',
      cookie: `${COOKIE}=${cookie}`,
    });
    expect(same.status).toBe(200);
    expect(same.text).toContain('Pending');
  });

  it('a request without the cookie is sent to sign in without clearing one it did not send', async () => {
    const r = await get('/console/pending');
    expect(r.status).toBe(303);
    expect(r.headers.get('location')).toBe('/console/sign-in');
    expect(r.headers.get('set-cookie')).toBeNull();
  });

  it('without Sec-Fetch-Site (an older browser) the redirect to sign-in still writes nothing over the session', async () => {
    const cookie = await signedInCookie();
    // The cross-site navigation, the session cookie held back, no Sec-Fetch-Site: answered as
    // signed out, and sent on to sign in.
    const page = await get('/console/pending');
    expect(page.status).toBe(303);
    expect(page.headers.get('set-cookie')).toBeNull();
    const form = await get(page.headers.get('location') as string);
    expect(form.status).toBe(200);
    // The sign-in form's token has a cookie of its own: the session cookie is not written.
    const set = form.headers.getSetCookie();
    expect(set.some((l) => l.startsWith(`${SIGN_IN_COOKIE}=`))).toBe(true);
    expect(set.filter((l) => l.startsWith(`${COOKIE}=`))).toEqual([]);
    // Back on the console's own pages, the browser sends the session it kept: still signed in.
    const same = await get('/console/pending', { cookie: `${COOKIE}=${cookie}` });
    expect(same.status).toBe(200);
    expect(same.text).toContain('Pending');
  });

  it('the sign-in cookie never opens as a session, nor a session as the sign-in form', async () => {
    const form = await get('/console/sign-in');
    const anon = /__Host-writ_console_signin=([^;]*)/.exec(
      form.headers.get('set-cookie') ?? '',
    )?.[1] as string;
    expect(anon.length).toBeGreaterThan(40);
    // As the session cookie: it does not open (cleared, sent to sign in).
    const asSession = await get('/console/pending', { cookie: `${COOKIE}=${anon}` });
    expect(asSession.status).toBe(303);
    expect(asSession.headers.get('set-cookie')).toMatch(/__Host-writ_console=;.*Max-Age=0/i);
    // A signed-in session's ciphertext as the sign-in cookie: the form's token does not match.
    const session = await signedInCookie();
    const res = await postSignIn(session, csrfOf(form.text), `writ_${'A'.repeat(43)}`);
    expect(await res.text()).toContain('security token');
    expect(res.status).toBe(403);
  });

  it('a cookie that was sent and does not open is cleared', async () => {
    const r = await get('/console/pending', { cookie: `${COOKIE}=not-a-session` });
    expect(r.status).toBe(303);
    expect(r.headers.get('set-cookie')).toMatch(/__Host-writ_console=;.*Max-Age=0/i);
  });

  it('the stylesheet is served to any fetch', async () => {
    const r = await get('/console/style.css', { 'sec-fetch-site': 'cross-site' });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/css/);
  });
});
