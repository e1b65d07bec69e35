/**
 * Adapter: ask a Workers AI text-classification model whether a tool output reads as a prompt
 * injection, and turn the answer into a `ClassifierVerdict` for the core, or `null`.
 *
 * Guarantees: never throws and never waits longer than `timeoutMs`; a missing binding, a throw,
 * a timeout, or an answer of an unexpected shape is `null` (no verdict), which the core treats as
 * if no classifier were configured. Text is cut to `maxChars` before it leaves the Worker.
 * Never: decides anything itself; its output is one more signal (see
 * `src/core/observation/signals/classifier.ts`).
 */
import type { CLASSIFIER_UNAVAILABLE_REASONS } from '../core/observation/schema.js';
import { ClassifierVerdict } from '../core/observation/signals/classifier.js';

/** The part of the `Ai` binding this adapter uses (`env.AI` satisfies it through a wrapper). */
export interface TextClassifierBinding {
  run(model: string, inputs: { text: string }): Promise<unknown>;
}

export interface WorkersAiClassifierOptions {
  /** A text-classification model, e.g. a prompt-injection classifier the tenant deployed. */
  readonly model: string;
  /** Labels (case-insensitive) the model uses for injection; their score is the verdict. */
  readonly injectionLabels: readonly string[];
  readonly timeoutMs: number;
  readonly maxChars: number;
  /** Resolves after `ms`; injected so tests need no real waiting. */
  readonly sleep?: (ms: number) => Promise<void>;
}

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const TIMED_OUT = Symbol('timed out');

/** Text-classification output: `[{ label, score }, ...]`. */
function injectionScore(output: unknown, labels: readonly string[]): number | null {
  if (!Array.isArray(output)) return null;
  const wanted = new Set(labels.map((l) => l.toLowerCase()));
  let best: number | null = null;
  for (const item of output as unknown[]) {
    if (typeof item !== 'object' || item === null) return null;
    const { label, score } = item as { label?: unknown; score?: unknown };
    if (typeof label !== 'string' || typeof score !== 'number' || !(score >= 0 && score <= 1)) return null;
    if (wanted.has(label.toLowerCase())) best = Math.max(best ?? 0, score);
  }
  return best;
}

/** The verdict, or the typed reason there is none (`ClassifierOutcome`'s reasons). */
export type ClassifierReading =
  | { readonly ok: true; readonly verdict: ClassifierVerdict }
  | { readonly ok: false; readonly reason: (typeof CLASSIFIER_UNAVAILABLE_REASONS)[number] };

/** As `classifyWithWorkersAi`, saying why there is no verdict. Never throws. */
export async function readWithWorkersAi(
  ai: TextClassifierBinding | undefined,
  text: string,
  options: WorkersAiClassifierOptions,
): Promise<ClassifierReading> {
  if (ai === undefined) return { ok: false, reason: 'no_binding' };
  const sleep = options.sleep ?? defaultSleep;
  try {
    const call = ai.run(options.model, { text: text.slice(0, options.maxChars) });
    // A rejection after the timeout has won must not surface as an unhandled rejection.
    call.catch(() => undefined);
    const output = await Promise.race([call, sleep(options.timeoutMs).then(() => TIMED_OUT)]);
    if (output === TIMED_OUT) return { ok: false, reason: 'timeout' };
    const score = injectionScore(output, options.injectionLabels);
    if (score === null) return { ok: false, reason: 'malformed_answer' };
    const verdict = ClassifierVerdict.safeParse({ model: options.model, injection_score: score });
    return verdict.success ? { ok: true, verdict: verdict.data } : { ok: false, reason: 'malformed_answer' };
  } catch {
    return { ok: false, reason: 'error' };
  }
}

export async function classifyWithWorkersAi(
  ai: TextClassifierBinding | undefined,
  text: string,
  options: WorkersAiClassifierOptions,
): Promise<ClassifierVerdict | null> {
  const r = await readWithWorkersAi(ai, text, options);
  return r.ok ? r.verdict : null;
}
