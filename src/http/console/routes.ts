/**
 * The approval console (`/console`): a person signs in with an approver API key, reviews the
 * exact canonical input of each pending request and approves or denies it. A door like `/v1`:
 * it parses, calls the approval services (src/services/approvals.ts) and renders HTML.
 *
 * Guarantees: every page is sent with a Content-Security-Policy that allows no script, no frame
 * and only this origin's stylesheet and form targets, and with `Cache-Control: no-store`; every
 * POST needs the same origin and the session's CSRF token, and is rate limited per principal as
 * `/v1` writes are; an approval binds the three digests the page rendered (a changed input,
 * contract or policy is refused and the page says why); the principal is re-read on every request.
 * Never: exposes the API key to a page, or decides anything itself: every decision is the
 * service's, which checks roles, self-approval and policy again.
 */
import { type Context, Hono } from 'hono';
import { z } from 'zod';
import { Label, Sha256 } from '../../core/schema.js';
import { getPolicy } from '../../services/admin.js';
import {
  ApprovalHistoryQuery,
  approvalHistory,
  approve,
  deny,
  getApproval,
  listApprovals,
} from '../../services/approvals.js';
import { ROLES_FOR } from '../../services/context.js';
import { ServiceError, errorForLog, notFound } from '../../services/errors.js';
import { PageQuery } from '../../services/pagination.js';
import { receiptBundle } from '../../services/log.js';
import { getMetrics } from '../../services/metrics.js';
import { getReceipt } from '../../services/receipts.js';
import { keysPort, receiptLogPort } from '../../platform/bindings.js';
import type { AppEnv } from '../env.js';
import { wireError } from '../errors.js';
import { metricsRefusals, rateLimitWrites, takeMetricsReadTokens } from '../rate-limit.js';
import {
  type Chrome,
  type Notice,
  approvalPage,
  continuePage,
  errorPage,
  historyPage,
  pendingPage,
  receiptPage,
  SECURITY_WINDOWS,
  type SecurityWindow,
  securityPage,
  signInPage,
} from './pages.js';
import {
  type Session,
  SESSION_TTL_MS,
  clearSignIn,
  callerFor,
  clearSession,
  csrfMatches,
  hasSessionCookie,
  establish,
  randomToken,
  readForm,
  readSession,
  sameOrigin,
  readSignIn,
  writeSession,
  writeSignIn,
} from './session.js';
import { CONSOLE_CSS } from './style.js';

export const CONSOLE_CSP =
  "default-src 'none'; style-src 'self'; img-src 'none'; script-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

export const PENDING_PAGE_SIZE = 10;

export const consoleRoutes = new Hono<AppEnv>();

consoleRoutes.use('*', async (c, next) => {
  c.header('content-security-policy', CONSOLE_CSP);
  c.header('x-content-type-options', 'nosniff');
  c.header('x-frame-options', 'DENY');
  // `same-origin`, not `no-referrer`: under `no-referrer` a browser sends `Origin: null` on a
  // form POST, which the same-origin check (rightly) refuses. Other sites still get no referrer.
  c.header('referrer-policy', 'same-origin');
  c.header('cross-origin-opener-policy', 'same-origin');
  c.header('cache-control', 'no-store');
  // A link from another site (an email, a chat message) arrives without the session cookie: it
  // is SameSite=Strict, so the browser holds it back on a cross-site navigation, yet may store a
  // cookie the response sets. Answered as signed out, the request would write a signed-out cookie
  // over the session (sign-in) or delete it. Instead: a page whose link to the same address,
  // followed from this origin, brings the cookie. Nothing is read or written.
  if (
    c.req.method === 'GET' &&
    c.req.header('sec-fetch-site') === 'cross-site' &&
    !hasSessionCookie(c) &&
    c.req.path !== '/console/style.css'
  ) {
    const url = new URL(c.req.url);
    return c.html(continuePage(`${url.pathname}${url.search}`));
  }
  return next();
});

consoleRoutes.get('/style.css', (c) => {
  c.header('content-type', 'text/css; charset=utf-8');
  c.header('cache-control', 'public, max-age=300');
  return c.body(CONSOLE_CSS);
});

