import { onceAborted } from "../helpers/once-aborted.js";
import { checkFunction } from "../helpers/validate.js";
import { type Logger, safeLog } from "./logger.js";

/** A listener of event `E` of the event map `M`. */
export type Listener<M, E extends keyof M> = (payload: M[E]) => void;

/**
 * A small typed event hub over the event map `M` (event name to payload). A listener that throws never breaks the emitter: the error goes
 * to the logger (or is reported on stderr when there is none).
 */
export class EventHub<M extends object> {
  readonly #listeners = new Map<keyof M, Set<(payload: never) => void>>();
  /** `addEventListener` listeners, each with the hub listener that calls it. */
  readonly #targets = new Map<
    keyof M,
    Map<
      Parameters<EventTarget["addEventListener"]>[1],
      { wrapper: (payload: never) => void; stopOnAbort: (() => void) | undefined }
    >
  >();
  readonly #logger: Logger | undefined;

  constructor(logger?: Logger) {
    this.#logger = logger;
  }

  /** Subscribes; returns the function that unsubscribes. */
  on<E extends keyof M & string>(event: E, listener: Listener<M, E>): () => void {
    checkListener(listener);
    let set = this.#listeners.get(event);
    if (set === undefined) {
      set = new Set();
      this.#listeners.set(event, set);
    }
    set.add(listener as (payload: never) => void);
    return () => {
      this.off(event, listener);
    };
  }

  /**
   * Subscribes for the next event only. `off(event, listener)` with the same listener removes
   * it before it runs, as with Node's `EventEmitter`.
   */
  once<E extends keyof M & string>(event: E, listener: Listener<M, E>): void {
    checkListener(listener);
    const wrapper: OnceListener = (payload: never) => {
      this.off(event, wrapper as Listener<M, E>);
      (listener as (payload: never) => void)(payload);
    };
    wrapper.listener = listener as (payload: never) => void;
    this.on(event, wrapper as Listener<M, E>);
  }

  /**
   * `EventTarget`'s subscription: `listener` gets a `CustomEvent` whose `detail` is the
   * payload. Honours `once` and `signal`; adding the same listener twice adds it once.
   */
  addEventListener(
    type: string,
    listener: Parameters<EventTarget["addEventListener"]>[1] | null,
    options?: Parameters<EventTarget["addEventListener"]>[2],
  ): void {
    if (listener === null) return;
    const event = type as keyof M & string;
    let targets = this.#targets.get(event);
    if (targets === undefined) {
      targets = new Map();
      this.#targets.set(event, targets);
    }
    if (targets.has(listener)) return;
    const opts = typeof options === "object" ? options : {};
    if (opts.signal?.aborted) return;
    const unsubscribe = () => this.removeEventListener(type, listener);
    const stopOnAbort = opts.signal ? onceAborted(opts.signal, unsubscribe) : undefined;
    const wrapper = (payload: never) => {
      if (opts.once === true) unsubscribe();
      const dispatched = new CustomEvent(type, { detail: payload });
      if (typeof listener === "function") listener(dispatched);
      else listener.handleEvent(dispatched);
    };
    targets.set(listener, { wrapper, stopOnAbort });
    this.on(event, wrapper as Listener<M, typeof event>);
  }

  /** Removes a listener added with {@link EventHub.addEventListener}. */
  removeEventListener(
    type: string,
    listener: Parameters<EventTarget["addEventListener"]>[1] | null,
  ): void {
    if (listener === null) return;
    const event = type as keyof M & string;
    const targets = this.#targets.get(event);
    const entry = targets?.get(listener);
    if (targets === undefined || entry === undefined) return;
    targets.delete(listener);
    if (targets.size === 0) this.#targets.delete(event);
    entry.stopOnAbort?.();
    this.off(event, entry.wrapper as Listener<M, typeof event>);
  }

  /** Unsubscribes `listener` (added with `on` or `once`); harmless when it is not there. */
  off<E extends keyof M & string>(event: E, listener: Listener<M, E>): void {
    const set = this.#listeners.get(event);
    if (set === undefined) return;
    if (!set.delete(listener as (payload: never) => void)) {
      for (const candidate of set) {
        if ((candidate as OnceListener).listener === listener) {
          set.delete(candidate);
          break;
        }
      }
    }
    if (set.size === 0) this.#listeners.delete(event);
  }

  /**
   * Whether `event` has a listener: the hot path (every acquire and release) builds its
   * payload only then.
   */
  listens(event: keyof M): boolean {
    const set = this.#listeners.get(event);
    return set !== undefined && set.size > 0;
  }

  /** Delivers `payload` to every listener of `event`, synchronously. */
  emit<E extends keyof M & string>(event: E, payload: M[E]): void {
    const set = this.#listeners.get(event);
    if (set === undefined) return;
    for (const listener of set) {
      try {
        (listener as Listener<M, E>)(payload);
      } catch (error) {
        if (this.#logger?.error)
          safeLog(this.#logger, "error", `baton: a "${event}" listener threw`, error);
        else process.emitWarning(`baton: a "${event}" listener threw: ${String(error)}`);
      }
    }
  }
}

/** A `once` listener, with the listener it stands for (so `off` finds it). */
type OnceListener = ((payload: never) => void) & { listener?: (payload: never) => void };

function checkListener(listener: unknown): void {
  checkFunction(listener, "listener", "must be a function taking the event's payload");
}
