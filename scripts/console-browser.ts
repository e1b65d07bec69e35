/**
 * `npm run test:browser` (the last step of `npm test`): the approval console in a real browser
 * (Debian's Chromium, driven by playwright-core) against `wrangler dev` on a free port.
 *
 * Covers: sign in by keyboard (cookie HttpOnly, Secure, SameSite=Strict, unreadable by script);
 * the pending queue, paged by keyboard through its cursor links; hidden characters flagged, no
 * horizontal scrolling at 200 % zoom; approve by keyboard, then the agent authorizes the call with
 * the resulting approval; deny with a reason; an approval whose rendered input no longer matches
 * the request, and one whose policy changed after render (refused, the page says why);
 * self-approval refused; a form without its CSRF token refused; an irreversible request approved
 * by two distinct approvers (the first approver cannot complete it) and then authorized; the
 * history showing the approved call executed and verified, with its receipt (reached by Tab) and
 * offline bundle; the tenant admin's Security page, reached by keyboard, at 200 % zoom; and no
 * page hits a CSP violation.
 *
 * Never depends on timing: every step waits for a condition (a URL, a response, a selector) under
 * generous bounds. wrangler dev runs in its own process group, stopped on every exit path
 * (success, failure, SIGINT, SIGTERM). Without Chromium it fails with the install command; set
 * `WRIT_SKIP_BROWSER_TEST=1` to skip it on purpose (never under CI). `--update-screenshots` writes
 * the screenshots to docs/screenshots/ (otherwise to a temporary directory, so `npm test` leaves
 * the tree unchanged). `CHROMIUM_PATH` overrides /usr/bin/chromium.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
// Page expressions are passed as strings: this script is typed for Node, without the DOM library.
import { type Browser, type BrowserContext, type Page, chromium } from 'playwright-core';
import { type LocalWorker, ensureDevVars, freePort, startLocalWorker } from './dev.js';
import { digestOf, sha256HexOfText } from '../src/core/canonical/canonical.js';
import { DEMO_EXECUTOR_RELEASE, DEMO_POLICY, PURGE_CONTRACT, seedDemo } from './seed.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const UPDATE_SCREENSHOTS = process.argv.includes('--update-screenshots');
/** Generous bounds for a loaded 2-core machine: conditions are awaited, never slept on. */
const STEP_TIMEOUT_MS = 120_000;
const READY_TIMEOUT_MS = 240_000;
const SESSION_COOKIE = '__Host-writ_console';

/** The parts of an authorization receipt the executor's observation is built from. */
interface AuthorizationReceiptJson {
  readonly sha256: string;
  readonly body: {
    readonly evaluated_at_unix_ms: number;
    readonly invocation_sha256: string;
    readonly idempotency_key: string | null;
  };
}

/** Everything started here, stopped once on any exit path. */
const resources: {
  /** Set before wrangler is spawned: a signal during start-up still stops what it starts. */
  worker: Promise<LocalWorker> | null;
  browser: Browser | null;
  state: string | null;
} = { worker: null, browser: null, state: null };
let cleaning: Promise<void> | null = null;
function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    await resources.browser?.close().catch(() => undefined);
    const worker = await resources.worker?.catch(() => null);
    await worker?.stop().catch(() => undefined);
    if (resources.state !== null) rmSync(resources.state, { recursive: true, force: true });
  })();
  return cleaning;
}
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.once(signal, () => {
    console.error(`browser test: ${signal}, stopping wrangler dev and Chromium`);
    void cleanup().then(() => process.exit(130));
  });
}

/** A port another process may take between probe and bind: retry with a fresh one. */
async function startWorker(state: string): Promise<LocalWorker> {
  let last: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      return await startLocalWorker({
        port: await freePort(),
        persistTo: state,
        inheritOutput: false,
        logLevel: 'error',
        ownProcessGroup: true,
        readyTimeoutMs: READY_TIMEOUT_MS,
      });
    } catch (e) {
      last = e;
    }
  }
  throw last;
}

function chromiumMissing(): boolean {
  if (existsSync(CHROMIUM)) return false;
  const how =
    `Chromium not found at ${CHROMIUM}. Install it (Debian: \`apt-get install -y chromium\`; ` +
    '`.ci/run` does this) or point CHROMIUM_PATH at it.';
  if (process.env.WRIT_SKIP_BROWSER_TEST === '1' && process.env.CI === undefined) {
    console.warn(`SKIPPED the browser test (WRIT_SKIP_BROWSER_TEST=1): ${how}`);
    return true;
  }
  throw new Error(`browser test cannot run: ${how}`);
}

