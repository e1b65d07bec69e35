/**
 * What a CLI command may do to the outside world, passed in: so commands are plain functions,
 * tested without spawning processes, and `bin/writ.mjs` is the only place that touches Node.
 */
export interface CliIo {
  /** The bytes of a file; rejects if it cannot be read. */
  readFile(path: string): Promise<Uint8Array>;
  stdout(text: string): void;
  stderr(text: string): void;
}

/** Exit codes of every subcommand. */
export const EXIT = { ok: 0, invalid: 1, usage: 2 } as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];
