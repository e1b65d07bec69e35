/**
 * Which configured platform admin tokens are refused. Pure (no imports, no clock), so the Worker
 * (src/http/auth.ts) and `npm run dev` (scripts/dev.ts) apply the same rule.
 *
 * Guarantees: a token copied from an example, containing a placeholder word, shorter than
 * `MIN_ADMIN_TOKEN_LENGTH`, made of a repeated block, of fewer than `MIN_ADMIN_TOKEN_DISTINCT`
 * characters, or of estimated entropy under `MIN_ADMIN_TOKEN_BITS` is refused.
 * Never: measures strength. The estimate (length × the empirical Shannon entropy of its
 * characters) catches placeholders and obviously weak values, not a well-disguised guessable
 * one: the token should come from a random generator (`openssl rand -hex 32`).
 */

/** Shorter tokens disable tenant creation. */
export const MIN_ADMIN_TOKEN_LENGTH = 32;
/** The longest bearer credential accepted at all (src/http/auth.ts). */
export const MAX_ADMIN_TOKEN_LENGTH = 512;
/**
 * 32 random hex characters (128 bits) show at least 9 distinct characters and 93 estimated bits
 * in 200,000 samples; these bounds leave a wide margin below that.
 */
export const MIN_ADMIN_TOKEN_DISTINCT = 8;
export const MIN_ADMIN_TOKEN_BITS = 80;

/** Values published as examples (.dev.vars.example, docs): anyone can read them. */
export const EXAMPLE_ADMIN_TOKENS: ReadonlySet<string> = new Set([
  'change-me-to-32-or-more-random-characters',
]);

// Words that only a placeholder contains; a random token contains none of them.
const PLACEHOLDER =
  /password|change[-_. ]?(me|it)|replace[-_. ]?me|example|placeholder|your[-_. ]?(admin[-_. ]?)?token/i;

export type AdminTokenProblem =
  | 'too_short'
  | 'too_long'
  | 'example_value'
  | 'placeholder'
  | 'repeated'
  | 'few_distinct_characters'
  | 'low_entropy';

/** Why `token` must not be the platform admin token, or null when it may be. */
export function adminTokenProblem(token: string): AdminTokenProblem | null {
  if (token.length < MIN_ADMIN_TOKEN_LENGTH) return 'too_short';
  if (token.length > MAX_ADMIN_TOKEN_LENGTH) return 'too_long';
  if (EXAMPLE_ADMIN_TOKENS.has(token)) return 'example_value';
  if (PLACEHOLDER.test(token)) return 'placeholder';
  // `abcdabcd...`: the token is as strong as its block.
  for (let p = 1; p <= token.length / 2; p++) {
    if (token.slice(p) === token.slice(0, token.length - p)) return 'repeated';
  }
  const counts = new Map<string, number>();
  for (const c of token) counts.set(c, (counts.get(c) ?? 0) + 1);
  if (counts.size < MIN_ADMIN_TOKEN_DISTINCT) return 'few_distinct_characters';
  let bitsPerChar = 0;
  for (const n of counts.values()) {
    const p = n / token.length;
    bitsPerChar -= p * Math.log2(p);
  }
  if (bitsPerChar * token.length < MIN_ADMIN_TOKEN_BITS) return 'low_entropy';
  return null;
}
