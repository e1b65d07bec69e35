/**
 * `/mcp/v1/after-call` without an `outcome`: an MCP tool error closes an operation as "no effect"
 * only for a read-only contract; for every contract with an effect it is indeterminate, so the
 * operation goes to reconciliation rather than being closed on a guess.
 */
import { describe, expect, it } from 'vitest';
import { TOOL_EFFECTS } from '../../../src/core/model.js';
import { defaultOutcome } from '../../../src/services/tools.js';

describe('defaultOutcome', () => {
  it('a result that is not an error is a success, whatever the effect', () => {
    for (const effect of TOOL_EFFECTS) expect(defaultOutcome(false, effect)).toBe('succeeded');
  });

  it('an error is "no effect" only for read_only, indeterminate for every other effect class', () => {
    expect(Object.fromEntries(TOOL_EFFECTS.map((e) => [e, defaultOutcome(true, e)]))).toEqual({
      read_only: 'failed_no_effect',
      creates_draft: 'indeterminate',
      external_write: 'indeterminate',
      irreversible: 'indeterminate',
    });
  });
});
