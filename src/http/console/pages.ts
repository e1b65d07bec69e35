/**
 * The console's pages as functions from service answers to HTML. No state, no I/O.
 *
 * Guarantees: values go through `hono/html` escaping or `shown` (render.ts); a form that decides
 * carries the CSRF token and, for an approval, the three digests rendered on the same page.
 */
import { html, raw } from 'hono/html';
import type { HtmlEscapedString } from 'hono/utils/html';
import { digestOf } from '../../core/canonical/canonical.js';
import type {
  EarlierAttempt,
  SameInputAttempts,
  approvalView,
  historyReceipts,
} from '../../services/approvals.js';
import type { Caller } from '../../services/context.js';
import type { getMetrics } from '../../services/metrics.js';
import { Findings, duration, effectExplanation, isoTime, jsonHtml, shown } from './render.js';

export type ApprovalItem = ReturnType<typeof approvalView>;
type Html = HtmlEscapedString | Promise<HtmlEscapedString>;

export interface Chrome {
  readonly caller: Caller | null;
  readonly csrf: string | null;
}

export function layout(title: string, chrome: Chrome, body: Html): Html {
  const who = chrome.caller;
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="referrer" content="same-origin" />
        <title>${title} · Writ approval console</title>
        <link rel="stylesheet" href="/console/style.css" />
      </head>
      <body>
        <header>
          <span class="brand">Writ approval console</span>
          ${
            who === null
              ? ''
              : html`<nav aria-label="Console">
                    <a href="/console/pending">Pending</a>
                    <a href="/console/history">History</a>
                    ${who.roles.includes('tenant_admin') ? html`<a href="/console/security">Security</a>` : ''}
                  </nav>
                  <span class="muted"
                    >Signed in as <span class="mono">${who.principal_id}</span> (tenant
                    <span class="mono">${who.tenant_id}</span>)</span
                  >
                  <form method="post" action="/console/sign-out">
                    <input type="hidden" name="csrf" value="${chrome.csrf ?? ''}" />
                    <button type="submit">Sign out</button>
                  </form>`
          }
        </header>
        <main>${body}</main>
      </body>
    </html>`;
}

export function signInPage(csrf: string, error: string | null): Html {
  return layout(
    'Sign in',
    { caller: null, csrf },
    html`<h1>Sign in</h1>
      ${error === null ? '' : html`<p class="error" role="alert">${error}</p>`}
      <p>
        Sign in with your approver API key. It is kept in an encrypted, HttpOnly cookie for at most one hour
        and is never shown in a page.
      </p>
      <form method="post" action="/console/sign-in">
        <input type="hidden" name="csrf" value="${csrf}" />
        <label for="api_key">Approver API key</label>
        <input type="password" id="api_key" name="api_key" autocomplete="off" required spellcheck="false" />
        <button type="submit" class="primary">Sign in</button>
      </form>`,
  );
}

/**
 * The answer to a console link followed from another site: the same address as a link, which a
 * browser follows from this origin with the SameSite=Strict session cookie (`href` is this
 * origin's path and query, escaped as every attribute is).
 */
export function continuePage(href: string): Html {
  return layout(
    'Continue',
    { caller: null, csrf: null },
    html`<h1>Continue to the approval console</h1>
      <p>
        You followed a link from another site. Your browser sends the console's sign-in cookie only to pages
        opened from the console itself, so this page stops here first.
      </p>
      <p><a href="${href}">Continue</a></p>`,
  );
}

export function errorPage(chrome: Chrome, status: number, message: string): Html {
  return layout(
    'Error',
    chrome,
    html`<h1>Request refused (${status})</h1>
      <p class="error" role="alert">${message}</p>
      <p><a href="/console/pending">Back to pending approvals</a></p>`,
  );
}

function warning(f: Findings): Html {
  if (f.count === 0) return html``;
  return html`<p class="warn" role="alert">
    <strong>Warning: hidden characters.</strong> This request contains ${f.count} invisible or
    direction-changing character${f.count === 1 ? '' : 's'} (${[...f.codepoints].sort().join(', ')}), shown as
    highlighted ⟨U+…⟩ markers. What a viewer without this console sees may differ from what the tool receives.
  </p>`;
}

/** The parts of a request an approver decides on; `f` collects hidden characters across them. */
function details(a: ApprovalItem, now: number, f: Findings) {
  const p = a.preview;
  const target = jsonHtml(a.target, f);
  const input = jsonHtml(a.input, f);
  // Recomputed from the value shown: a stored digest that does not match is never offered.
  const verified = digestOf(a.input) === a.input_sha256;
  return {
    verified,
    body: html`<dl>
      <dt>Tool</dt>
      <dd>
        <span class="mono">${p === null ? '(contract missing)' : shown(p.tool_name, f)}</span>
        ${p === null ? '' : html`<span class="muted">contract release ${shown(p.contract_release, f)}, executor ${shown(p.executor_release, f)}</span>`}
      </dd>
      <dt>Effect</dt>
      <dd>
        <span class="effect effect-${a.effect}">${a.effect}</span>
        ${effectExplanation(a.effect)}${p === null ? '' : p.reversible ? ' This contract declares it reversible.' : ' This contract declares it not reversible.'}
      </dd>
      <dt>Target</dt>
      <dd><pre aria-label="target resource">${raw(target)}</pre></dd>
      <dt>Requested by</dt>
      <dd class="mono">${a.requester_principal_id}</dd>
      <dt>Requested at</dt>
      <dd>
        ${isoTime(a.created_at_unix_ms)}
        <span class="muted">(waiting ${duration(now - a.created_at_unix_ms)})</span>
      </dd>
      <dt>Input (canonical)</dt>
      <dd>
        <pre aria-label="canonical input">${raw(input)}</pre>
        <span class="muted"
          >${a.input_bytes} bytes, RFC 8785 canonical form: the exact bytes the executor will consume.</span
        >
      </dd>
      <dt>Input SHA-256</dt>
      <dd class="mono digest">
        ${a.input_sha256}
        ${verified ? html`<span class="muted">(recomputed from the input above: matches)</span>` : html`<strong class="error">does not match the input shown</strong>`}
      </dd>
      ${
        a.idempotency_key === null
          ? ''
          : html`<dt>Idempotency key</dt>
              <dd class="mono">${a.idempotency_key}</dd>`
      }
      <dt>Contract SHA-256</dt>
      <dd class="mono digest">${a.tool_contract_sha256}</dd>
      <dt>Policy SHA-256</dt>
      <dd class="mono digest">${a.policy_sha256}</dd>
    </dl>`,
  };
}

/** Cursor links (keyset pages through the approvals service): first page, and the next one. */
function pager(base: string, list: Paged<unknown>): Html {
  const sep = base.includes('?') ? '&' : '?';
  if (list.next_cursor === null && !list.paged) return html``;
  return html`<nav class="pager" aria-label="Pages">
    ${list.paged ? html`<a href="${base}" rel="first">First page</a>` : ''}
    <span>${list.items.length} on this page</span>
    ${list.next_cursor === null ? '' : html`<a href="${base}${sep}cursor=${list.next_cursor}" rel="next">Next page</a>`}
  </nav>`;
}

/** One page of a list, read through the approvals service with its cursor. */
export interface Paged<T> {
  readonly items: readonly T[];
  /** The cursor of the page after this one, or null on the last page. */
  readonly next_cursor: string | null;
  /** This page was reached through a cursor (not the first page). */
  readonly paged: boolean;
}

export function pendingPage(chrome: Chrome, list: Paged<ApprovalItem>, now: number): Html {
  const cards = list.items.map((a) => {
    const f = new Findings();
    const d = details(a, now, f);
    return html`<article class="card" aria-labelledby="h-${a.approval_id}">
      <h2 id="h-${a.approval_id}">
        ${a.preview === null ? a.effect : shown(a.preview.tool_name, f)}
        <span class="muted mono">${a.approval_id}</span>
      </h2>
      ${warning(f)} ${d.body} ${approvalsNeeded(a)}
      <p>
        <a href="/console/approvals/${a.approval_id}"
          >Review and decide<span class="visually-hidden"> on ${a.approval_id}</span></a
        >
      </p>
    </article>`;
  });
  return layout(
    'Pending approvals',
    chrome,
    html`<h1>Pending approvals</h1>
      <p>
        ${list.items.length === 0 && !list.paged ? 'Nothing is waiting for a decision.' : 'Oldest first.'}
      </p>
      ${pager('/console/pending', list)} ${cards} ${pager('/console/pending', list)}`,
  );
}

export interface Notice {
  readonly kind: 'ok' | 'error';
  readonly text: string;
}

/** How many approvals the request still needs, for an effect that needs two (else nothing). */
function approvalsNeeded(a: ApprovalItem): Html | string {
  if (a.approvals_required < 2) return '';
  return a.first_approved_by === null
    ? html`<p class="warn">Needs two distinct approvers (irreversible effect): none has approved yet.</p>`
    : html`<p class="warn">
        Needs two distinct approvers (irreversible effect): first approved by
        <span class="mono">${a.first_approved_by}</span
        >${a.first_approved_at_unix_ms === null ? '' : html` at ${isoTime(a.first_approved_at_unix_ms)}`};
        ${a.status === 'pending' ? 'waiting for a second approver.' : 'completed.'}
      </p>`;
}

/** An unresolved attempt of the same operation (tool and idempotency key) that may have acted. */
function earlierAttempt(a: ApprovalPageItem): Html | string {
  const e = a.earlier_attempt;
  if (e === null || e === undefined) return '';
  const same = e.input_sha256 === a.input_sha256;
  return html`<section class="card warn" aria-labelledby="earlier-h">
    <h2 id="earlier-h">Earlier unresolved attempt of this operation</h2>
    <p>
      An earlier call with the same idempotency key <span class="mono">${a.idempotency_key ?? ''}</span> is
      <strong>${e.status}</strong>: it may already have had its effect. Approving this request could repeat
      it.
    </p>
    <dl>
      <dt>Operation</dt>
      <dd class="mono">${e.operation_id}</dd>
      <dt>Input SHA-256</dt>
      <dd class="mono digest">
        ${e.input_sha256}
        ${same ? '(the same input as this request)' : html`<strong>(a different input)</strong>`}
      </dd>
      <dt>Contract SHA-256</dt>
      <dd class="mono digest">${e.tool_contract_sha256}</dd>
      ${
        e.reconciliation_deadline_unix_ms === null
          ? ''
          : html`<dt>Reconcile by</dt>
              <dd>${isoTime(e.reconciliation_deadline_unix_ms)}</dd>`
      }
      ${
        e.escalated_at_unix_ms === null
          ? ''
          : html`<dt>Escalated at</dt>
              <dd>${isoTime(e.escalated_at_unix_ms)}</dd>`
      }
    </dl>
  </section>`;
}

/**
 * Open operations of the same tool and input under other idempotency keys (or on a request that
 * named none): a retry under a new key of a call that may already have acted.
 */
function sameInputAttempts(a: ApprovalPageItem): Html | string {
  const list = a.same_input_attempts ?? [];
  if (list.length === 0) return '';
  return html`<section class="card warn" aria-labelledby="same-input-h">
    <h2 id="same-input-h">Open attempts of this exact call</h2>
    <p>
      ${list.length === 1 ? 'An operation' : `${list.length} operations`} of the same tool with the same input
      (SHA-256 <span class="mono digest">${a.input_sha256}</span>) ${list.length === 1 ? 'is' : 'are'} still
      in flight or awaiting
      reconciliation${a.idempotency_key === null ? '' : ', besides any earlier attempt of this request’s key shown above'}:
      ${list.length === 1 ? 'it' : 'they'} may already have had the effect this request asks for. The
      idempotency key of each is below.
    </p>
    <table>
      <thead>
        <tr>
          <th scope="col">Operation</th>
          <th scope="col">Status</th>
          <th scope="col">Idempotency key</th>
          <th scope="col">Reconcile by</th>
          <th scope="col">Updated</th>
        </tr>
      </thead>
      <tbody>
        ${list.map(
          (o) =>
            html`<tr>
              <td class="mono">${o.operation_id}</td>
              <td><strong>${o.status}</strong>${o.escalated_at_unix_ms === null ? '' : ' (escalated)'}</td>
              <td class="mono">${o.idempotency_key}</td>
              <td>
                ${o.reconciliation_deadline_unix_ms === null ? '' : isoTime(o.reconciliation_deadline_unix_ms)}
              </td>
              <td>${isoTime(o.updated_at_unix_ms)}</td>
            </tr>`,
        )}
      </tbody>
    </table>
  </section>`;
}

/** The single-request view (getApproval), which adds the attempts that may already have acted. */
export type ApprovalPageItem = ApprovalItem & {
  readonly earlier_attempt?: EarlierAttempt;
  readonly same_input_attempts?: SameInputAttempts;
};

export function approvalPage(
  chrome: Chrome,
  a: ApprovalPageItem,
  policy: { readonly policy_sha256: string; readonly max_ms: number },
  now: number,
  notice: Notice | null,
): Html {
  const f = new Findings();
  const d = details(a, now, f);
  const own = chrome.caller !== null && chrome.caller.principal_id === a.requester_principal_id;
  // One person clicking twice is not two reviews: the first approver is offered no approve form.
  const gaveFirst = chrome.caller !== null && a.first_approved_by === chrome.caller.principal_id;
  const twoNeeded = a.approvals_required > 1;
  const approveHeading = !twoNeeded
    ? 'Approve exactly this call'
    : a.first_approved_by === null
      ? 'Give the first of two approvals'
      : 'Give the second approval';
  const drifted = policy.policy_sha256 !== a.policy_sha256;
  const decidable = a.status === 'pending';
  const choices = expiryChoices(policy.max_ms);
  const defaultMs = Math.min(15 * 60_000, policy.max_ms);
  const csrf = chrome.csrf ?? '';
  // Rendered before the warning, so its hidden characters are counted in it.
  const title = a.preview === null ? 'Approval request' : shown(a.preview.tool_name, f);
  const reason = a.decision_reason === null ? '' : html`<p>Reason: ${shown(a.decision_reason, f)}</p>`;
  const approveForm = html`<form method="post" action="/console/approvals/${a.approval_id}/approve">
    <h2>${approveHeading}</h2>
    <input type="hidden" name="csrf" value="${csrf}" />
    <input type="hidden" name="input_sha256" value="${a.input_sha256}" />
    <input type="hidden" name="tool_contract_sha256" value="${a.tool_contract_sha256}" />
    <input type="hidden" name="policy_sha256" value="${a.policy_sha256}" />
    <label for="expires_in_ms">Approval valid for</label>
    <select id="expires_in_ms" name="expires_in_ms">
      ${choices.map((ms) => html`<option value="${ms}" ${ms === defaultMs ? raw(' selected') : ''}>${duration(ms)}</option>`)}
    </select>
    <p class="muted">
      At most ${duration(policy.max_ms)} (the policy's approval_max_lifetime_ms). The approval is used by one
      authorization at most.
    </p>
    <button type="submit" class="primary">Approve input ${a.input_sha256.slice(0, 12)}…</button>
  </form>`;
  // A digest that does not match the input shown, or a policy that moved on: nothing to approve.
  const forms = html`<section class="decide" aria-label="Decision">
    ${d.verified && !drifted && !gaveFirst ? approveForm : ''}
    <form method="post" action="/console/approvals/${a.approval_id}/deny">
      <h2>Deny</h2>
      <input type="hidden" name="csrf" value="${csrf}" />
      <label for="reason">Reason (shown to the requester)</label>
      <textarea id="reason" name="reason" rows="3" maxlength="200" required></textarea>
      <button type="submit" class="danger">Deny</button>
    </form>
  </section>`;
  return layout(
    `Approval ${a.approval_id}`,
    chrome,
    html`<p><a href="/console/pending">← Pending approvals</a></p>
      <h1>
        ${title}
        <span class="muted mono">${a.approval_id}</span>
      </h1>
      ${notice === null ? '' : html`<p class="${notice.kind}" role="${notice.kind === 'error' ? 'alert' : 'status'}">${notice.text}</p>`}
      ${warning(f)}
      <p>
        Status:
        <strong>${a.status}</strong
        >${a.decided_by === null ? '' : html` by <span class="mono">${a.decided_by}</span> at ${isoTime(a.decided_at_unix_ms ?? 0)}`}${a.expires_at_unix_ms === null ? '' : html`, valid until ${isoTime(a.expires_at_unix_ms)}`}
      </p>
      ${reason} ${d.body}
      ${own && decidable ? html`<p class="warn">You requested this call yourself: another approver must decide it.</p>` : ''}
      ${drifted && decidable ? html`<p class="warn">The policy in force (<span class="mono digest">${policy.policy_sha256}</span>) is not the one this request was made under: it can no longer be approved; the agent must request again.</p>` : ''}
      ${approvalsNeeded(a)}
      ${gaveFirst && decidable ? html`<p class="warn">You gave the first approval: a second, distinct approver must complete it.</p>` : ''}
      ${earlierAttempt(a)} ${sameInputAttempts(a)} ${decidable ? forms : ''}
      ${a.consumed_by_receipt_sha256 === null ? '' : html`<p>Used by the authorization receipt <a class="mono digest" href="/console/receipts/${a.consumed_by_receipt_sha256}">${a.consumed_by_receipt_sha256}</a>.</p>`}`,
  );
}

/** Lifetimes offered to an approver: common ones under the policy's maximum, and the maximum. */
export function expiryChoices(maxMs: number): number[] {
  const common = [60_000, 5 * 60_000, 15 * 60_000, 60 * 60_000, 4 * 60 * 60_000, 24 * 60 * 60_000];
  return [...new Set([...common.filter((ms) => ms < maxMs), maxMs])];
}

/** The history's outcome filters (each a stored status of a decided request), and all of them. */
export const HISTORY_FILTERS = ['all', 'consumed', 'approved', 'denied'] as const;
export type HistoryFilter = (typeof HISTORY_FILTERS)[number];
const HISTORY_LABELS: Record<HistoryFilter, string> = {
  all: 'All decisions',
  consumed: 'Approved and used',
  approved: 'Approved, not used',
  denied: 'Denied',
};

/** One history page as the approvals service answers it (`approvalHistory`). */
export interface HistoryList {
  readonly status: Exclude<HistoryFilter, 'all'> | null;
  readonly items: readonly HistoryItem[];
  readonly next_cursor: string | null;
  readonly previous_cursor: string | null;
  readonly total: number;
  readonly total_capped: boolean;
}
export type HistoryItem = ApprovalItem & { readonly led_to: ReturnType<typeof historyReceipts> };

/** Plain-language words for a receipt's outcome (the receipt's own word stays on its page). */
const EXECUTION_OUTCOMES: Record<string, string> = {
  verified_succeeded: 'Executed: success, verified',
  verified_failed_no_effect: 'Executed: failed, verified to have had no effect',
  indeterminate: 'Executed: outcome unknown (indeterminate)',
  rejected: 'Execution report rejected: it does not prove the outcome',
};
const RECONCILED: Record<'verified_succeeded' | 'verified_failed_no_effect', string> = {
  verified_succeeded: 'Reconciled: the effect happened (success, verified)',
  verified_failed_no_effect: 'Reconciled: verified to have had no effect',
};

/** A receipt step: what it says, a link to the receipt and one to its offline bundle. */
function receiptStep(text: string, what: string, sha: string | null, approvalId: string): Html {
  const links =
    sha === null
      ? html` <span class="muted">(receipt archived)</span>`
      : html` <a class="mono" href="/console/receipts/${sha}"
            >${what} ${sha.slice(0, 12)}…<span class="visually-hidden"> of approval ${approvalId}</span></a
          >
          ·
          <a href="/console/receipts/${sha}/bundle" download
            >bundle<span class="visually-hidden"> of the ${what} ${sha.slice(0, 12)}…</span></a
          >`;
  return html`<li>${text}${links}</li>`;
}

/** What a decided approval led to, step by step, each receipt linked with its bundle. */
function ledTo(a: HistoryItem, now: number): Html {
  const l = a.led_to;
  if (a.status === 'denied')
    return html`<ul class="steps">
      <li>Nothing: no call was authorized.</li>
    </ul>`;
  if (l.authorization_receipt_sha256 === null) {
    const unused =
      a.expires_at_unix_ms === null
        ? 'Not used yet.'
        : a.expires_at_unix_ms <= now
          ? `Not used; expired at ${isoTime(a.expires_at_unix_ms)}.`
          : `Not used yet; valid until ${isoTime(a.expires_at_unix_ms)}.`;
    return html`<ul class="steps">
      <li>${unused}</li>
    </ul>`;
  }
  const steps: Html[] = [
    receiptStep('Authorized', 'authorization receipt', l.authorization_receipt_sha256, a.approval_id),
  ];
  const op = l.operation;
  if (op === null) {
    steps.push(html`<li>Not executed yet: no executor has claimed the call.</li>`);
  } else if (op.status === 'pending' && l.execution === null) {
    steps.push(html`<li>Executing: claimed by an executor, no report yet.</li>`);
  } else {
    if (l.execution !== null) {
      const text =
        l.execution.outcome === null
          ? 'Executed'
          : (EXECUTION_OUTCOMES[l.execution.outcome] ?? `Executed: ${l.execution.outcome}`);
      steps.push(receiptStep(text, 'execution receipt', l.execution.sha256, a.approval_id));
    } else if (op.status !== 'pending') {
      steps.push(html`<li>No execution report before the executor's lease ran out.</li>`);
    }
    if (op.status === 'reconciliation_required' || op.status === 'escalated') {
      steps.push(
        html`<li>
          <strong>Awaiting reconciliation</strong>: someone must check whether the effect
          happened${
            op.reconciliation_deadline_unix_ms === null
              ? ''
              : html` (by ${isoTime(op.reconciliation_deadline_unix_ms)})`
          }${op.escalated_at_unix_ms === null ? '' : html`; escalated at ${isoTime(op.escalated_at_unix_ms)}`}.
        </li>`,
      );
    }
    if (l.reconciliation !== null) {
      steps.push(
        receiptStep(
          RECONCILED[l.reconciliation.resolution],
          'reconciliation receipt',
          l.reconciliation.sha256,
          a.approval_id,
        ),
      );
    }
  }
  return html`<ul class="steps">
    ${steps}
  </ul>`;
}

