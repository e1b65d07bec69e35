/**
 * When a Worker may leave out the kick it sends a tenant's log sequencer after a commit.
 *
 * A kick arms the sequencer's alarm (a drain) unless one is already due, and answers the time the
 * drain is due. A commit that completed well before that time is drained by it: the drain reads
 * D1 after it fires. So a Worker that was told "a drain is due at D" skips its kick for commits it
 * sees complete before `D - margin`, and the sequencer keeps the promise: a drain that runs early
 * (on demand, or re-armed for a backlog) re-arms the alarm at the latest time it promised
 * (durable-objects/log-sequencer.ts). Skipping is only ever a saving: a wrong skip would delay a
 * receipt's background inclusion, never lose it (D1 is the queue, and a proof request drains).
 *
 * Guarantees: a skip needs a recorded due time later than `now + margin`; the table is bounded
 * (`max` tenants, the oldest forgotten first), whatever tenants are presented.
 * Never: reads a clock (`now` is an argument), or skips on a due time it was not told.
 */

/** Clock skew allowed between the Worker and the sequencer, plus the commit-to-kick gap. */
export const KICK_SKIP_MARGIN_MS = 50;

export class KickMemo {
  readonly #due = new Map<string, number>();
  readonly #max: number;
  readonly #margin: number;

  constructor(max: number, margin: number = KICK_SKIP_MARGIN_MS) {
    if (!Number.isSafeInteger(max) || max < 1) throw new RangeError('max must be a positive integer');
    if (!Number.isFinite(margin) || margin < 0) throw new RangeError('margin must be non-negative');
    this.#max = max;
    this.#margin = margin;
  }

  /** True when a drain already promised for `tenant_id` is due after this commit, with margin. */
  covered(tenant_id: string, now: number): boolean {
    const due = this.#due.get(tenant_id);
    return due !== undefined && now + this.#margin < due;
  }

  /** What a kick answered: the time the tenant's next drain is due. */
  record(tenant_id: string, due: number): void {
    if (!Number.isFinite(due)) return;
    this.#due.delete(tenant_id);
    if (this.#due.size >= this.#max) {
      const oldest = this.#due.keys().next();
      if (oldest.done !== true) this.#due.delete(oldest.value);
    }
    this.#due.set(tenant_id, due);
  }

  /** A kick failed or was refused: rely on nothing for this tenant. */
  forget(tenant_id: string): void {
    this.#due.delete(tenant_id);
  }

  get size(): number {
    return this.#due.size;
  }
}
