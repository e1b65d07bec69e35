/**
 * `npm run test:browser`: the approval console in a real browser (Debian's Chromium driven by
 * playwright-core) against `wrangler dev`, keyboard only. Not part of `npm test`: it needs
 * Chromium at /usr/bin/chromium (`apt-get install -y chromium`), which CI does not install.
 *
 * Signs in by typing the approver key and pressing Enter, checks the pending page (hidden
 * characters flagged, no horizontal scrolling at 200 % zoom), approves a request with the
 * keyboard, authorizes the call with the resulting approval as the agent, denies another, and
 * checks that the browser stored the session cookie HttpOnly, Secure, SameSite=Strict and that no
 * page ran into a CSP violation. Screenshots go to docs/screenshots/.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
// Page expressions are passed as strings: this script is typed for Node, without the DOM library.
import { chromium } from 'playwright-core';
import { ensureDevVars, startLocalWorker } from './dev.js';
import { seedDemo } from './seed.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SHOTS = path.join(ROOT, 'docs', 'screenshots');
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

async function main(): Promise<void> {
  const adminToken = ensureDevVars();
  const port = await freePort();
  const state = mkdtempSync(path.join(os.tmpdir(), 'writ-console-browser-'));
  mkdirSync(SHOTS, { recursive: true });
  const worker = await startLocalWorker({ port, persistTo: state, inheritOutput: false, logLevel: 'error' });
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  });
  try {
    const base = worker.baseUrl;
    const s = await seedDemo({ baseUrl: base, adminToken, fetch, now: Date.now(), name: 'browser' });
    const agent = { authorization: `Bearer ${s.agent.api_key}`, 'content-type': 'application/json' };
    const file = async (input: unknown) => {
      const r = await fetch(`${base}/v1/approval-requests`, {
        method: 'POST',
        headers: agent,
        body: JSON.stringify({ tool_contract_sha256: s.rollback_contract_sha256, input }),
      });
      assert.equal(r.status, 201);
      return ((await r.json()) as { approval_id: string }).approval_id;
    };
    const input = { service: 'api', environment: 'production', from_version: 'v42', to_version: 'v41' };
    const good = await file(input);
    const tricky = await file({ ...input, to_version: 'v41\u202e14v', note: 'ok\u200b' });

    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const violations: string[] = [];
    page.on('console', (m) => {
      if (/Content Security Policy|Refused to/i.test(m.text())) violations.push(m.text());
    });

    // Sign in with the keyboard only.
    await page.goto(`${base}/console`);
    assert.match(page.url(), /\/console\/sign-in$/);
    await page.keyboard.press('Tab');
    await page.keyboard.press('Tab');
    await page.keyboard.press('Tab');
    const focused = await page.evaluate<string | null>(
      "document.activeElement?.getAttribute('name') ?? null",
    );
    if (focused !== 'api_key') await page.focus('#api_key');
    await page.screenshot({ path: path.join(SHOTS, 'console-sign-in.png') });
    await page.keyboard.type(s.approver.api_key);
    await Promise.all([page.waitForURL(/\/console\/pending$/), page.keyboard.press('Enter')]);

    const cookies = await context.cookies();
    const session = cookies.find((c) => c.name === '__Host-writ_console');
    assert.ok(session, 'the session cookie is stored');
    assert.equal(session.httpOnly, true);
    assert.equal(session.secure, true);
    assert.equal(session.sameSite, 'Strict');
    assert.ok(!session.value.includes(s.approver.api_key.slice(5)));
    assert.equal(await page.evaluate<string>('document.cookie'), '', 'no script can read the cookie');

    const pending = await page.content();
    assert.ok(pending.includes(good) && pending.includes(tricky));
    assert.ok(pending.includes('⟨U+202E⟩'));
    await page.screenshot({ path: path.join(SHOTS, 'console-pending.png'), fullPage: true });

    // 200 % zoom of a 1280 px window: a 640 px wide layout must not scroll sideways.
    const zoomed = await browser.newContext({
      viewport: { width: 640, height: 900 },
      deviceScaleFactor: 2,
      storageState: await context.storageState(),
    });
    const zp = await zoomed.newPage();
    await zp.goto(`${base}/console/approvals/${tricky}`);
    const overflow = await zp.evaluate<number>(
      'document.documentElement.scrollWidth - document.documentElement.clientWidth',
    );
    assert.ok(overflow <= 0, `no horizontal scrolling at 200 % (overflow ${overflow}px)`);
    await zp.screenshot({ path: path.join(SHOTS, 'console-hidden-characters-200pct.png'), fullPage: true });
    await zoomed.close();

    // Approve with the keyboard: focus the lifetime select, choose 5 min, submit with Enter.
    await page.goto(`${base}/console/approvals/${good}`);
    await page.screenshot({ path: path.join(SHOTS, 'console-review.png'), fullPage: true });
    await page.focus('#expires_in_ms');
    await page.selectOption('#expires_in_ms', String(5 * 60_000));
    await page.keyboard.press('Tab');
    await Promise.all([page.waitForURL(/done=approved$/), page.keyboard.press('Enter')]);
    assert.ok((await page.content()).includes('Approved.'));

    // The agent authorizes exactly that call with the approval.
    const run = (await (
      await fetch(`${base}/v1/runs`, {
        method: 'POST',
        headers: agent,
        body: JSON.stringify({ max_calls: 5, max_external_writes: 5, max_duration_ms: 600_000 }),
      })
    ).json()) as { run_id: string };
    const z = await fetch(`${base}/v1/authorize`, {
      method: 'POST',
      headers: agent,
      body: JSON.stringify({
        tool_contract_sha256: s.rollback_contract_sha256,
        input,
        idempotency_key: 'browser-rollback-0001',
        run_id: run.run_id,
        approval_id: good,
      }),
    });
    assert.equal(z.status, 200, await z.clone().text());

    // Deny the other one with a reason.
    await page.goto(`${base}/console/approvals/${tricky}`);
    await page.fill('#reason', 'the version string hides a right-to-left override');
    await Promise.all([page.waitForURL(/done=denied$/), page.click('button.danger')]);

    await page.goto(`${base}/console/history`);
    const history = await page.content();
    assert.ok(history.includes('consumed') && history.includes('denied'));
    await page.screenshot({ path: path.join(SHOTS, 'console-history.png'), fullPage: true });

    assert.deepEqual(violations, [], 'no CSP violation on any page');
    console.log(`browser test passed; screenshots in ${path.relative(ROOT, SHOTS)}/`);
  } finally {
    await browser.close();
    await worker.stop();
    rmSync(state, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? (e.stack ?? e.message) : e);
  process.exit(1);
});