/** Keyset links both ways: newer (previous), the newest (first) and older (next) pages. */
function historyPager(base: string, list: HistoryList, paged: boolean): Html {
  const sep = base.includes('?') ? '&' : '?';
  if (list.next_cursor === null && list.previous_cursor === null && !paged) return html``;
  return html`<nav class="pager" aria-label="History pages">
    ${paged ? html`<a href="${base}" rel="first">First page</a>` : ''}
    ${list.previous_cursor === null ? '' : html`<a href="${base}${sep}cursor=${list.previous_cursor}" rel="prev">Previous page</a>`}
    <span>${list.items.length} on this page</span>
    ${list.next_cursor === null ? '' : html`<a href="${base}${sep}cursor=${list.next_cursor}" rel="next">Next page</a>`}
  </nav>`;
}

export function historyPage(chrome: Chrome, list: HistoryList, paged: boolean, now: number): Html {
  const f = new Findings();
  const filter: HistoryFilter = list.status ?? 'all';
  const base = filter === 'all' ? '/console/history' : `/console/history?status=${filter}`;
  const rows = list.items.map(
    (a) =>
      html`<tr>
        <th scope="row"><a href="/console/approvals/${a.approval_id}" class="mono">${a.approval_id}</a></th>
        <td class="mono">${a.preview === null ? '' : shown(a.preview.tool_name, f)}</td>
        <td><span class="effect effect-${a.effect}">${a.effect}</span></td>
        <td>
          <strong>${a.status === 'denied' ? 'Denied' : 'Approved'}</strong>
          by
          ${a.first_approved_by === null ? '' : html`<span class="mono">${a.first_approved_by}</span> then `}<span
            class="mono"
            >${a.decided_by ?? ''}</span
          ><br />${a.decided_at_unix_ms === null ? '' : isoTime(a.decided_at_unix_ms)}
          ${a.decision_reason === null ? '' : html`<br />Reason: ${shown(a.decision_reason, f)}`}
        </td>
        <td>${ledTo(a, now)}</td>
      </tr>`,
  );
  const total = list.total_capped
    ? `More than ${list.total.toLocaleString('en-US')}`
    : list.total.toLocaleString('en-US');
  const plural = list.total === 1 && !list.total_capped ? '' : 's';
  const counted =
    filter === 'all'
      ? `${total} decided approval${plural}.`
      : `${total} decided approval${plural} (${HISTORY_LABELS[filter].toLowerCase()}).`;
  return layout(
    'History',
    chrome,
    html`<h1>Decided approvals</h1>
      ${warning(f)}
      <p>Newest decision first, each with the receipts it led to.</p>
      <nav class="tabs" aria-label="Outcome">
        ${HISTORY_FILTERS.map((h) => html`<a href="${h === 'all' ? '/console/history' : `/console/history?status=${h}`}" ${h === filter ? raw('aria-current="page"') : ''}>${HISTORY_LABELS[h]}</a>`)}
      </nav>
      <h2>${HISTORY_LABELS[filter]}</h2>
      <p id="history-total">${counted}</p>
      ${list.items.length === 0 && !paged ? html`<p>None.</p>` : ''} ${historyPager(base, list, paged)}
      <table aria-describedby="history-total">
        <thead>
          <tr>
            <th scope="col">Approval</th>
            <th scope="col">Tool</th>
            <th scope="col">Effect</th>
            <th scope="col">Decision</th>
            <th scope="col">What it led to</th>
          </tr>
        </thead>
        <tbody>
          ${rows}
        </tbody>
      </table>
      ${historyPager(base, list, paged)}`,
  );
}

