/**
 * Review of the transparency log against the C2SP specifications, byte for byte: known answers
 * from the specs themselves (signed-note, tlog-checkpoint, tlog-tiles, tlog-proof, merkle-tree)
 * and from reference implementations (golang.org/x/mod sumdb/note and sumdb/tlog,
 * transparency-dev/trillian-tessera api/layout, the RFC 6962 eight-leaf vectors), and what Writ
 * writes read back by a reader written here from the specs with Node's own SHA-256, Ed25519 and
 * base64 (no code shared with src/core/log), as golang.org/x/mod/sumdb/note would read it.
 */
import { createHash, createPublicKey, verify as nodeVerify } from 'node:crypto';
import { describe, expect, it, vi } from 'vitest';
import { parseCheckpointBody, signCheckpoint } from '../../../../src/core/log/checkpoint.js';
import {
  inclusionProof,
  consistencyProof,
  leafHash,
  verifyInclusion,
} from '../../../../src/core/log/merkle.js';
import {
  ed25519Signer,
  ed25519Verifier,
  openNote,
  parseNote,
  parseSignerKey,
  parseVerifierKey,
  serializeNote,
  signNote,
  verifierKey,
} from '../../../../src/core/log/note.js';
import { parseTlogProof, serializeTlogProof } from '../../../../src/core/log/proof.js';
import { checkpointBodyOf } from '../../../../src/core/log/sequencer.js';
import {
  EMPTY_LOG_STATE,
  appendLeaves,
  encodeEntryBundle,
  entryBundlePath,
  hashReaderFromTiles,
  parseEntryBundle,
  parseTilePath,
  tilePath,
} from '../../../../src/core/log/tiles.js';
import merkleVectors from '../../../data/tlog/rfc6962-merkle.json';
import noteVectors from '../../../data/tlog/signed-note.json';
import { RefTree, leafData, refLeafHash } from './reference.js';

vi.setConfig({ testTimeout: 300_000 });

function must<T>(r: { ok: true; value: T } | { ok: false; error: { message: string } }): T {
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}
const reason = (r: { ok: boolean; error?: { reason: string } }): string =>
  r.ok ? 'accepted' : r.error!.reason;

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
const fromHex = (h: string): Uint8Array => new Uint8Array(Buffer.from(h, 'hex'));
const b64 = (h: string): string => Buffer.from(h, 'hex').toString('base64');

const { goNote } = noteVectors;
const leaves = merkleVectors.leaves.map(fromHex);

/**
 * A signed-note reader written from C2SP signed-note alone, on Node's crypto: the text ends at
 * the last blank line, each signature line is U+2014, space, name, space, base64(key ID ||
 * signature); a line counts when its name and key ID are the known key's (key ID = SHA-256(name
 * || 0x0A || 0x01 || public key)[:4]) and the Ed25519 signature verifies over the text.
 */
function independentOpen(
  note: string,
  name: string,
  publicKey: Uint8Array,
): { text: string; verified: number; unknown: number } {
  const bytes = Buffer.from(note, 'utf8');
  const split = bytes.lastIndexOf('\n\n');
  if (split < 0) throw new Error('no blank line');
  const text = bytes.subarray(0, split + 1);
  const sigLines = bytes.subarray(split + 2).toString('utf8');
  if (!sigLines.endsWith('\n')) throw new Error('signature block must end in newline');
  const keyId = createHash('sha256')
    .update(Buffer.concat([Buffer.from(name, 'utf8'), Buffer.from([0x0a, 0x01]), publicKey]))
    .digest()
    .subarray(0, 4);
  const spki = Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), publicKey]);
  const key = createPublicKey({ key: spki, format: 'der', type: 'spki' });
  let verified = 0;
  let unknown = 0;
  for (const line of sigLines.slice(0, -1).split('\n')) {
    const raw = Buffer.from(line, 'utf8');
    // U+2014 EM DASH is E2 80 94 in UTF-8, then one space.
    if (raw.subarray(0, 4).toString('hex') !== 'e2809420') throw new Error('bad signature prefix');
    const [n, sig64, ...extra] = line.slice(2).split(' ');
    if (extra.length > 0 || !n || !sig64) throw new Error('bad signature line');
    const sig = Buffer.from(sig64, 'base64');
    if (sig.toString('base64') !== sig64 || sig.length < 5) throw new Error('bad base64');
    if (n !== name || !sig.subarray(0, 4).equals(keyId)) {
      unknown++;
      continue;
    }
    if (!nodeVerify(null, text, key, sig.subarray(4))) throw new Error('signature does not verify');
    verified++;
  }
  return { text: text.toString('utf8'), verified, unknown };
}