async function main(): Promise<void> {
  if (chromiumMissing()) return;
  const shots = UPDATE_SCREENSHOTS
    ? path.join(ROOT, 'docs', 'screenshots')
    : mkdtempSync(path.join(os.tmpdir(), 'writ-console-shots-'));
  mkdirSync(shots, { recursive: true });
  const shot = (p: Page, name: string) => p.screenshot({ path: path.join(shots, name), fullPage: true });
  const adminToken = ensureDevVars();
  resources.state = mkdtempSync(path.join(os.tmpdir(), 'writ-console-browser-'));
  resources.worker = startWorker(resources.state);
  const worker = await resources.worker;
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    timeout: STEP_TIMEOUT_MS,
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
  resources.browser = browser;

  const base = worker.baseUrl;
  const s = await seedDemo({ baseUrl: base, adminToken, fetch, now: Date.now(), name: 'browser' });
  const api = async (method: string, route: string, key: string, body?: unknown) => {
    const r = await fetch(`${base}${route}`, {
      method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await r.text();
    return { status: r.status, body: text === '' ? null : (JSON.parse(text) as Record<string, unknown>) };
  };
  const must = async (p: Promise<{ status: number; body: Record<string, unknown> | null }>, want: number) => {
    const r = await p;
    assert.equal(r.status, want, JSON.stringify(r.body));
    return r.body as Record<string, unknown>;
  };
  const file = async (input: unknown, contract = s.rollback_contract_sha256, key = s.agent.api_key) =>
    (await must(api('POST', '/v1/approval-requests', key, { tool_contract_sha256: contract, input }), 201))
      .approval_id as string;
  const approvalStatus = async (id: string) =>
    (await must(api('GET', `/v1/approval-requests/${id}`, s.approver.api_key), 200)).status;
  const authorizeWith = async (approval_id: string, input: unknown, contract: string, grant_id?: string) => {
    const run = await must(
      api('POST', '/v1/runs', s.agent.api_key, {
        max_calls: 5,
        max_external_writes: 5,
        max_duration_ms: 600_000,
      }),
      201,
    );
    return api('POST', '/v1/authorize', s.agent.api_key, {
      tool_contract_sha256: contract,
      input,
      idempotency_key: `browser-${approval_id}`,
      run_id: run.run_id,
      approval_id,
      ...(grant_id === undefined ? {} : { grant_id }),
    });
  };

  /** Claim the authorized rollback as the executor and report a verified success; its receipt's digest. */
  const executeRollback = async (authorized: { receipt: AuthorizationReceiptJson }) => {
    const receipt = authorized.receipt;
    const claimed = await must(
      api('POST', '/v1/executions/claim', s.executor.api_key, {
        authorization_receipt_sha256: receipt.sha256,
      }),
      200,
    );
    const output = '{"generation":8,"status":"rolled_back"}';
    const started = receipt.body.evaluated_at_unix_ms;
    const reported = await must(
      api('POST', '/v1/executions/report', s.executor.api_key, {
        operation_id: claimed.operation_id,
        fencing_token: claimed.fencing_token,
        observation: {
          observation_id: `obs-browser-${receipt.sha256.slice(0, 12)}`,
          authorization_receipt_sha256: receipt.sha256,
          invocation_sha256: receipt.body.invocation_sha256,
          executor_release: DEMO_EXECUTOR_RELEASE,
          outcome: 'succeeded',
          started_at_unix_ms: started,
          completed_at_unix_ms: started + 5,
          output_sha256: sha256HexOfText(output),
          output_bytes: new TextEncoder().encode(output).byteLength,
          effect_id: 'rollout-7781',
          before_state_sha256: digestOf({ deployment: 'api/production', version: 'v42' }),
          after_state_sha256: digestOf({ deployment: 'api/production', version: 'v41' }),
          idempotency_key: receipt.body.idempotency_key,
        },
      }),
      200,
    );
    assert.equal(reported.status, 'verified_succeeded', JSON.stringify(reported));
    return (reported.execution_receipt as { sha256: string }).sha256;
  };

  // The irreversible tool, the agent's grant of it, a second approver, and a principal that is
  // both agent and approver (for self-approval).
  const purge = (await must(api('POST', '/v1/contracts', s.admin.api_key, PURGE_CONTRACT), 201))
    .tool_contract_sha256 as string;
  const scope = [{ type: 'deployment', attributes: { environment: ['production'], service: ['api'] } }];
  const purgeGrant = (
    await must(
      api('POST', '/v1/grants', s.admin.api_key, {
        principal_id: s.agent.principal_id,
        allowed_tools: ['purge_deployment'],
        allowed_effects: ['irreversible'],
        capabilities: [
          { capability: 'deployment:read', resources: scope },
          { capability: 'deployment:rollback', resources: scope },
        ],
        expires_at_unix_ms: Date.now() + 3_600_000,
      }),
      201,
    )
  ).grant_id as string;
  const second = await must(
    api('POST', '/v1/principals', s.admin.api_key, { name: 'second-approver', roles: ['approver'] }),
    201,
  );
  const both = await must(
    api('POST', '/v1/principals', s.admin.api_key, {
      name: 'agent-and-approver',
      roles: ['agent', 'approver'],
    }),
    201,
  );

  const input = { service: 'api', environment: 'production', from_version: 'v42', to_version: 'v41' };
  const good = await file(input);
  const tricky = await file({ ...input, to_version: 'v41\u202e14v', note: 'ok\u200b' });
  const stale = await file({ ...input, to_version: 'v40' });
  const noCsrf = await file({ ...input, to_version: 'v39' });
  const drift = await file({ ...input, to_version: 'v38' });
  const irreversible = await file(input, purge);
  const own = await file({ ...input, to_version: 'v37' }, s.rollback_contract_sha256, both.api_key as string);
  // Enough to fill the first pending page (10) and need a second.
  for (let i = 0; i < 6; i++) await file({ ...input, to_version: `v2${i}` });

  const violations: string[] = [];
  const newPage = async (context: BrowserContext): Promise<Page> => {
    const page = await context.newPage();
    page.setDefaultTimeout(STEP_TIMEOUT_MS);
    page.setDefaultNavigationTimeout(STEP_TIMEOUT_MS);
    page.on('console', (m) => {
      if (/Content Security Policy|Refused to/i.test(m.text())) violations.push(m.text());
    });
    return page;
  };
  const signIn = async (key: string, name: string): Promise<{ context: BrowserContext; page: Page }> => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await newPage(context);
    await page.goto(`${base}/console`);
    await page.waitForURL(/\/console\/sign-in$/);
    // Keyboard only: Tab to the key field, type, Enter.
    for (let i = 0; i < 20 && (await activeName(page)) !== 'api_key'; i++) await page.keyboard.press('Tab');
    assert.equal(await activeName(page), 'api_key', `${name}: the key field is reachable by Tab`);
    if (name === 'approver') await shot(page, 'console-sign-in.png');
    await page.keyboard.type(key);
    await Promise.all([page.waitForURL(/\/console\/pending$/), page.keyboard.press('Enter')]);
    return { context, page };
  };
  /** Submit the form whose submit button matches `button`, and wait for the answer's page. */
  const submit = async (page: Page, button: string) => {
    const [response] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === 'POST'),
      page.click(button),
    ]);
    await page.waitForLoadState('domcontentloaded');
    return response;
  };

  // -- Sign in, cookie flags ------------------------------------------------------------------
  const { context, page } = await signIn(s.approver.api_key, 'approver');
  const session = (await context.cookies()).find((c) => c.name === SESSION_COOKIE);
  assert.ok(session, 'the session cookie is stored');
  assert.equal(session.httpOnly, true);
  assert.equal(session.secure, true);
  assert.equal(session.sameSite, 'Strict');
  assert.ok(
    !session.value.includes(s.approver.api_key.slice(5)),
    'the cookie does not carry the key in clear',
  );
  assert.equal(await page.evaluate<string>('document.cookie'), '', 'no script can read the cookie');

  // -- A console link followed from another site keeps the session ----------------------------
  // The SameSite=Strict cookie is held back on a cross-site navigation: the console answers a
  // page whose link, followed from its own origin, brings it, and the session is not replaced.
  const elsewhere = await newPage(context);
  await elsewhere.goto(`data:text/html,<a id="open" href="${base}/console/approvals/${good}">review</a>`);
  const target = `${base}/console/approvals/${good}`;
  const [crossSite] = await Promise.all([
    elsewhere.waitForResponse((r) => r.url() === target),
    elsewhere.click('#open'),
  ]);
  assert.equal((await crossSite.request().allHeaders())['sec-fetch-site'], 'cross-site');
  await elsewhere.waitForLoadState('domcontentloaded');
  assert.ok((await elsewhere.content()).includes('Continue to the approval console'), 'the continue page');
  const [followed] = await Promise.all([
    elsewhere.waitForResponse((r) => r.url() === target),
    elsewhere.click('main a:has-text("Continue")'),
  ]);
  assert.equal(followed.status(), 200);
  await elsewhere.waitForLoadState('domcontentloaded');
  assert.ok((await elsewhere.content()).includes(good), 'the request, signed in, after one click');
  const kept = (await context.cookies()).find((c) => c.name === SESSION_COOKIE);
  assert.equal(kept?.value, session.value, 'the session cookie was not replaced');
  await elsewhere.close();

  // -- Pending queue, paged by keyboard -------------------------------------------------------
  const pending = await page.content();
  assert.ok(pending.includes(good) && pending.includes(tricky), 'the oldest requests are on page 1');
  assert.ok(pending.includes('⟨U+202E⟩'), 'hidden characters are made visible');
  await shot(page, 'console-pending.png');
  for (let i = 0; i < 400 && (await activeRel(page)) !== 'next'; i++) await page.keyboard.press('Tab');
  assert.equal(await activeRel(page), 'next', 'the next-page link is reachable by Tab');
  await Promise.all([page.waitForURL(/\/console\/pending\?cursor=/), page.keyboard.press('Enter')]);
  const page2 = await page.content();
  assert.ok(!page2.includes(good) && page2.includes('rel="first"'), 'page 2 continues after page 1');

  // -- 200 % zoom: a 640 px wide layout must not scroll sideways ------------------------------
  const zoomed = await browser.newContext({
    viewport: { width: 640, height: 900 },
    deviceScaleFactor: 2,
    storageState: await context.storageState(),
  });
  const zp = await newPage(zoomed);
  await zp.goto(`${base}/console/approvals/${tricky}`);
  const overflow = await zp.evaluate<number>(
    'document.documentElement.scrollWidth - document.documentElement.clientWidth',
  );
  assert.ok(overflow <= 0, `no horizontal scrolling at 200 % (overflow ${overflow}px)`);
  await shot(zp, 'console-hidden-characters-200pct.png');
  await zoomed.close();

  // -- Approve by keyboard; the agent authorizes exactly that call ----------------------------
  await page.goto(`${base}/console/approvals/${good}`);
  await shot(page, 'console-review.png');
  await page.focus('#expires_in_ms');
  await page.selectOption('#expires_in_ms', String(5 * 60_000));
  await page.keyboard.press('Tab');
  await Promise.all([page.waitForURL(/done=approved$/), page.keyboard.press('Enter')]);
  assert.ok((await page.content()).includes('Approved.'));
  const z = await authorizeWith(good, input, s.rollback_contract_sha256);
  assert.equal(z.status, 200, JSON.stringify(z.body));
  // The executor claims the call and reports a verified success (what the history shows next).
  const executed = await executeRollback(z.body as { receipt: AuthorizationReceiptJson });

  // -- Deny with a reason ---------------------------------------------------------------------
  await page.goto(`${base}/console/approvals/${tricky}`);
  await page.fill('#reason', 'the version string hides a right-to-left override');
  await Promise.all([page.waitForURL(/done=denied$/), page.click('button.danger')]);
  assert.equal(await approvalStatus(tricky), 'denied');

  // -- The rendered input no longer matches the request: refused, the page says why -----------
  await page.goto(`${base}/console/approvals/${stale}`);
  // What a page rendered for another input would carry (set through DevTools: the page runs no script).
  await page.evaluate(`document.querySelector('input[name=input_sha256]').value = '${'f'.repeat(64)}'`);
  const changed = await submit(page, 'button.primary');
  assert.equal(changed.status(), 409);
  assert.ok(
    (await page.content()).includes('the input changed after the request was shown; review it again'),
    'the page says the input changed',
  );
  await shot(page, 'console-refused.png');
  assert.equal(await approvalStatus(stale), 'pending');

  // -- A form without its CSRF token is refused ----------------------------------------------
  await page.goto(`${base}/console/approvals/${noCsrf}`);
  await page.evaluate(`document.querySelectorAll('input[name=csrf]').forEach((e) => e.remove())`);
  const csrf = await submit(page, 'button.primary');
  assert.equal(csrf.status(), 403);
  assert.ok((await page.content()).includes("the form's security token is missing"), 'the page says why');
  assert.equal(await approvalStatus(noCsrf), 'pending');

  // -- Self-approval is refused ----------------------------------------------------------------
  const self = await signIn(both.api_key as string, 'agent-and-approver');
  await self.page.goto(`${base}/console/approvals/${own}`);
  assert.ok((await self.page.content()).includes('You requested this call yourself'));
  const selfReply = await submit(self.page, 'button.primary');
  assert.equal(selfReply.status(), 403);
  assert.ok((await self.page.content()).includes('the requester cannot decide its own approval request'));
  assert.equal(await approvalStatus(own), 'pending');
  await self.context.close();

  // -- Irreversible: two distinct approvers ---------------------------------------------------
  await page.goto(`${base}/console/approvals/${irreversible}`);
  assert.ok((await page.content()).includes('Give the first of two approvals'));
  await Promise.all([page.waitForURL(/done=approved$/), page.click('button.primary')]);
  const afterFirst = await page.content();
  assert.ok(
    afterFirst.includes('You gave the first approval: a second, distinct approver must complete it.'),
  );
  assert.equal(
    await page.locator('button.primary').count(),
    0,
    'the first approver is offered no approve form',
  );
  assert.equal(await approvalStatus(irreversible), 'pending');
  const early = await authorizeWith(irreversible, input, purge, purgeGrant);
  assert.equal(early.status, 403, 'one approval does not authorize an irreversible call');
  const two = await signIn(second.api_key as string, 'second-approver');
  await two.page.goto(`${base}/console/approvals/${irreversible}`);
  assert.ok((await two.page.content()).includes('Give the second approval'));
  await shot(two.page, 'console-second-approver.png');
  await Promise.all([two.page.waitForURL(/done=approved$/), two.page.click('button.primary')]);
  assert.equal(await approvalStatus(irreversible), 'approved');
  const purged = await authorizeWith(irreversible, input, purge, purgeGrant);
  assert.equal(purged.status, 200, JSON.stringify(purged.body));
  await two.context.close();

  // -- The policy changes after render: refused, the page says why ----------------------------
  await page.goto(`${base}/console/approvals/${drift}`);
  await must(
    api('PUT', '/v1/policy', s.admin.api_key, { ...DEMO_POLICY, approval_max_lifetime_ms: 600_000 }),
    200,
  );
  const drifted = await submit(page, 'button.primary');
  assert.equal(drifted.status(), 409);
  assert.ok((await page.content()).includes('the policy changed after the request was shown'));
  assert.equal(await approvalStatus(drift), 'pending');

  // -- History --------------------------------------------------------------------------------
  await page.goto(`${base}/console/history`);
  const everything = await page.content();
  assert.ok(everything.includes('decided approvals.'), 'the history counts decided approvals');
  // The executed approval's row: its outcome in plain words, with receipt and bundle links.
  const row = page.locator('tr', { has: page.locator(`a[href="/console/approvals/${good}"]`) });
  const rowText = await row.innerText();
  assert.ok(rowText.includes('Authorized'), 'the row shows the authorization');
  assert.ok(rowText.includes('Executed: success, verified'), 'the row shows the verified execution');
  const receiptLink = row.locator(`a[href="/console/receipts/${executed}"]`);
  const bundleLink = row.locator(`a[href="/console/receipts/${executed}/bundle"]`);
  assert.equal(await receiptLink.count(), 1, 'the execution receipt is linked');
  assert.equal(await bundleLink.count(), 1, "the execution receipt's bundle is linked");
  assert.ok(
    (await bundleLink.innerText()).includes('of the execution receipt'),
    'the bundle link is labelled',
  );
  // Keyboard: Tab reaches the execution receipt's link, Enter opens the receipt.
  for (let i = 0; i < 400 && (await activeHref(page)) !== `/console/receipts/${executed}`; i++)
    await page.keyboard.press('Tab');
  assert.equal(
    await activeHref(page),
    `/console/receipts/${executed}`,
    'the receipt link is reachable by Tab',
  );
  await shot(page, 'console-history.png');
  await Promise.all([
    page.waitForURL(new RegExp(`/console/receipts/${executed}$`)),
    page.keyboard.press('Enter'),
  ]);
  assert.ok((await page.content()).includes('verified_succeeded'), 'the receipt page shows the outcome');
  // The bundle downloads with the session (the same document as GET /v1/receipts/{sha}/bundle).
  const bundle = await context.request.get(`${base}/console/receipts/${executed}/bundle`);
  assert.equal(bundle.status(), 200);
  assert.equal(((await bundle.json()) as { receipt?: { sha256?: string } }).receipt?.sha256, executed);
  await page.goto(`${base}/console/history?status=consumed`);
  const history = await page.content();
  assert.ok(history.includes(good) && history.includes(irreversible), 'used approvals are listed');
  await page.goto(`${base}/console/history?status=denied`);
  assert.ok((await page.content()).includes(tricky));

  // -- 200 % zoom on the list pages, now that they hold rows: the page itself never scrolls
  // sideways (a wide table may scroll inside its own region, WCAG 1.4.10's exception for data
  // tables, but the page around it reflows) ------------------------------------------------------
  const zoomedLists = await browser.newContext({
    viewport: { width: 640, height: 900 },
    deviceScaleFactor: 2,
    storageState: await context.storageState(),
  });
  const zl = await newPage(zoomedLists);
  for (const list of ['/console/pending', '/console/history', '/console/history?status=consumed']) {
    await zl.goto(`${base}${list}`);
    const sideways = await zl.evaluate<number>(
      'document.documentElement.scrollWidth - document.documentElement.clientWidth',
    );
    assert.ok(sideways <= 0, `no horizontal page scrolling at 200 % on ${list} (overflow ${sideways}px)`);
  }
  await shot(zl, 'console-history-200pct.png');
  await zoomedLists.close();

  // -- The tenant admin's Security page: reached from the navigation by keyboard, counting the
  // decisions made above; no sideways page scrolling at 200 % -----------------------------------
  const admin = await signIn(s.admin.api_key, 'tenant admin');
  for (let i = 0; i < 40 && (await activeHref(admin.page)) !== '/console/security'; i++)
    await admin.page.keyboard.press('Tab');
  assert.equal(await activeHref(admin.page), '/console/security', 'the Security link is reachable by Tab');
  await Promise.all([admin.page.waitForURL(/\/console\/security$/), admin.page.keyboard.press('Enter')]);
  const security = await admin.page.content();
  assert.ok(security.includes('Security decisions'), 'the Security page renders');
  assert.ok(/authorization authorized<\/th>/.test(security), 'the authorizations made above are counted');
  await shot(admin.page, 'console-security.png');
  const zoomedAdmin = await browser.newContext({
    viewport: { width: 640, height: 900 },
    deviceScaleFactor: 2,
    storageState: await admin.context.storageState(),
  });
  const za = await newPage(zoomedAdmin);
  await za.goto(`${base}/console/security?window=7d`);
  const adminSideways = await za.evaluate<number>(
    'document.documentElement.scrollWidth - document.documentElement.clientWidth',
  );
  assert.ok(
    adminSideways <= 0,
    `no horizontal page scrolling at 200 % on Security (overflow ${adminSideways}px)`,
  );
  await zoomedAdmin.close();
  await admin.context.close();

  assert.deepEqual(violations, [], 'no CSP violation on any page');
  console.log(
    `browser test passed (Chromium ${browser.version()}); screenshots in ${UPDATE_SCREENSHOTS ? path.relative(ROOT, shots) : shots}/`,
  );
}

function activeName(page: Page): Promise<string | null> {
  return page.evaluate<string | null>("document.activeElement?.getAttribute('name') ?? null");
}

function activeHref(page: Page): Promise<string | null> {
  return page.evaluate<string | null>("document.activeElement?.getAttribute('href') ?? null");
}

function activeRel(page: Page): Promise<string | null> {
  return page.evaluate<string | null>("document.activeElement?.getAttribute('rel') ?? null");
}

main()
  .then(cleanup)
  .catch(async (e: unknown) => {
    console.error('browser test FAILED:', e instanceof Error ? (e.stack ?? e.message) : e);
    await cleanup();
    process.exit(1);
  });