export function receiptPage(
  chrome: Chrome,
  sha: string,
  r: {
    readonly kind: string;
    readonly outcome: string;
    readonly receipt: unknown;
    readonly created_at_unix_ms: number;
    readonly replay: { readonly ok: boolean } | null;
  },
): Html {
  const f = new Findings();
  const body = jsonHtml(r.receipt, f);
  return layout(
    `Receipt ${sha.slice(0, 12)}`,
    chrome,
    html`<p><a href="/console/history">← History</a></p>
      <h1>Receipt</h1>
      ${warning(f)}
      <dl>
        <dt>SHA-256</dt>
        <dd class="mono digest">${sha}</dd>
        <dt>Kind</dt>
        <dd>${r.kind}</dd>
        <dt>Outcome</dt>
        <dd><strong>${r.outcome}</strong></dd>
        <dt>Stored at</dt>
        <dd>${isoTime(r.created_at_unix_ms)}</dd>
        <dt>Replay</dt>
        <dd>
          ${r.replay === null ? 'not applicable' : r.replay.ok ? 'the decision replays to the same receipt' : 'replay differs: investigate'}
        </dd>
      </dl>
      <pre aria-label="receipt">${raw(body)}</pre>
      <p class="muted">The same document as JSON: <code>GET /v1/receipts/${sha}</code> with an API key.</p>
      <p>
        <a href="/console/receipts/${sha}/bundle" download>Download the offline bundle</a>
        (signature, inputs, log proof; check it anywhere with <code>npx writ verify</code>).
      </p>`,
  );
}

