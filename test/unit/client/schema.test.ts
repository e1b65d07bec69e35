import { readFileSync } from 'node:fs';
import path from 'node:path';
import openapiTS, { COMMENT_HEADER, astToString } from 'openapi-typescript';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../../..');

describe('src/client/schema.d.ts', () => {
  it('is what `npm run client:types` generates from docs/openapi.json (run it after changing the API)', async () => {
    const document = readFileSync(path.join(ROOT, 'docs/openapi.json'), 'utf8');
    const generated = `${COMMENT_HEADER}${astToString(await openapiTS(document))}`;
    const committed = readFileSync(path.join(ROOT, 'src/client/schema.d.ts'), 'utf8');
    expect(committed === generated, 'src/client/schema.d.ts is stale: run `npm run client:types`').toBe(true);
  });
});
