/**
 * A small Result type. Validators in `src/core` return values, never throw for expected
 * failures: a malformed input is a `Result` error, a well-formed denial is a normal value.
 */
export type Ok<T> = { readonly ok: true; readonly value: T };
export type Err<E> = { readonly ok: false; readonly error: E };
export type Result<T, E> = Ok<T> | Err<E>;

export const ok = <T>(value: T): Ok<T> => ({ ok: true, value });
export const err = <E>(error: E): Err<E> => ({ ok: false, error });