describe('signed-note (C2SP signed-note, golang.org/x/mod/sumdb/note)', () => {
  const peterSigner = must(parseSignerKey(goNote.peterSignerKey));
  const peter = must(parseVerifierKey(goNote.peterVerifierKey));

  it('computes Go’s key IDs and writes Go’s verifier key and signature line byte for byte', () => {
    // note_test.go: PeterNeumann+c74f20a3, EnochRoot+af0cfe78.
    expect(peterSigner.keyId.toString(16)).toBe('c74f20a3');
    expect(verifierKey(peterSigner)).toBe(goNote.peterVerifierKey);
    const signed = must(signNote(goNote.text, [peterSigner]));
    expect(signed).toBe(`${goNote.text}\n${goNote.peterSignature}`);
    // The line: U+2014 (E2 80 94), space, name, space, base64(key ID || 64-byte signature).
    const line = Buffer.from(goNote.peterSignature, 'utf8');
    expect(line.subarray(0, 4).toString('hex')).toBe('e2809420');
    const sig = Buffer.from(goNote.peterSignature.trim().split(' ')[2]!, 'base64');
    expect(sig.length).toBe(4 + 64);
    expect(sig.subarray(0, 4).toString('hex')).toBe('c74f20a3');
  });

  it('a note Writ signs reads back with an independent reader (Node crypto, spec rules only)', () => {
    const text = 'writ.example/log/t\n3\n' + b64(merkleVectors.roots[2]!) + '\n';
    const signer = must(ed25519Signer('writ.example/log/t', new Uint8Array(32).fill(5)));
    const note = must(signNote(text, [signer]));
    const read = independentOpen(note, signer.name, signer.publicKey);
    expect(read).toEqual({ text, verified: 1, unknown: 0 });
    // And Go's own note, Writ-signed with Go's key, reads back the same way.
    const go = must(signNote(goNote.text, [peterSigner]));
    expect(independentOpen(go, 'PeterNeumann', peter.publicKey)).toEqual({
      text: goNote.text,
      verified: 1,
      unknown: 0,
    });
  });

  it('ignores signatures by unknown keys and rejects a note no known key signed', () => {
    const both = `${goNote.text}\n${goNote.peterSignature}${goNote.enochSignature}`;
    const opened = must(openNote(both, [peter]));
    expect(opened.verified.map((s) => s.name)).toEqual(['PeterNeumann']);
    expect(opened.unverified.map((s) => [s.name, s.keyId.toString(16)])).toEqual([['EnochRoot', 'af0cfe78']]);
    const enochOnly = `${goNote.text}\n${goNote.enochSignature}`;
    expect(reason(openNote(enochOnly, [peter]))).toBe('unverified_note');
  });

  // Finding 1. C2SP signed-note: key names "MUST be non-empty and MUST NOT contain any Unicode
  // spaces or plus (U+002B) characters", and verifiers "MUST ignore signatures from unknown keys".
  // golang.org/x/mod's isValidName is exactly that (unicode.IsSpace = the White_Space property).
  // Writ used JavaScript's \s, which also matches U+FEFF (not a Unicode space), and capped names
  // at 256 characters, so a witness's cosignature under such a name made the whole note malformed.
  it('opens a note whose unknown cosigner’s name has U+FEFF or is long (Go accepts both)', () => {
    const sig = goNote.enochSignature.trim().split(' ')[2]!;
    for (const name of ['witness\ufeff.example', `witness.example/${'w'.repeat(300)}`]) {
      const note = `${goNote.text}\n${goNote.peterSignature}— ${name} ${sig}\n`;
      const opened = must(openNote(note, [peter]));
      expect(opened.verified.map((s) => s.name)).toEqual(['PeterNeumann']);
      expect(opened.unverified.map((s) => s.name)).toEqual([name]);
      // What parses also writes back unchanged (a cosigned note carried on).
      const parsed = must(parseNote(note));
      expect(must(serializeNote(parsed))).toBe(note);
    }
    // U+FEFF is not a space: a key of such a name is a key like any other.
    expect(must(ed25519Verifier('log\ufeff.example', peter.publicKey)).name).toBe('log\ufeff.example');
  });

  it('still refuses every Unicode space (Go’s unicode.IsSpace) and + in a signature line name', () => {
    const sig = goNote.enochSignature.trim().split(' ')[2]!;
    for (const sp of [
      '\u0085',
      '\u00a0',
      '\u1680',
      '\u2000',
      '\u200a',
      '\u2028',
      '\u2029',
      '\u202f',
      '\u205f',
      '\u3000',
      '+',
    ]) {
      const note = `${goNote.text}\n${goNote.peterSignature}— w${sp}x ${sig}\n`;
      expect([sp, reason(openNote(note, [peter]))]).toEqual([sp, 'malformed_note']);
    }
  });

  it('allows blank lines inside the text; the last blank line separates the signatures', () => {
    const text = 'a\n\nb\n';
    const signer = must(ed25519Signer('k.example', new Uint8Array(32).fill(1)));
    const note = must(signNote(text, [signer]));
    expect(must(openNote(note, [must(ed25519Verifier('k.example', signer.publicKey))])).text).toBe(text);
    expect(independentOpen(note, 'k.example', signer.publicKey).text).toBe(text);
  });
});

