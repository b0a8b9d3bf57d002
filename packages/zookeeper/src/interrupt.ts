import { onceAborted } from "@baton/core";

/**
 * A one-shot cancellation with plain callbacks. Every ZooKeeper call of an acquire races the
 * caller's signal and the session's end; subscribing through `EventTarget` for each call costs
 * more than the call's own JavaScript, so an acquire subscribes to its signal once, here.
 */
export class Interrupt {
  #fired = false;
  #reason: unknown;
  readonly #subscribers = new Set<(reason: unknown) => void>();

  /** True once fired. */
  get fired(): boolean {
    return this.#fired;
  }

  /** Why it fired (`undefined` before). */
  get reason(): unknown {
    return this.#reason;
  }

  /** Fires once: every subscriber is told `reason`. */
  fire(reason: unknown): void {
    if (this.#fired) return;
    this.#fired = true;
    this.#reason = reason;
    const subscribers = [...this.#subscribers];
    this.#subscribers.clear();
    for (const subscriber of subscribers) subscriber(reason);
  }

  /** Calls `listener` when fired (at once if it already has); returns the unsubscribe. */
  subscribe(listener: (reason: unknown) => void): () => void {
    if (this.#fired) {
      listener(this.#reason);
      return noop;
    }
    this.#subscribers.add(listener);
    return () => {
      this.#subscribers.delete(listener);
    };
  }

  /** An interrupt that fires when `signal` aborts or `parent` fires; `dispose` when done. */
  static of(
    signal: AbortSignal | undefined,
    parent: Interrupt,
  ): { interrupt: Interrupt; dispose: () => void } {
    const interrupt = new Interrupt();
    const unsubscribe = parent.subscribe((reason) => interrupt.fire(reason));
    if (signal === undefined) return { interrupt, dispose: unsubscribe };
    if (signal.aborted) {
      interrupt.fire(signal.reason);
      return { interrupt, dispose: unsubscribe };
    }
    // Many acquires may share one signal: one listener on it between them (see onceAborted).
    const stop = onceAborted(signal, () => interrupt.fire(signal.reason));
    return {
      interrupt,
      dispose: () => {
        unsubscribe();
        stop();
      },
    };
  }
}

function noop(): void {}
