/**
 * `writ <command> ...`: the command table. Each command is a function of its arguments and the
 * injected I/O, returning an exit code; adding a command is adding a row.
 */
import { type CliIo, EXIT, type ExitCode } from './io.js';
import { runVerify } from './verify.js';

export interface Command {
  readonly summary: string;
  readonly run: (argv: readonly string[], io: CliIo) => Promise<ExitCode>;
}

export const COMMANDS: Readonly<Record<string, Command>> = {
  verify: { summary: 'check a receipt bundle offline (signature, recomputation, log)', run: runVerify },
};

export function usage(): string {
  const rows = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(10)} ${c.summary}`);
  return `usage: writ <command> [arguments]\n\ncommands:\n${rows.join('\n')}\n`;
}

export async function main(argv: readonly string[], io: CliIo): Promise<ExitCode> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    (name === undefined ? io.stderr : io.stdout)(usage());
    return name === undefined ? EXIT.usage : EXIT.ok;
  }
  const command = Object.prototype.hasOwnProperty.call(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (command === undefined) {
    io.stderr(`writ: unknown command ${JSON.stringify(name.slice(0, 64))}\n${usage()}`);
    return EXIT.usage;
  }
  return command.run(rest, io);
}