consoleRoutes.get('/', async (c) => {
  const s = await readSession(c);
  return c.redirect(s?.k !== null && s !== null ? '/console/pending' : '/console/sign-in', 303);
});

consoleRoutes.get('/sign-in', async (c) => {
  const s = await readSession(c);
  if (s !== null && s.k !== null && (await callerFor(c.env, s.k)) !== null) {
    return c.redirect('/console/pending', 303);
  }
  // The form's token goes in the sign-in cookie, never the session's: this page is where a link
  // from another site lands when the browser held the session cookie back, and a session written
  // over here would sign the approver out (whether or not the browser sent Sec-Fetch-Site).
  return c.html(signInPage(await writeSignIn(c), null));
});

consoleRoutes.post('/sign-in', sameOrigin, async (c) => {
  const s = await readSignIn(c);
  const form = await readForm(c);
  // Login CSRF: without the token of the session the form was served with, nothing is signed in.
  if (s === null || !csrfMatches(s, form.get('csrf'))) throw csrfRefused();
  const key = form.get('api_key') ?? '';
  const caller = await callerFor(c.env, key.trim());
  const retry = async (status: 401 | 403, message: string) =>
    c.html(signInPage(await writeSignIn(c), message), status);
  if (caller === null) return retry(401, 'that API key is not valid');
  if (!caller.roles.some((r) => (ROLES_FOR.listApprovals as readonly string[]).includes(r))) {
    return retry(403, 'that API key holds neither the approver nor the tenant_admin role');
  }
  // A new CSRF token at sign-in: a token seen before signing in is worth nothing after.
  await writeSession(c, { v: 1, k: key.trim(), c: randomToken(), exp: c.var.now + SESSION_TTL_MS });
  clearSignIn(c);
  c.set('log', { ...c.var.log, tenant_id: caller.tenant_id, principal_id: caller.principal_id });
  return c.redirect('/console/pending', 303);
});

consoleRoutes.post('/sign-out', sameOrigin, async (c) => {
  const s = await readSession(c);
  const form = await readForm(c);
  if (s === null || !csrfMatches(s, form.get('csrf'))) throw csrfRefused();
  clearSession(c);
  return c.redirect('/console/sign-in', 303);
});

// Both lists page through the approvals service by keyset cursor: a page costs its size,
// however long the queue (docs/console.md, "Performance").
consoleRoutes.get('/pending', async (c) => {
  const chrome = await signedIn(c);
  const cursor = cursorParam(c);
  const { items, next_cursor } = await listApprovals(c.var.tenant, {
    status: 'pending',
    limit: PENDING_PAGE_SIZE,
    ...(cursor === undefined ? {} : { cursor }),
  });
  return c.html(pendingPage(chrome, { items, next_cursor, paged: cursor !== undefined }, c.var.now));
});

consoleRoutes.get('/history', async (c) => {
  const chrome = await signedIn(c);
  // No filter (or `all`): every decided request. Anything else must be one stored outcome.
  const raw = c.req.query('status');
  const status = raw === undefined || raw === '' || raw === 'all' ? undefined : raw;
  const cursor = cursorParam(c);
  const q = ApprovalHistoryQuery.safeParse({
    ...(status === undefined ? {} : { status }),
    ...(cursor === undefined ? {} : { cursor }),
  });
  if (!q.success) {
    throw new ServiceError('invalid_request', 'that history filter is not valid; start from the first page');
  }
  const list = await approvalHistory(c.var.tenant, q.data);
  return c.html(historyPage(chrome, list, cursor !== undefined, c.var.now));
});

