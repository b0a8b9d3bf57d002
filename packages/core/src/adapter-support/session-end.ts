import { SessionLostError } from "../contract/errors.js";

/**
 * How a backend session ends, for adapters: {@link SessionEnd.signal} aborts when the session
 * is lost or closed (it ends every wait of the session), {@link SessionEnd.lost} only when it
 * is lost (the session's `lost` signal), each with the `SessionLostError` that ended it.
 *
 * @example
 * readonly #end = new SessionEnd("the Example session ended");
 * readonly lost = this.#end.lost;
 *
 * async acquire(name: string, options: BackendAcquireOptions): Promise<Grant | null> {
 *   this.#end.assertLive();
 *   // ... on finding the session gone: this.#end.markLost(new SessionLostError("..."));
 * }
 */
export class SessionEnd {
  readonly #ended = new AbortController();
  readonly #lost = new AbortController();
  readonly #endedMessage: string;

  /** @param endedMessage - the message of the error {@link SessionEnd.assertLive} throws when the session ended for a reason that is no `SessionLostError` */
  constructor(endedMessage: string) {
    this.#endedMessage = endedMessage;
  }

  /** Aborted on loss or close. */
  get signal(): AbortSignal {
    return this.#ended.signal;
  }

  /** Aborted on loss only. */
  get lost(): AbortSignal {
    return this.#lost.signal;
  }

  /** True once the session is lost or closed. */
  get ended(): boolean {
    return this.#ended.signal.aborted;
  }

  /** @throws SessionLostError (the one that ended the session) once it is lost or closed */
  assertLive(): void {
    if (this.#ended.signal.aborted) {
      const reason: unknown = this.#ended.signal.reason;
      throw reason instanceof SessionLostError ? reason : new SessionLostError(this.#endedMessage);
    }
  }

  /** Ends the session as lost: aborts both signals with `error`, unless they already are. */
  markLost(error: SessionLostError): void {
    if (!this.#ended.signal.aborted) this.#ended.abort(error);
    if (!this.#lost.signal.aborted) this.#lost.abort(error);
  }

  /** Ends the session as closed: aborts {@link SessionEnd.signal} with `error`, unless it already is. */
  close(error: SessionLostError): void {
    this.#ended.abort(error);
  }
}
