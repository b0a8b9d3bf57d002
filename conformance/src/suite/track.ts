/** A pending promise and whether it has settled yet, from {@link track}. */
export interface Tracked<T> {
  /** The promise, settling as the tracked one does; its rejection is never unhandled. */
  readonly promise: Promise<T>;
  /** True once the promise has resolved or rejected. */
  readonly settled: () => boolean;
}

/**
 * Tracks whether `pending` (e.g. a queued acquire) has settled, so a test can check that a
 * waiter is still waiting. A rejection left unawaited is not reported as unhandled.
 */
export function track<T>(pending: Promise<T>): Tracked<T> {
  let settled = false;
  const promise = pending.finally(() => {
    settled = true;
  });
  promise.catch(() => undefined);
  return { promise, settled: () => settled };
}
