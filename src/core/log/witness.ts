/**
 * The log side of C2SP tlog-witness (https://c2sp.org/tlog-witness): a tenant's configured
 * witnesses (cosignature/v1 vkey and submission prefix), the `add-checkpoint` request body, the
 * reading of a witness's answer, and the verification of the cosignatures it returns before
 * anything of them is kept.
 *
 * Guarantees: a witness configuration is accepted only with a vkey `parseWitnessKey` accepts, an
 * `https:` submission prefix without credentials, query or fragment (plain `http:` only to a
 * loopback host, and only when the caller says it runs in development), at most
 * MAX_LOG_WITNESSES witnesses, no two sharing a name and key ID or a public key. A witness's answer
 * is trusted for nothing: a 200 body counts only for the signature lines by that witness's own
 * key (name AND key ID) that verify, over exactly the checkpoint submitted; one such line that
 * does not verify rejects the whole answer, and lines by other keys are dropped. A 409 counts only
 * with a well-formed size body of the spec's content type.
 * Never: reads a clock, does I/O, or throws.
 */
import {
  type Cosigned,
  cosignatureTimestamp,
  parseWitnessKey,
  verifyCosignatures,
  type WitnessKey,
  witnessPolicy,
  type WitnessKeyErrorReason,
} from './cosignature.js';
import { isHash, MAX_PROOF_HASHES } from './merkle.js';
import { decodeBase64 } from './encoding.js';
import { parseNote, signatureLine } from './note.js';
import { err, ok, type Result } from '../result.js';

/** The most witnesses one log submits to (each costs a request per new checkpoint). */
export const MAX_LOG_WITNESSES = 8;
/** The longest submission prefix accepted, in characters. */
export const MAX_WITNESS_URL_LENGTH = 512;
/** The longest witness answer read (a few signature lines; anything longer is not an answer). */
export const MAX_WITNESS_RESPONSE = 16 * 1024;
/** The spec's cap on consistency proof lines in a request. */
export const MAX_ADD_CHECKPOINT_PROOF_LINES = 63;
/** The content type of a 409 Conflict answer (C2SP tlog-witness). */
export const TLOG_SIZE_CONTENT_TYPE = 'text/x.tlog.size';

export type WitnessConfigErrorReason =
  WitnessKeyErrorReason | 'invalid_witness_url' | 'too_many_witnesses' | 'duplicate_witness';

export interface WitnessConfigError {
  readonly reason: WitnessConfigErrorReason;
  readonly message: string;
  /** The index of the offending witness in the list given (absent: the list as a whole). */
  readonly index?: number;
}

/** What a tenant admin gives for one witness. */
export interface WitnessConfigInput {
  readonly vkey: string;
  readonly url: string;
}

/** A validated witness of a log: its key and its submission prefix (no trailing slash). */
export interface LogWitness {
  readonly key: WitnessKey;
  readonly url: string;
}

export interface WitnessUrlOptions {
  /** Development only: allow `http:` to a loopback host (a local test witness). */
  readonly allowLoopbackHttp: boolean;
}

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

function isLoopback(hostname: string): boolean {
  return (
    LOOPBACK_HOSTS.has(hostname) || hostname.endsWith('.localhost') || /^127\.\d+\.\d+\.\d+$/.test(hostname)
  );
}

/**
 * A witness submission prefix: `https://host[:port][/path]`, returned without a trailing slash
 * (`add-checkpoint` is appended as `<prefix>/add-checkpoint`). Refused: other schemes, user info
 * (a credential in configuration that every reader of it sees), a query or fragment (the spec's
 * endpoint is a path), and loopback hosts over https outside development too (in production a
 * loopback witness can only be a mistake).
 */
