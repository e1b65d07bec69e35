/**
 * `writ verify <bundle.json> [--keys keys.json] [--witness <vkey>]... [--witness-quorum <k>] [--json]
 * [--allow-unlogged]`: check a receipt bundle offline: no network, no database.
 *
 * Exit 0: valid. Exit 1: invalid (the reason is printed). Exit 2: usage error (bad arguments, a
 * file that cannot be read, a keys file that is not a key set).
 * Keys: `--keys` pins the issuer's published key set (`GET /.well-known/writ-keys`, saved by the
 * user); without it the bundle's own keys are used and the verdict says `keys: from the bundle`.
 * Witnesses: each `--witness` names a witness by its C2SP cosignature/v1 vkey (type 0x04); with
 * any, the bundle's checkpoint must carry valid cosignatures of `--witness-quorum` of them
 * (default: all). Whether cosignatures are required depends only on these options, never on the
 * bundle: so `--witness` with `--allow-unlogged` (which accepts a bundle without a checkpoint) is a
 * usage error, as are a malformed vkey and a quorum outside 1..n.
 */
import { safeText } from '../core/errors.js';
import { parseWitnessKey, type WitnessKey, witnessPolicy } from '../core/log/cosignature.js';
import { parsePublicKeySetText, type TrustedKeys } from '../core/receipts/keys.js';
import { escapeText } from '../core/text.js';
import { type BundleVerdict, verifyBundleBytes } from '../verify/bundle.js';
import { type CliIo, EXIT, type ExitCode } from './io.js';
import { cliLogVerifier, cliWitnessedLogVerifier } from './log-verifier.js';

export const VERIFY_USAGE =
  'usage: writ verify <bundle.json> [--keys keys.json] [--witness <vkey>]... [--witness-quorum <k>] [--json] [--allow-unlogged]';

interface VerifyArgs {
  readonly bundle: string;
  readonly keys: string | null;
  readonly json: boolean;
  readonly allowUnlogged: boolean;
  readonly witnesses: readonly WitnessKey[];
  /** `null`: all the witnesses given. */
  readonly quorum: number | null;
}

export function parseVerifyArgs(argv: readonly string[]): VerifyArgs | string {
  let bundle: string | null = null;
  let keys: string | null = null;
  let json = false;
  let allowUnlogged = false;
  const witnesses: WitnessKey[] = [];
  let quorum: number | null = null;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--json') json = true;
    else if (a === '--allow-unlogged') allowUnlogged = true;
    else if (a === '--witness') {
      const v = argv[++i];
      if (v === undefined || v.startsWith('--')) return '--witness needs a witness vkey';
      const w = parseWitnessKey(v);
      if (!w.ok) return `--witness ${quote(v)}: ${w.error.reason}: ${w.error.message}`;
      witnesses.push(w.value);
    } else if (a === '--witness-quorum') {
      const v = argv[++i];
      if (v === undefined || !/^[1-9][0-9]{0,5}$/.test(v)) return '--witness-quorum needs a positive integer';
      if (quorum !== null) return '--witness-quorum given twice';
      quorum = Number(v);
    } else if (a === '--keys') {
      const v = argv[++i];
      if (v === undefined || v.startsWith('--')) return '--keys needs a file';
      if (keys !== null) return '--keys given twice';
      keys = v;
    } else if (a.startsWith('-')) return `unknown option "${a}"`;
    else if (bundle !== null) return 'only one bundle file';
    else bundle = a;
  }
  if (bundle === null) return 'missing bundle file';
  if (quorum !== null && witnesses.length === 0) return '--witness-quorum needs at least one --witness';
  // --allow-unlogged accepts a bundle with no checkpoint: cosignatures would then be required or
  // not depending on what the bundle holds.
  if (witnesses.length > 0 && allowUnlogged) return '--witness cannot be combined with --allow-unlogged';
  return { bundle, keys, json, allowUnlogged, witnesses, quorum };
}

