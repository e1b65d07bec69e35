/**
 * What a CLI command may do to the outside world, passed in: so commands are plain functions,
 * tested without spawning processes, and `bin/writ.mjs` is the only place that touches Node.
 */
export interface CliIo {
  /** The bytes of a file; rejects if it cannot be read. */
  readFile(path: string): Promise<Uint8Array>;
  /**
   * A file opened to be read from its start in pieces (`writ tenant upload`, whose file may be
   * larger than memory); rejects if it cannot be opened. Absent, such a command reads the file
   * whole with `readFile` (an embedder whose files are in memory already).
   */
  readonly openFile?: (path: string) => Promise<CliFileReader>;
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

/** A file being read in order, one piece at a time. */
export interface CliFileReader {
  /**
   * Read the next bytes into `into` from its start: how many (fewer than its length is not the
   * end; 0 is); rejects if the file cannot be read.
   */
  read(into: Uint8Array): Promise<number>;
  /** The file's size now, in bytes (a file still being written grows while it is read). */
  size(): Promise<number>;
  close(): Promise<void>;
}

/** Exit codes of every subcommand. */
export const EXIT = { ok: 0, invalid: 1, usage: 2 } as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];