export function parseWitnessUrl(
  text: unknown,
  options: WitnessUrlOptions,
): Result<string, WitnessConfigError> {
  const bad = (message: string): Result<never, WitnessConfigError> =>
    err({ reason: 'invalid_witness_url', message });
  if (typeof text !== 'string' || text.length === 0 || text.length > MAX_WITNESS_URL_LENGTH) {
    return bad(`the witness url must be 1 to ${MAX_WITNESS_URL_LENGTH} characters`);
  }
  if (/[\u0000-\u0020\u007f]/.test(text)) return bad('the witness url has a space or control character');
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    return bad('the witness url does not parse');
  }
  const loopback = isLoopback(u.hostname);
  if (u.protocol === 'http:') {
    if (!(options.allowLoopbackHttp && loopback)) {
      return bad('the witness url must be https (plain http only to a loopback host in development)');
    }
  } else if (u.protocol !== 'https:') {
    return bad('the witness url must be https');
  } else if (loopback && !options.allowLoopbackHttp) {
    return bad('the witness url names a loopback host (only in development)');
  }
  if (u.username !== '' || u.password !== '') return bad('the witness url must not carry credentials');
  if (u.search !== '' || u.hash !== '' || text.includes('?') || text.includes('#')) {
    return bad('the witness url must not have a query or fragment');
  }
  const canonical = u.href.replace(/\/+$/, '');
  return ok(canonical);
}

/**
 * A log's witness list. Order is kept (it is the order of the answer and of submission); the
 * same witness twice, or two names for one public key (a cosignature/v1 message does not commit
 * to the name, so one key would count twice toward a quorum), is refused.
 */
export function parseLogWitnesses(
  inputs: readonly WitnessConfigInput[],
  options: WitnessUrlOptions,
): Result<LogWitness[], WitnessConfigError> {
  if (!Array.isArray(inputs))
    return err({ reason: 'too_many_witnesses', message: 'witnesses must be a list' });
  if (inputs.length > MAX_LOG_WITNESSES) {
    return err({ reason: 'too_many_witnesses', message: `at most ${MAX_LOG_WITNESSES} witnesses per log` });
  }
  const out: LogWitness[] = [];
  for (const [index, input] of inputs.entries()) {
    const key = parseWitnessKey(input?.vkey);
    if (!key.ok) return err({ ...key.error, index });
    const url = parseWitnessUrl(input?.url, options);
    if (!url.ok) return err({ ...url.error, index });
    out.push({ key: key.value, url: url.value });
  }
  if (out.length > 0) {
    // The verifier's own duplicate rules (name and key ID, public key), so a list Writ submits to
    // is always one `writ verify --witness` can take as a policy.
    const p = witnessPolicy(out.map((w) => w.key));
    if (!p.ok) return err({ reason: 'duplicate_witness', message: p.error.message });
  }
  return ok(out);
}

/**
 * The `add-checkpoint` request body: `old <size>`, the consistency proof from that size (base64
 * lines; none from 0), an empty line, the signed checkpoint.
 */
export function addCheckpointBody(
  oldSize: number,
  proof: readonly string[],
  checkpoint: string,
): Result<string, { readonly message: string }> {
  if (!Number.isSafeInteger(oldSize) || oldSize < 0) return err({ message: 'old size must be a tree size' });
  if (oldSize === 0 && proof.length > 0) return err({ message: 'a proof from size 0 is empty' });
  if (proof.length > MAX_ADD_CHECKPOINT_PROOF_LINES || proof.length > MAX_PROOF_HASHES) {
    return err({ message: `at most ${MAX_ADD_CHECKPOINT_PROOF_LINES} proof lines` });
  }
  for (const line of proof) {
    const h = decodeBase64(line);
    if (h === undefined || !isHash(h))
      return err({ message: 'proof lines must be base64 of 32-byte hashes' });
  }
  const parsed = parseNote(checkpoint);
  if (!parsed.ok) return err({ message: `checkpoint: ${parsed.error.message}` });
  return ok(`old ${oldSize}\n${proof.map((l) => `${l}\n`).join('')}\n${checkpoint}`);
}

/** What a witness's answer to `add-checkpoint` means for the log. */
export type AddCheckpointAnswer =
  /** 200: the body, to be verified with `verifyWitnessAnswer` before anything is kept. */
  | { readonly kind: 'cosigned'; readonly body: string }
  /** 409 with the size the witness last cosigned: resubmit with the proof from there. */
  | { readonly kind: 'conflict'; readonly size: number }
  /** Anything else (403, 404, 422, 400, 5xx, a 409 without a size): recorded, retried later. */
  | { readonly kind: 'refused'; readonly status: number; readonly message: string };

