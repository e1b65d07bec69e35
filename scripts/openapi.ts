/**
 * `npm run openapi`: write the OpenAPI 3.1 document (src/http/openapi.ts) to docs/openapi.json,
 * the committed snapshot the tests compare against. Run it after changing a route or a schema.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { openApiDocument } from '../src/http/openapi.js';

const out = path.join(import.meta.dirname, '..', 'docs', 'openapi.json');
writeFileSync(out, `${JSON.stringify(openApiDocument(), null, 2)}\n`);
console.log(`wrote ${path.relative(process.cwd(), out)}`);
