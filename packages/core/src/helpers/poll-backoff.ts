import { type BackoffOptions, backoffMs } from "./backoff.js";

/**
 * The pauses of a waiter that polls a held lock on a store that does not wake it: equal-jitter
 * backoff ({@link backoffMs}) that grows while one grant lasts and starts over when a look
 * shows a new grant of the lock. A name that changes hands is being passed around, and a
 * coordinator that takes it again right after a release holds off for a short while to let a
 * waiter in, so the waiter looks again soon. A backend whose waiters pause this way declares
 * `guarantees.waiters: "poll-resets"`.
 *
 * @example
 * const pauses = new PollBackoff({ minMs: 20, maxMs: 250 });
 * for (;;) {
 *   const look = await tryOnce(); // the grant, or the holder's token
 *   if (look.grant) return look.grant;
 *   await sleep(systemClock, pauses.next(look.holderToken), signal);
 * }
 */
export class PollBackoff {
  readonly #options: BackoffOptions;
  #seen: string | bigint | undefined;
  #round = 0;

  constructor(options: BackoffOptions) {
    this.#options = options;
  }

  /**
   * The pause before the next look, in ms, after a look that saw the grant `grant` (anything
   * that tells grants apart, as the holder's token; `undefined` when the look did not tell).
   */
  next(grant?: string | bigint): number {
    if (grant !== undefined) {
      if (this.#seen !== undefined && grant !== this.#seen) this.#round = 0;
      this.#seen = grant;
    }
    return backoffMs(this.#round++, this.#options);
  }
}