describe('checkpoint body (C2SP tlog-checkpoint)', () => {
  it('writes origin, decimal size, base64 root, each ending in newline, no extension line', () => {
    const state = must(appendLeaves(EMPTY_LOG_STATE, leaves.map(leafHash))).state;
    expect(must(checkpointBodyOf(state, 'writ.example/log/t'))).toBe(
      'writ.example/log/t\n8\nXcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyg=\n',
    );
    // The empty tree: size 0 and MTH({}) = SHA-256("") (RFC 6962, C2SP merkle-tree).
    expect(must(checkpointBodyOf(EMPTY_LOG_STATE, 'writ.example/log/t'))).toBe(
      'writ.example/log/t\n0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n',
    );
  });

  it('reads the spec example and extension lines; the log key name is the origin', () => {
    const cp = must(
      parseCheckpointBody(
        'example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\nx y\n',
      ),
    );
    expect([cp.origin, cp.size, cp.extensions]).toEqual(['example.com/behind-the-sofa', 20852163, ['x y']]);
    for (const bad of [
      'o\n08\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n',
      'o\n8\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n\n',
      '\n8\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n',
      'o\n8\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=',
    ]) {
      expect(reason(parseCheckpointBody(bad))).toBe('malformed_checkpoint');
    }
    const signer = must(ed25519Signer('other.example', new Uint8Array(32).fill(2)));
    const root = fromHex(merkleVectors.roots[0]!);
    expect(
      reason(signCheckpoint({ origin: 'o.example', size: 1, rootHash: root, extensions: [] }, [signer])),
    ).toBe('origin_mismatch');
  });
});