// ---------------------------------------------------------------------------------------------
// Security (tenant admin): GET /v1/metrics as a page

export type SecurityMetrics = Awaited<ReturnType<typeof getMetrics>>;
/** The windows the page offers, as `?window=` values and their length. */
export const SECURITY_WINDOWS = { '1h': 3_600_000, '24h': 86_400_000, '7d': 604_800_000 } as const;
export type SecurityWindow = keyof typeof SECURITY_WINDOWS;
const WINDOW_LABELS: Readonly<Record<SecurityWindow, string>> = {
  '1h': 'Last hour',
  '24h': 'Last 24 hours',
  '7d': 'Last 7 days',
};

/** A two-column table of counts, or "None." */
function countTable(caption: string, head: string, rows: readonly (readonly [string, number])[]): Html {
  if (rows.length === 0) return html`<p>${caption}: none.</p>`;
  return html`<table>
    <caption>
      ${caption}
    </caption>
    <thead>
      <tr>
        <th scope="col">${head}</th>
        <th scope="col" class="num">Count</th>
      </tr>
    </thead>
    <tbody>
      ${rows.map(
        ([name, n]) =>
          html`<tr>
            <th scope="row" class="mono">${name}</th>
            <td class="num">${n.toLocaleString('en-US')}</td>
          </tr>`,
      )}
    </tbody>
  </table>`;
}

