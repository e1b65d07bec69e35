/**
 * The OpenAPI document and the reference page: the document matches its committed snapshot
 * (docs/openapi.json; `npm run openapi` rewrites it), every route the app registers under `/v1`
 * is documented (and nothing else is), every documented error code is a real wire code, and the
 * page loads nothing from another origin under a strict Content-Security-Policy.
 */
import { describe, expect, it } from 'vitest';
import committed from '../../../docs/openapi.json';
import { app } from '../../../src/http/app.js';
import { CSP } from '../../../src/http/docs-page.js';
import { openApiDocument } from '../../../src/http/openapi.js';
import { call, workerFetch } from '../platform/harness.js';

const doc = openApiDocument() as {
  paths: Record<
    string,
    Record<
      string,
      {
        responses: Record<string, unknown>;
        parameters?: { name: string; in: string; 'x-writ-rest-of-path'?: boolean }[];
      }
    >
  >;
};

describe('OpenAPI document', () => {
  it('matches the committed snapshot (run `npm run openapi` after changing a route or schema)', () => {
    expect(doc).toEqual(committed);
  });

  it('documents every /v1 route the app registers, and only those', () => {
    // Wildcard routes too (`GET /v1/log/tile/*`): the document names their `*` as a path parameter
    // marked `x-writ-rest-of-path`, spelled `*` again here.
    const registered = new Set(
      app.routes
        .filter((r) => r.path.startsWith('/v1/') && r.method !== 'ALL')
        .map((r) => `${r.method.toLowerCase()} ${r.path.replace(/:([a-z_0-9]+)/g, '{$1}')}`),
    );
    const documented = new Set(
      Object.entries(doc.paths).flatMap(([path, methods]) =>
        Object.entries(methods).map(([m, op]) => {
          const rest = op.parameters?.find((p) => p.in === 'path' && p['x-writ-rest-of-path'] === true);
          return `${m} ${rest === undefined ? path : path.replace(`{${rest.name}}`, '*')}`;
        }),
      ),
    );
    // The document describes itself too.
    documented.add('get /v1/openapi.json');
    expect([...registered].sort()).toEqual([...documented].sort());
  });

  it('is served at /v1/openapi.json without a key', async () => {
    const r = await call('GET', '/v1/openapi.json');
    expect(r.status).toBe(200);
    expect(r.body).toEqual(committed);
  });
});

describe('reference page', () => {
  it('is served at /docs with a strict CSP, its own stylesheet and no script or foreign asset', async () => {
    const page = await workerFetch('https://writ.test/docs');
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toBe(CSP);
    const text = await page.text();
    expect(text).toContain('POST</span> /v1/authorize');
    expect(text).not.toMatch(/<script/i);
    expect(text).not.toMatch(/(src|href)="https?:/i);
    const css = await workerFetch('https://writ.test/docs/style.css');
    expect(css.headers.get('content-type')).toMatch(/^text\/css/);
  });
});