// Security (tenant admin): the metrics of a window as a page. An approver's key is refused by
// the metrics service itself (403 page), and its navigation shows no link here.
consoleRoutes.get('/security', async (c) => {
  const chrome = await signedIn(c);
  // One `window`, nothing else: a repeated or unknown parameter is refused, never half-read.
  const params = c.req.queries();
  const given = params.window ?? [];
  const raw = given[0] ?? '24h';
  if (
    Object.keys(params).some((k) => k !== 'window') ||
    given.length > 1 ||
    !Object.hasOwn(SECURITY_WINDOWS, raw)
  ) {
    throw new ServiceError('invalid_request', 'that window is not offered; choose 1h, 24h or 7d');
  }
  const window = raw as SecurityWindow;
  // As `GET /v1/metrics`: the read pays write tokens; an empty bucket is a 429 page.
  await takeMetricsReadTokens(c);
  const m = await getMetrics(c.var.tenant, { window_ms: SECURITY_WINDOWS[window] }, metricsRefusals(c));
  return c.html(securityPage(chrome, m, window));
});

consoleRoutes.get('/approvals/:approval_id', async (c) => {
  const chrome = await signedIn(c);
  const done = c.req.query('done');
  const notice: Notice | null =
    done === 'approved'
      ? { kind: 'ok', text: 'Approved. The agent can now authorize exactly this call, once.' }
      : done === 'denied'
        ? { kind: 'ok', text: 'Denied.' }
        : null;
  return renderApproval(c, chrome, c.req.param('approval_id'), notice, 200);
});

const ApproveForm = z.strictObject({
  csrf: z.string(),
  input_sha256: Sha256,
  tool_contract_sha256: Sha256,
  policy_sha256: Sha256,
  expires_in_ms: z.string().regex(/^[1-9][0-9]{0,12}$/),
});

consoleRoutes.post('/approvals/:approval_id/approve', sameOrigin, async (c) => {
  const chrome = await signedInForWrite(c);
  const id = c.req.param('approval_id');
  const form = ApproveForm.safeParse(Object.fromEntries(await readForm(c)));
  if (!form.success) {
    return renderApproval(c, chrome, id, { kind: 'error', text: 'the approval form is incomplete' }, 400);
  }
  const { input_sha256, tool_contract_sha256, policy_sha256, expires_in_ms } = form.data;
  try {
    await approve(
      c.var.tenant,
      id,
      { expires_in_ms: Number(expires_in_ms) },
      { input_sha256, tool_contract_sha256, policy_sha256 },
    );
  } catch (e) {
    return refusedDecision(c, chrome, id, e);
  }
  return c.redirect(`/console/approvals/${encodeURIComponent(id)}?done=approved`, 303);
});

const DenyForm = z.strictObject({
  csrf: z.string(),
  // The JSON API's rule for a reason (`Label`: no C0, DEL or C1 control), after trimming.
  reason: z.string().trim().pipe(Label),
});

consoleRoutes.post('/approvals/:approval_id/deny', sameOrigin, async (c) => {
  const chrome = await signedInForWrite(c);
  const id = c.req.param('approval_id');
  // Browsers send a textarea's line breaks as CR LF; a reason is one line.
  const fields = Object.fromEntries(await readForm(c));
  if (typeof fields.reason === 'string') fields.reason = fields.reason.replace(/\r?\n/g, ' ');
  const form = DenyForm.safeParse(fields);
  if (!form.success) {
    return renderApproval(
      c,
      chrome,
      id,
      { kind: 'error', text: 'a reason of 1 to 200 characters, without control characters, is required' },
      400,
    );
  }
  try {
    await deny(c.var.tenant, id, { reason: form.data.reason });
  } catch (e) {
    return refusedDecision(c, chrome, id, e);
  }
  return c.redirect(`/console/approvals/${encodeURIComponent(id)}?done=denied`, 303);
});

consoleRoutes.get('/receipts/:sha256', async (c) => {
  const chrome = await signedIn(c);
  const sha = c.req.param('sha256');
  return c.html(receiptPage(chrome, sha, await getReceipt(c.var.tenant, sha)));
});

/**
 * The receipt's offline bundle (issue 11), as a download: the same document as
 * `GET /v1/receipts/{sha256}/bundle`, for `npx writ verify` on the approver's own machine.
 */