/** Said beside a section whose count stopped at its bound. */
function partialNote(complete: boolean): Html | string {
  return complete
    ? ''
    : html`<p class="warn">Partial: this count stopped at its bound (the newest rows of the window).</p>`;
}

export function securityPage(chrome: Chrome, m: SecurityMetrics, window: SecurityWindow): Html {
  const receiptRows: [string, number][] = [];
  for (const [kind, outcomes] of Object.entries(m.receipts.by_kind)) {
    for (const [outcome, n] of Object.entries(outcomes)) receiptRows.push([`${kind} ${outcome}`, n]);
  }
  const o = m.operations;
  const a = m.approvals;
  const r = m.rate_limited;
  return layout(
    'Security',
    chrome,
    html`<h1>Security decisions</h1>
      <nav class="tabs" aria-label="Window">
        ${(Object.keys(SECURITY_WINDOWS) as SecurityWindow[]).map((w) => html`<a href="/console/security?window=${w}" ${w === window ? raw('aria-current="page"') : ''}>${WINDOW_LABELS[w]}</a>`)}
      </nav>
      <p>
        ${WINDOW_LABELS[window]}: ${isoTime(m.window.from_unix_ms)} to ${isoTime(m.window.to_unix_ms)}.
        Counted from this tenant's stored receipts and requests; receipts already archived to R2 are not
        counted.
      </p>
      <h2>Decisions and outcomes</h2>
      ${partialNote(m.receipts.complete)}
      ${countTable('Receipts by kind and outcome', 'Receipt', receiptRows)}
      <h2>Denials by violation</h2>
      ${partialNote(m.denials.complete)}
      ${countTable(
        `Violations of ${m.denials.receipts_read.toLocaleString('en-US')} denied authorization${m.denials.receipts_read === 1 ? '' : 's'}`,
        'Violation',
        m.denials.by_violation.map((v) => [v.code, v.n] as const),
      )}
      <h2>Approvals</h2>
      ${partialNote(a.complete)}
      ${countTable(
        'Requested in the window, by status now',
        'Status',
        Object.entries(a.requested).filter(([k]) => k !== 'expired'),
      )}
      <p>Of the pending requests, ${a.requested.expired ?? 0} expired without a decision.</p>
      ${countTable('Decided in the window, by status now', 'Status', Object.entries(a.decided))}
      <h2>Operations now</h2>
      ${partialNote(o.complete)} ${countTable('Open operations', 'State', Object.entries(o.open))}
      <p>
        ${o.oldest_open_age_ms === null ? 'No open operation.' : html`The oldest open operation was last updated ${duration(o.oldest_open_age_ms)} ago (${isoTime(o.oldest_open_updated_at_unix_ms ?? 0)}).`}
        ${o.overdue_reconciliations === 0 ? 'No reconciliation is overdue.' : html`<strong>${o.overdue_reconciliations} reconciliation${o.overdue_reconciliations === 1 ? ' is' : 's are'} past ${o.overdue_reconciliations === 1 ? 'its' : 'their'} deadline</strong> and not yet escalated.`}
      </p>
      <h2>Contracts</h2>
      ${partialNote(m.contracts.complete)}
      <p>${m.contracts.quarantined} quarantined contract${m.contracts.quarantined === 1 ? '' : 's'}.</p>
      <h2>Writes refused by the rate limit</h2>
      <p>
        ${r.total.toLocaleString('en-US')} refused since ${isoTime(r.from_minute_unix_ms)} (whole minutes; a
        refusal stores no receipt, so these are the limiter's counts):
        ${r.limited_by.principal.toLocaleString('en-US')} by a principal's own limit,
        ${r.limited_by.tenant.toLocaleString('en-US')} by the tenant's aggregate limit.
      </p>
      ${countTable(
        'Most refused principals (* counts principals beyond 100 in one minute)',
        'Principal',
        r.by_principal.map((p) => [p.principal_id, p.n] as const),
      )}
      ${r.principals_left_out > 0 ? html`<p>And ${r.principals_left_out} more principals.</p>` : ''}`,
  );
}
