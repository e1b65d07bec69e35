/**
 * What a CLI command may do to the outside world, passed in: so commands are plain functions,
 * tested without spawning processes, and `bin/writ.mjs` is the only place that touches Node.
 */
export interface CliIo {
  /** The bytes of a file; rejects if it cannot be read. */
  readFile(path: string): Promise<Uint8Array>;
  /** Write a text file (`writ conformance keygen`); absent where files cannot be written. */
  readonly writeFile?: (path: string, text: string) => Promise<void>;
  stdout(text: string): void;
  stderr(text: string): void;
  /** The environment (`WRIT_URL`, `WRIT_KEY`, ...); none when absent. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** How commands that talk to a Writ service reach it (default `globalThis.fetch`). */
  readonly fetch?: (request: Request) => Promise<Response>;
  /** Waiting between retries (default a timer); tests pass one that returns at once. */
  readonly sleep?: (ms: number) => Promise<void>;
  /** Wall clock in Unix ms (default `Date.now`). */
  readonly now?: () => number;
}

/** Exit codes of every subcommand. */
export const EXIT = { ok: 0, invalid: 1, usage: 2 } as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];
