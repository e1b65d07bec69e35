// An internal error's log line never carries the values a query was bound to (review15): drizzle's
// DrizzleQueryError message ends with `params: <every bound value>`, which may be an approval's raw
// input or an idempotency key. `errorForLog` keeps the SQL and the driver's own message.
import { DrizzleQueryError } from 'drizzle-orm/errors';
import { describe, expect, it } from 'vitest';
import { LOGGED_MESSAGE_MAX, errorForLog } from '../../../src/services/errors.js';

const SECRET_INPUT = '{"to_version":"v41","note":"approver-only text"}';

describe('errorForLog', () => {
  it("cuts a failed query's bound values and keeps the SQL and the driver's message", () => {
    const cause = new Error('D1_ERROR: UNIQUE constraint failed: approvals.approval_id');
    const e = new DrizzleQueryError('insert into "approvals" values (?, ?)', ['apr-1', SECRET_INPUT], cause);
    expect(e.message).toContain(SECRET_INPUT);
    const logged = errorForLog(e);
    expect(JSON.stringify(logged)).not.toContain('approver-only text');
    expect(logged.message).toBe(
      'Failed query: insert into "approvals" values (?, ?) (cause: D1_ERROR: UNIQUE constraint failed: approvals.approval_id)',
    );
  });

  it("also cuts a cause's bound values, and keeps any other message as it is", () => {
    const inner = new DrizzleQueryError('select ?', [SECRET_INPUT]);
    const outer = new DrizzleQueryError('select 1', ['x'], inner);
    expect(JSON.stringify(errorForLog(outer))).not.toContain('approver-only text');
    expect(errorForLog(new TypeError('boom'))).toEqual({ error: 'TypeError', message: 'boom' });
  });

  it('bounds the message', () => {
    const logged = errorForLog(new Error('x'.repeat(LOGGED_MESSAGE_MAX * 3)));
    expect(logged.message.length).toBe(LOGGED_MESSAGE_MAX + 1);
  });
});
