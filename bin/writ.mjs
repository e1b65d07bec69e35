#!/usr/bin/env node
// The `writ` command: loads the TypeScript CLI through tsx and gives it Node's file system and
// streams. This file is the only place the CLI touches Node.
import { open, readFile, writeFile } from 'node:fs/promises';
import process from 'node:process';
import { URL } from 'node:url';
import { register } from 'tsx/esm/api';

register();
const { main } = await import(new URL('../src/cli/writ.ts', import.meta.url).href);
process.exitCode = await main(process.argv.slice(2), {
  readFile: async (path) => new Uint8Array(await readFile(path)),
  // Read in pieces from where the last read stopped (`writ tenant upload`: one part in memory).
  openFile: async (path) => {
    const handle = await open(path, 'r');
    return {
      read: async (into) => (await handle.read(into, 0, into.byteLength, null)).bytesRead,
      size: async () => (await handle.stat()).size,
      close: () => handle.close(),
    };
  },
  // Owner-only: `writ conformance keygen` writes a private key ring.
  writeFile: (path, text) => writeFile(path, text, { mode: 0o600 }),
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  env: process.env,
});