consoleRoutes.get('/receipts/:sha256/bundle', async (c) => {
  await signedIn(c);
  const sha = c.req.param('sha256');
  if (!Sha256.safeParse(sha).success) throw notFound('receipt');
  const bundle = await receiptBundle(
    c.var.tenant,
    receiptLogPort(c.env, c.var.tenant.caller.tenant_id),
    keysPort(c.env),
    sha,
  );
  c.header('content-disposition', `attachment; filename="writ-bundle-${sha}.json"`);
  return c.json(bundle);
});

consoleRoutes.onError((e, c) => {
  const err =
    e instanceof ServiceError
      ? e
      : (console.error(JSON.stringify({ level: 'error', request_id: c.var.requestId, ...errorForLog(e) })),
        new ServiceError('internal', 'internal error; quote the request id'));
  c.set('log', { ...c.var.log, error: err.reason });
  if (err.reason === 'unauthenticated' && c.req.method === 'GET') return c.redirect('/console/sign-in', 303);
  if (err.retryAfterSeconds !== null) c.header('retry-after', String(err.retryAfterSeconds));
  const { status } = wireError(err.reason);
  const chrome: Chrome = { caller: c.get('principal') ?? null, csrf: null };
  const message = err.reason === 'internal' ? `${err.message} (${c.var.requestId})` : err.message;
  return c.html(errorPage(chrome, status, message), status);
});

// ---------------------------------------------------------------------------------------------

function csrfRefused(): ServiceError {
  return new ServiceError(
    'forbidden_role',
    "the form's security token is missing or does not match this session; reload the page and try again",
  );
}

/** The session's caller, established as `/v1` establishes a bearer's; otherwise `unauthenticated`. */
async function signedIn(c: Context<AppEnv>): Promise<Chrome & { readonly session: Session }> {
  const s = await readSession(c);
  const caller = s === null || s.k === null ? null : await callerFor(c.env, s.k);
  if (s === null || caller === null) {
    // Only a cookie that was sent can be stale: clearing one the browser held back (a cross-site
    // request) would sign out a session that is still good.
    if (hasSessionCookie(c)) clearSession(c);
    throw new ServiceError('unauthenticated', 'sign in with a valid API key');
  }
  establish(c, caller);
  return { caller, csrf: s.c, session: s };
}

/** `signedIn`, then the CSRF token (read from the form) and the per-principal write limit. */
async function signedInForWrite(c: Context<AppEnv>): Promise<Chrome> {
  const chrome = await signedIn(c);
  // The body is read once here for the token; handlers read the same cached form again.
  const form = await readForm(c);
  if (!csrfMatches(chrome.session, form.get('csrf'))) throw csrfRefused();
  await rateLimitWrites(c, async () => {});
  return chrome;
}

async function renderApproval(
  c: Context<AppEnv>,
  chrome: Chrome,
  id: string,
  notice: Notice | null,
  status: 200 | 400 | 403 | 404 | 409,
) {
  const ctx = c.var.tenant;
  const [a, policy] = await Promise.all([getApproval(ctx, id), getPolicy(ctx)]);
  const p = { policy_sha256: policy.policy_sha256, max_ms: policy.policy.approval_max_lifetime_ms };
  return c.html(approvalPage(chrome, a, p, c.var.now, notice), status);
}

/** A refused decision re-renders the request as it is now, with the service's reason. */
async function refusedDecision(c: Context<AppEnv>, chrome: Chrome, id: string, e: unknown) {
  if (!(e instanceof ServiceError) || e.reason === 'not_found' || e.reason === 'internal') throw e;
  const status = wireError(e.reason).status;
  const shownStatus = status === 400 || status === 403 || status === 409 ? status : 409;
  c.set('log', { ...c.var.log, error: e.reason });
  return renderApproval(c, chrome, id, { kind: 'error', text: `Refused: ${e.message}` }, shownStatus);
}

/** The `cursor` query parameter, as the service's lists take it (it validates and decodes it). */
function cursorParam(c: Context<AppEnv>): string | undefined {
  const raw = c.req.query('cursor');
  if (raw === undefined || raw === '') return undefined;
  const parsed = PageQuery.cursor.safeParse(raw);
  if (!parsed.success || parsed.data === undefined) {
    throw new ServiceError('invalid_request', 'that page link is not valid; start from the first page');
  }
  return parsed.data;
}