export async function runVerify(argv: readonly string[], io: CliIo): Promise<ExitCode> {
  const args = parseVerifyArgs(argv);
  if (typeof args === 'string') {
    io.stderr(`writ verify: ${args}\n${VERIFY_USAGE}\n`);
    return EXIT.usage;
  }
  let logVerifier = cliLogVerifier;
  if (args.witnesses.length > 0) {
    const policy = witnessPolicy(args.witnesses, args.quorum ?? undefined);
    if (!policy.ok) {
      io.stderr(`writ verify: ${policy.error.reason}: ${policy.error.message}\n${VERIFY_USAGE}\n`);
      return EXIT.usage;
    }
    logVerifier = cliWitnessedLogVerifier(policy.value);
  }
  let trustedKeys: TrustedKeys | undefined;
  if (args.keys !== null) {
    const text = await read(io, args.keys);
    if (text === null) return EXIT.usage;
    const parsed = parsePublicKeySetText(text);
    if (!parsed.ok) {
      io.stderr(`writ verify: ${quote(args.keys)} is not a key set: ${parsed.error.message}\n`);
      return EXIT.usage;
    }
    trustedKeys = parsed.value;
  }
  let bytes: Uint8Array;
  try {
    bytes = await io.readFile(args.bundle);
  } catch {
    io.stderr(`writ verify: cannot read ${quote(args.bundle)}\n`);
    return EXIT.usage;
  }
  const verdict = verifyBundleBytes(bytes, {
    logVerifier,
    allowUnlogged: args.allowUnlogged,
    ...(trustedKeys === undefined ? {} : { trustedKeys }),
  });
  io.stdout(args.json ? `${JSON.stringify(verdict)}\n` : describe(verdict));
  return verdict.valid ? EXIT.ok : EXIT.invalid;
}

async function read(io: CliIo, path: string): Promise<string | null> {
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(await io.readFile(path));
  } catch {
    io.stderr(`writ verify: cannot read ${quote(path)}\n`);
    return null;
  }
}

/** A string the bundle chose (its receipt kind, tenant, a body key): clipped, controls escaped. */
const fromBundle = (s: string): string => safeText(s, 200);

/**
 * The human verdict: one line of result, then what was checked. Every line is escaped: the kind,
 * tenant and field names come from the bundle, shown even when it does not verify, and a control
 * character among them could redraw the terminal (clear it, then print a "VALID" line).
 */
export function describe(v: BundleVerdict): string {
  const lines: string[] = [];
  const what =
    v.receipt === null ? 'bundle' : `${fromBundle(v.receipt.kind)} receipt ${fromBundle(v.receipt.sha256)}`;
  if (v.valid) lines.push(`VALID ${what}`);
  else if (v.failure !== null) lines.push(`INVALID ${what}: ${v.failure.reason}: ${v.failure.message}`);
  for (const d of v.failure?.differences ?? []) lines.push(`  differs: ${fromBundle(d)}`);
  if (v.receipt !== null) lines.push(`  tenant: ${fromBundle(v.receipt.tenant_id)}`);
  if (v.signature !== null) {
    const at = new Date(v.signature.issued_at_unix_ms).toISOString();
    lines.push(`  signature: Ed25519, issuer ${v.signature.issuer}, key ${v.signature.key_id}, issued ${at}`);
  }
  if (v.key_trust === 'pinned') lines.push('  keys: pinned (--keys)');
  if (v.key_trust === 'bundle')
    lines.push('  keys: from the bundle (not independently trusted; pass --keys)');
  lines.push(`  log: ${logLine(v)}`);
  const w = v.log.status === 'included' ? v.log.inclusion.witnesses : undefined;
  if (w !== undefined) {
    const who = w.cosigned.map((c) => `${fromBundle(c.name)} (time ${c.timestamp_unix_s})`).join(', ');
    lines.push(`  witnesses: ${w.cosigned.length} of ${w.witnesses} cosigned (quorum ${w.quorum}): ${who}`);
  }
  return `${lines.map(escapeText).join('\n')}\n`;
}

function logLine(v: BundleVerdict): string {
  switch (v.log.status) {
    case 'included':
      return `included at index ${v.log.inclusion.index} of ${v.log.inclusion.tree_size} (${v.log.inclusion.origin})`;
    case 'unlogged_allowed':
      return 'no log proof (allowed by --allow-unlogged)';
    case 'not_checked':
      return `${v.log.message.replace(/^log: /, '')} (allowed by --allow-unlogged)`;
    case 'failed':
      return `${v.log.reason}: ${v.log.message.replace(/^log: /, '')}`;
    case 'not_reached':
      return 'not reached';
  }
}

/** User input quoted, clipped, control characters escaped. */
function quote(s: string): string {
  return JSON.stringify(s.length > 200 ? `${s.slice(0, 200)}…` : s);
}
