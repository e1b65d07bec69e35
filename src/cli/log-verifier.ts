/**
 * The transparency-log verifier `writ verify` uses.
 *
 * LOG VERIFIER PLUG-IN POINT: the log library (src/core/log, on its own branch) is not here yet,
 * so this verifier checks nothing and says so (`LOG_NOT_CHECKED`); `writ verify` then fails a
 * logged bundle unless `--allow-unlogged` is given. When the library lands, replace the body of
 * `cliLogVerifier` with a call to its verifier (leaf bytes, C2SP proof text, signed checkpoint
 * text, trusted log keys, and the checkpoint origin checked against `context.tenant_id`).
 */
import { err } from '../core/result.js';
import { LOG_NOT_CHECKED, type LogVerifier } from '../verify/bundle.js';

export const cliLogVerifier: LogVerifier = () =>
  err({ reason: LOG_NOT_CHECKED, message: 'log: not checked (library missing)' });