/** Read a witness's HTTP answer (status, content type and body text, already bounded). */
export function readAddCheckpointAnswer(
  status: number,
  contentType: string | null,
  body: string,
): AddCheckpointAnswer {
  if (status === 200) return { kind: 'cosigned', body };
  if (status === 409) {
    const type = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
    const m = /^(0|[1-9][0-9]{0,15})\n$/.exec(body);
    if (type === TLOG_SIZE_CONTENT_TYPE && m !== null && Number.isSafeInteger(Number(m[1]))) {
      return { kind: 'conflict', size: Number(m[1]) };
    }
    return {
      kind: 'refused',
      status,
      message: 'conflict without a size: the witness holds another checkpoint of this size (a fork?)',
    };
  }
  const why: Record<number, string> = {
    400: 'bad request',
    403: 'the witness does not trust the log key (403)',
    404: 'the witness does not know this log (404)',
    422: 'the witness refused the consistency proof (422)',
  };
  return { kind: 'refused', status, message: why[status] ?? `witness answered ${status}` };
}

export interface WitnessAnswerError {
  readonly reason: 'malformed_answer' | 'invalid_cosignature' | 'no_cosignature';
  readonly message: string;
}

/** A witness's verified cosignature on a checkpoint: one line, the newest it gave. */
export interface VerifiedCosignature {
  /** The signature line, `— <name> <base64>` and its newline, ready to append to the checkpoint. */
  readonly line: string;
  readonly cosigned: Cosigned;
}

/**
 * Verify a 200 answer to `add-checkpoint` of `checkpoint` against the witness's key: the body must
 * be one or more note signature lines; those by the witness's key (name and key ID) must all
 * verify as cosignature/v1 over exactly the checkpoint's text, and at least one must be there.
 * Lines by other keys are ignored (the spec: "The client MUST ignore any cosignatures from unknown
 * keys"). Returns the witness's newest line alone.
 */
export function verifyWitnessAnswer(
  checkpoint: string,
  body: string,
  witness: WitnessKey,
): Result<VerifiedCosignature, WitnessAnswerError> {
  if (typeof body !== 'string' || body.length === 0 || body.length > MAX_WITNESS_RESPONSE) {
    return err({ reason: 'malformed_answer', message: 'the answer is empty or too long' });
  }
  if (!body.endsWith('\n') || !body.startsWith('\u2014 ') || body.includes('\n\n')) {
    return err({ reason: 'malformed_answer', message: 'the answer is not note signature lines' });
  }
  // The answer's lines after the checkpoint's own parse as one note (the spec's suggestion).
  const joined = parseNote(checkpoint + body);
  const own = parseNote(checkpoint);
  if (!joined.ok || !own.ok || joined.value.text !== own.value.text) {
    return err({ reason: 'malformed_answer', message: 'the answer is not note signature lines' });
  }
  const added = joined.value.signatures.slice(own.value.signatures.length);
  const mine = added.filter((s) => s.name === witness.name && s.keyId === witness.keyId);
  if (mine.length === 0) {
    return err({ reason: 'no_cosignature', message: 'the answer has no cosignature by this witness key' });
  }
  const policy = witnessPolicy([witness], 1);
  if (!policy.ok) return err({ reason: 'invalid_cosignature', message: policy.error.message });
  // Only the witness's lines, over the checkpoint's text: every one must verify.
  const v = verifyCosignatures(`${own.value.text}\n${mine.map(signatureLine).join('')}`, policy.value);
  if (!v.ok) return err({ reason: 'invalid_cosignature', message: v.error.message });
  const cosigned = v.value.cosigned[0]!;
  const newest = mine.find((s) => Number(cosignatureTimestamp(s.signature)) === cosigned.timestamp_unix_s)!;
  return ok({ line: signatureLine(newest), cosigned });
}

/**
 * The checkpoint with cosignature lines appended (each already verified by `verifyWitnessAnswer`
 * for this very checkpoint). A result that would not parse back as a note is refused, and the
 * checkpoint is served as it was.
 */
export function withCosignatures(checkpoint: string, lines: readonly string[]): string {
  if (lines.length === 0) return checkpoint;
  const out = checkpoint + lines.join('');
  const parsed = parseNote(out);
  const own = parseNote(checkpoint);
  return parsed.ok && own.ok && parsed.value.text === own.value.text ? out : checkpoint;
}