describe('tiles and entry bundles (C2SP tlog-tiles)', () => {
  it('writes the paths of golang.org/x/mod/sumdb/tlog and trillian-tessera', () => {
    // sumdb/tlog Tile.Path with the height element dropped (tlog-tiles fixes it at 8):
    // tile/8/0/x001/x234/067.p/1 and tile/3/4/x001/x234/067.p/1.
    expect(tilePath({ level: 0, index: 1234067, width: 1 })).toBe('tile/0/x001/x234/067.p/1');
    expect(tilePath({ level: 4, index: 1234067, width: 1 })).toBe('tile/4/x001/x234/067.p/1');
    // trillian-tessera api/layout/paths_test.go TestTilePath.
    for (const [level, index, width, path] of [
      [0, 0, 256, 'tile/0/000'],
      [0, 0, 255, 'tile/0/000.p/255'],
      [1, 0, 256, 'tile/1/000'],
      [1, 0, 1, 'tile/1/000.p/1'],
      [1, 0, 4, 'tile/1/000.p/4'],
      [15, 455667, 256, 'tile/15/x455/667'],
      [3, 1234567, 256, 'tile/3/x001/x234/567'],
      [15, 123456789, 256, 'tile/15/x123/x456/789'],
    ] as const) {
      expect(tilePath({ level, index, width })).toBe(path);
    }
    // TestEntriesPath.
    for (const [index, width, path] of [
      [0, 256, 'tile/entries/000'],
      [0, 8, 'tile/entries/000.p/8'],
      [255, 256, 'tile/entries/255'],
      [255, 253, 'tile/entries/255.p/253'],
      [256, 256, 'tile/entries/256'],
      [123456789000, 256, 'tile/entries/x123/x456/x789/000'],
    ] as const) {
      expect(entryBundlePath(index, width)).toBe(path);
    }
  });

  it('parses and refuses tile paths as trillian-tessera’s ParseTileLevelIndexWidth does', () => {
    for (const [path, level, index, width] of [
      ['tile/0/x001/x234/067', 0, 1234067, 256],
      ['tile/0/x001/x234/067.p/89', 0, 1234067, 89],
      ['tile/0/001', 0, 1, 256],
    ] as const) {
      expect(parseTilePath(path)).toEqual({ ok: true, value: { kind: 'tile', level, index, width } });
    }
    for (const path of [
      'tile/0/x001/x234/067.p/',
      'tile/0/x001/x234/067.p',
      'tile/0/x001/x234/',
      'tile/0/x001/x234',
      'tile/0/x001/',
      'tile/0/x001',
      'tile/1/x001/.p/abc',
      'tile/64/x001/002',
      'tile/-1/x001/002',
      'tile/abc/x001/002',
      'tile/8/001/002',
      'tile/8/x001/0002',
      'tile/8/x001/-002',
      'tile/8/x001/002.p/256',
      'tile/63/x999/x999/x999/x999/x999/x999/999.p/255',
      // Accepted by tessera (a uint64 index), beyond any tree of at most 2^53 - 1 leaves here.
      'tile/63/x999/x999/x999/x999/x999/999.p/255',
    ]) {
      expect([path, reason(parseTilePath(path))]).toEqual([path, 'invalid_path']);
    }
  });

  it('level 0 holds leaf hashes, level 1 the MTH of each full level-0 tile, bundles the entries', () => {
    // The eight RFC 6962 leaves: a partial level-0 tile of width 8, its hashes SHA-256(0x00 || d).
    const eight = must(appendLeaves(EMPTY_LOG_STATE, leaves.map(leafHash)));
    expect(eight.tiles.map(tilePath)).toEqual(['tile/0/000.p/8']);
    expect(hex(eight.tiles[0]!.hashes)).toBe(
      [
        '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d',
        '96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7',
        '0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7',
        '07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7',
        'bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b',
        '4271a26be0d8a84f0bd54c8c302e7cb3a3b5d1fa6780a40bcce2873477dab658',
        'b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f',
        '46f6ffadd3d06a09ff3c5860d2755c8b9819db7df44251788c7d8e3180de8eb1',
      ].join(''),
    );
    // Entry bundle: big-endian uint16 length, then the entry, for each entry.
    const bundle = must(encodeEntryBundle(leaves));
    expect(hex(bundle)).toBe(
      '0000' +
        '000100' +
        '000110' +
        '00022021' +
        '00023031' +
        '000440414243' +
        '00085051525354555657' +
        '0010606162636465666768696a6b6c6d6e6f',
    );
    // Each entry hashes to the corresponding level-0 tile hash.
    const back = must(parseEntryBundle(bundle, 8));
    expect(hex(Buffer.concat(back.map(leafHash)))).toBe(hex(eight.tiles[0]!.hashes));

    // 256 + 3 leaves: a full level-0 tile, a partial one of width 3, and a level-1 partial of
    // width 1 holding MTH(D[0:256]) (computed by the independent reference).
    const data = Array.from({ length: 259 }, (_, i) => leafData(i));
    const ref = new RefTree(data.map(refLeafHash));
    const r = must(appendLeaves(EMPTY_LOG_STATE, data.map(leafHash)));
    expect(r.tiles.map((t) => [tilePath(t), t.hashes.length])).toEqual([
      ['tile/0/000', 8192],
      ['tile/0/001.p/3', 96],
      ['tile/1/000.p/1', 32],
    ]);
    expect(hex(r.tiles[2]!.hashes)).toBe(hex(ref.mth(0, 256)));
  });
});

