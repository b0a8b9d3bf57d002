/**
 * Milliseconds `promise` took to settle (fulfilled or rejected), or `Infinity` when it had not
 * settled within `boundMs`. For checking that `close()`, an acquire or an open is bounded
 * against a store that never answers, without the test hanging when it is not.
 *
 * @param promise - the operation, already started
 * @param boundMs - how long to wait before giving up and returning `Infinity`
 *
 * @example
 * expect(await settleTime(coordinator.close(), 20_000)).toBeLessThan(5_000);
 */
export async function settleTime(promise: Promise<unknown>, boundMs: number): Promise<number> {
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    promise.then(
      () => "settled",
      () => "settled",
    ),
    new Promise<string>((resolve) => {
      timer = setTimeout(() => resolve("pending"), boundMs);
    }),
  ]);
  clearTimeout(timer);
  return outcome === "settled" ? performance.now() - started : Number.POSITIVE_INFINITY;
}

/** How long an operation took to settle, and how it failed. */
export interface Timed {
  /** Milliseconds from the call to {@link timed} until the operation settled. */
  ms: number;
  /** The rejection reason, or `undefined` when the operation fulfilled. */
  error: unknown;
}

/**
 * Waits for `promise` to settle and says how long it took and how it failed.
 *
 * @param promise - the operation, already started
 * @returns `ms`, the time to settle; `error`, the rejection reason, or `undefined` when it
 * fulfilled
 *
 * @example
 * const { ms, error } = await timed(coordinator.acquire("job", { waitMs: 1_000 }));
 * expect(error).toBeInstanceOf(BackendUnavailableError);
 */
export async function timed(promise: Promise<unknown>): Promise<Timed> {
  const start = performance.now();
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  return { ms: performance.now() - start, error };
}

/**
 * Shuts down while an operation is still in flight against a store that never answers: waits
 * `delayMs` so the operation has sent its request, calls `close`, then waits for the
 * operation. Both are timed, for the test to check that `close()` does not wait on the store
 * and that the operation ends with it.
 *
 * @param pending - the operation in flight (an acquire, an open); a rejection is not left
 * unhandled
 * @param close - shuts down what `pending` runs on (a coordinator's or backend's `close()`)
 * @param delayMs - how long the operation runs before `close` is called
 * @returns `closed`, the timing of `close()`; `pending`, the operation's, from after
 * `close()` settled
 *
 * @example
 * const acquiring = coordinator.acquire("job", { waitMs: 60_000 });
 * const { closed, pending } = await closeWhilePending(acquiring, () => coordinator.close());
 * expect(closed.ms).toBeLessThan(3_000);
 * expect(pending.error).toBeInstanceOf(Error);
 */
export async function closeWhilePending(
  pending: Promise<unknown>,
  close: () => Promise<unknown>,
  delayMs = 200,
): Promise<{ closed: Timed; pending: Timed }> {
  pending.catch(() => undefined);
  await new Promise((resolve) => setTimeout(resolve, delayMs));
  const closed = await timed(close());
  return { closed, pending: await timed(pending) };
}
