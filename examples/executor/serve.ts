/**
 * Serve the example executor from Node:
 *
 *   npx writ conformance keygen --ring kit-ring.json --keys kit-keys.json
 *   npx tsx examples/executor/serve.ts --keys kit-keys.json --release "conformance-executor 1.0" --port 8788
 *   npx writ conformance executor http://127.0.0.1:8788/ --ring kit-ring.json --release "conformance-executor 1.0"
 *
 * In production `--keys` is the issuer's published key set (`GET /.well-known/writ-keys`, saved).
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';
import { parsePublicKeySetText } from '../../src/verify/index.js';
import { createExecutor } from './executor.js';

const { values } = parseArgs({
  options: {
    keys: { type: 'string' },
    release: { type: 'string' },
    principal: { type: 'string' },
    port: { type: 'string', default: '8788' },
  },
});
if (values.keys === undefined || values.release === undefined) {
  console.error(
    'usage: serve.ts --keys <keys.json> --release <executor release> [--principal <id>] [--port 8788]',
  );
  process.exit(2);
}
const keys = parsePublicKeySetText(readFileSync(values.keys, 'utf8'));
if (!keys.ok) {
  console.error(`not a key set: ${keys.error.message}`);
  process.exit(2);
}
const handle = createExecutor({
  keys: keys.value,
  audience: {
    executor_release: values.release,
    ...(values.principal === undefined ? {} : { executor_principal_id: values.principal }),
  },
});

createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const request = new Request(`http://localhost${req.url ?? '/'}`, {
      method: req.method ?? 'GET',
      headers: Object.entries(req.headers).flatMap(([k, v]): [string, string][] =>
        typeof v === 'string' ? [[k, v]] : [],
      ),
      ...(req.method === 'POST' ? { body: Buffer.concat(chunks) } : {}),
    });
    handle(request)
      .then(async (response) => {
        res.writeHead(response.status, { 'content-type': 'application/json' });
        res.end(Buffer.from(await response.arrayBuffer()));
      })
      .catch(() => {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end('{"accepted":false,"reason":"internal"}');
      });
  });
}).listen(Number(values.port), '127.0.0.1', () => {
  console.log(`example executor on http://127.0.0.1:${values.port}/ (release ${values.release})`);
});
