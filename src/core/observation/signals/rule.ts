/**
 * The shape of a pattern rule and the normalized views it runs on (see `signals.ts`).
 *
 * Guarantees: a rule names its signal, its family and its view; nothing else. Never: holds
 * state, or a pattern with an unbounded quantifier inside a repeated group (the signal tests
 * check every pattern for that).
 */
import type { ObservationSignal } from '../schema.js';

/**
 * `lower` keeps punctuation with whitespace collapsed (JSON shapes, scripts without spaces),
 * `folded` is `lower` before the collapse (line starts), `words` is letters and digits separated
 * by single spaces (bounded-gap phrases), `squeezed` has every separator removed (also run with
 * leetspeak folded), `cased` keeps case (credential formats), `raw` is the payload itself.
 */
export type ViewName = 'lower' | 'folded' | 'words' | 'squeezed' | 'cased' | 'raw';

export interface Rule {
  /** `<signal prefix>.<family>`, the id a receipt carries (schema: `^[a-z]+\.[a-z0-9_]+$`). */
  readonly id: string;
  readonly signal: ObservationSignal;
  /** Why it fired, for a reader: `override`, `delimiter_forgery`, `role_play`, a provider rule ... */
  readonly family: string;
  /**
   * BCP 47 language of a language-specific rule, which runs only when the text shows that
   * language (a character of its script, or one of its function words); absent for rules that
   * are not about one language's wording.
   */
  readonly lang?: string;
  readonly view: ViewName;
  readonly pattern: RegExp;
  /** For rules that must look at the captured value (placeholder exclusion); pattern has the `g` flag. */
  readonly accept?: (m: RegExpMatchArray) => boolean;
  /** Weak wording that a security document legitimately quotes: dropped in quoted-attack context. */
  readonly quotable?: boolean;
}

/** Cyrillic and Greek letters that render like Latin ones, folded on the lowercase views. */
export const CONFUSABLES: Readonly<Record<string, string>> = {
  а: 'a',
  е: 'e',
  о: 'o',
  р: 'p',
  с: 'c',
  у: 'y',
  х: 'x',
  і: 'i',
  ј: 'j',
  ѕ: 's',
  ԁ: 'd',
  ɡ: 'g',
  ο: 'o',
  α: 'a',
  ε: 'e',
  ι: 'i',
  κ: 'k',
  ν: 'v',
  ρ: 'p',
  υ: 'u',
  τ: 't',
};
export const CONFUSABLE_RE = new RegExp(`[${Object.keys(CONFUSABLES).join('')}]`, 'g');

/**
 * A pattern written in natural script, put through the same normalization as the text it will
 * meet (NFKC, lowercase, look-alike folding), so a Russian word is matched in the form the folded
 * view gives it. The mapped characters are letters, never regex syntax.
 */
export function normalizedPattern(source: string, flags = ''): RegExp {
  // Escapes keep their case: `\S` lowercased would mean `\s`.
  const n = source
    .normalize('NFKC')
    .replace(/\\.|[^\\]+/g, (s) =>
      s.startsWith('\\') ? s : s.toLowerCase().replace(CONFUSABLE_RE, (c) => CONFUSABLES[c] ?? c),
    );
  return new RegExp(n, flags);
}