describe('Merkle proofs (C2SP merkle-tree example, RFC 6962)', () => {
  // The 7-entry example: leaves a..g, h = H(a,b), i = H(c,d), j = H(e,f), k = H(h,i), l = H(j,g).
  const d = leaves.slice(0, 7);
  const ref = new RefTree(d.map(refLeafHash));
  const [a, b, c, dd, , f, g] = d.map(refLeafHash) as [Uint8Array, ...Uint8Array[]];
  const h = ref.mth(0, 2);
  const i = ref.mth(2, 4);
  const j = ref.mth(4, 6);
  const k = ref.mth(0, 4);
  const l = ref.mth(4, 7);
  const tiles = must(appendLeaves(EMPTY_LOG_STATE, d.map(leafHash))).tiles;
  const read = hashReaderFromTiles(tiles);

  it('serves the spec’s inclusion proofs from tiles', () => {
    const want: [number, Uint8Array[]][] = [
      [0, [b!, i, l]],
      [3, [c!, h, l]],
      [4, [f!, g!, k]],
      [6, [j, k]],
    ];
    for (const [index, proof] of want) {
      expect(must(inclusionProof(index, 7, read)).map(hex)).toEqual(proof.map(hex));
      expect(verifyInclusion(leafHash(d[index]!), index, 7, proof, ref.mth(0, 7)).ok).toBe(true);
    }
    expect(hex(a)).toBe(merkleVectors.roots[0]);
  });

  it('serves the spec’s consistency proofs from tiles', () => {
    const want: [number, Uint8Array[]][] = [
      [3, [c!, dd!, h, l]],
      [4, [l]],
      [6, [j, g!, k]],
    ];
    for (const [m, proof] of want)
      expect(must(consistencyProof(m, 7, read)).map(hex)).toEqual(proof.map(hex));
  });
});

describe('tlog-proof (C2SP tlog-proof)', () => {
  it('parses the spec example', () => {
    const example = [
      'c2sp.org/tlog-proof@v1',
      'extra YWdlLXYxLjIuMS1kYXJ3aW4tYXJtNjQudGFyLmd6kYXJ3aW4tYXJ',
      'index 73894',
      'gSKyXoYZUgZ6jduWYrkDOARinOMGJveXjgMkBTcdPlQ=',
      'B95lDa8R83lS8n0eG+o0buTxRKQTYFi//1U8anccXmA=',
      'EKNzoDWG8LGC0Yp9o+sv3qllpMP9uHQ9B20KNL+Q1zs=',
      'RoopEkOdqkYqMB4MJXrbt/hMjOxsVn0IrWjpz1ZMMes=',
      'AHCioX9nLjsrse6YhjRRmk1WUEirVOLLRoOQ6vfO5vk=',
      '',
      'example.com/fancylog',
      '109482',
      'sFodV/vSp5O8n9a8QpW6PRY97tfOSW5bsc2Xl/EQi08=',
      '',
      '— example.com/fancylog hI2DJw[...]1roloI=',
      '',
    ].join('\n');
    const p = must(parseTlogProof(example));
    expect(p.index).toBe(73894);
    expect(p.hashes.length).toBe(5);
    expect(Buffer.from(p.extra!).toString('base64')).toBe(
      'YWdlLXYxLjIuMS1kYXJ3aW4tYXJtNjQudGFyLmd6kYXJ3aW4tYXJ',
    );
    expect(p.checkpoint.startsWith('example.com/fancylog\n109482\n')).toBe(true);
  });

  it('writes header, index, the RFC 6962 path (leaf sibling first), a blank line, the checkpoint', () => {
    const checkpoint = `${goNote.text}\n${goNote.peterSignature}`;
    const text = must(
      serializeTlogProof({
        index: 5,
        hashes: merkleVectors.inclusion[2]!.proof.map(fromHex),
        checkpoint,
      }),
    );
    expect(text).toBe(
      'c2sp.org/tlog-proof@v1\nindex 5\n' +
        'vBoGQ7EuTS18d5GPROD095qDi2z57FtcKD4fTYhZnms=\n' +
        'yoVOoSjtBQtBs1/8G4e46yveRh6eO1WW7Oa51ZdaCuA=\n' +
        '037kGJdt2VdTwcc4Yrk5j6Kiz5tP8P3+izDNlSCWFLc=\n' +
        '\n' +
        checkpoint,
    );
    expect(
      must(serializeTlogProof({ extra: Uint8Array.of(1, 2, 3), index: 0, hashes: [], checkpoint })),
    ).toBe(`c2sp.org/tlog-proof@v1\nextra AQID\nindex 0\n\n${checkpoint}`);
  });
});
