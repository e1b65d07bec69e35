/**
 * `GET /v1/openapi.json` and the human-readable reference at `GET /docs` (with its stylesheet at
 * `GET /docs/style.css`). The page is rendered on the server from the same OpenAPI document:
 * no script, no third-party asset, and a Content-Security-Policy that allows only its own
 * stylesheet.
 *
 * Guarantees: every value written into the page is HTML-escaped; the page loads nothing from
 * another origin; framing is refused.
 */
import { Hono } from 'hono';
import { html, raw } from 'hono/html';
import type { AppEnv } from './env.js';
import { openApiDocument } from './openapi.js';

let cached: { readonly json: string; readonly doc: Record<string, unknown> } | null = null;
function documentText() {
  if (cached === null) {
    const doc = openApiDocument();
    cached = { json: JSON.stringify(doc), doc };
  }
  return cached;
}

export const CSP =
  "default-src 'none'; style-src 'self'; img-src 'none'; script-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const STYLE = `
body{font:16px/1.5 system-ui,sans-serif;margin:0 auto;max-width:72rem;padding:1rem 1.5rem;color:#1b1b1b;background:#fff}
h1{font-size:1.6rem}h2{font-size:1.15rem;margin:2rem 0 .25rem;font-family:ui-monospace,monospace}
.method{display:inline-block;min-width:3.5rem;font-weight:700}
.get{color:#065f46}.post{color:#1e40af}.put{color:#92400e}
details{margin:.25rem 0 .5rem}summary{cursor:pointer}
pre{background:#f4f4f5;padding:.75rem;overflow:auto;font-size:.85rem;border-radius:4px}
table{border-collapse:collapse}td,th{padding:.2rem .6rem;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}
nav ul{columns:2;list-style:none;padding:0}a{color:#1e40af}
@media (prefers-color-scheme:dark){body{background:#111;color:#eee}pre{background:#222}a,.post{color:#93c5fd}.get{color:#6ee7b7}.put{color:#fcd34d}}
`;

type Op = {
  summary?: string;
  'x-writ-auth'?: unknown;
  parameters?: { name: string; in: string; required: boolean }[];
  // One media type per body: JSON, or NDJSON for the tenant export and import (shards).
  requestBody?: { required: boolean; content: Record<string, { schema: unknown }> };
  responses: Record<string, { description: string; content?: Record<string, { schema: unknown }> }>;
};

const anchor = (method: string, path: string) => `${method}-${path.replace(/[^a-z0-9]+/gi, '-')}`;
const who = (auth: unknown) =>
  typeof auth === 'string'
    ? auth.replace('_', ' ')
    : `role ${((auth as { roles?: string[] })?.roles ?? []).join(' or ')}`;

function page() {
  const doc = documentText().doc as {
    info: { description: string };
    paths: Record<string, Record<string, Op>>;
  };
  const ops = Object.entries(doc.paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, op]) => ({ path, method, op })),
  );
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>Writ HTTP API reference</title>
        <link rel="stylesheet" href="/docs/style.css" />
      </head>
      <body>
        <header>
          <h1>Writ HTTP API reference</h1>
          <p>${doc.info.description}</p>
          <p>Machine-readable: <a href="/v1/openapi.json">/v1/openapi.json</a> (OpenAPI 3.1).</p>
        </header>
        <nav aria-label="Endpoints">
          <ul>
            ${ops.map(
              ({ path, method }) =>
                html`<li>
                  <a href="#${anchor(method, path)}"
                    ><span class="method ${method}">${method.toUpperCase()}</span> ${path}</a
                  >
                </li>`,
            )}
          </ul>
        </nav>
        <main>
          ${ops.map(
            ({ path, method, op }) =>
              html`<section id="${anchor(method, path)}" aria-labelledby="${anchor(method, path)}-h">
                <h2 id="${anchor(method, path)}-h">
                  <span class="method ${method}">${method.toUpperCase()}</span> ${path}
                </h2>
                <p>${op.summary ?? ''}. Caller: ${who(op['x-writ-auth'])}.</p>
                ${
                  (op.parameters ?? []).length > 0
                    ? html`<table>
                        <caption>
                          Parameters
                        </caption>
                        <tr>
                          <th scope="col">name</th>
                          <th scope="col">in</th>
                          <th scope="col">required</th>
                        </tr>
                        ${(op.parameters ?? []).map(
                          (p) =>
                            html`<tr>
                              <td>${p.name}</td>
                              <td>${p.in}</td>
                              <td>${p.required ? 'yes' : 'no'}</td>
                            </tr>`,
                        )}
                      </table>`
                    : ''
                }
                ${
                  op.requestBody !== undefined
                    ? html`<details>
                        <summary>Request body${op.requestBody.required ? '' : ' (optional)'}</summary>
                        <pre>
${JSON.stringify(Object.values(op.requestBody.content)[0]?.schema ?? {}, null, 2)}</pre>
                      </details>`
                    : ''
                }
                <table>
                  <caption>
                    Responses
                  </caption>
                  <tr>
                    <th scope="col">status</th>
                    <th scope="col">meaning</th>
                  </tr>
                  ${Object.entries(op.responses).map(
                    ([status, r]) =>
                      html`<tr>
                        <td>${status}</td>
                        <td>${r.description}</td>
                      </tr>`,
                  )}
                </table>
                ${Object.entries(op.responses)
                  .filter(([s]) => s.startsWith('2') || s === '403')
                  .map(
                    ([status, r]) =>
                      html`<details>
                        <summary>${status} body</summary>
                        <pre>${JSON.stringify(Object.values(r.content ?? {})[0]?.schema ?? {}, null, 2)}</pre>
                      </details>`,
                  )}
              </section>`,
          )}
        </main>
      </body>
    </html>`;
}

export const docsRoutes = new Hono<AppEnv>();

docsRoutes.get('/v1/openapi.json', (c) => {
  c.header('content-type', 'application/json; charset=utf-8');
  c.header('cache-control', 'public, max-age=300');
  return c.body(documentText().json);
});

docsRoutes.get('/docs', async (c) => {
  c.header('content-security-policy', CSP);
  c.header('x-content-type-options', 'nosniff');
  c.header('referrer-policy', 'no-referrer');
  return c.html(page());
});

docsRoutes.get('/docs/style.css', (c) => {
  c.header('content-type', 'text/css; charset=utf-8');
  c.header('x-content-type-options', 'nosniff');
  return c.body(raw(STYLE).toString());
});
