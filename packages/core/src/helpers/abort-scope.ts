import { checkOnRead, type ReadCheck } from "./checked-signal.js";
import { addSharedAbort, onceAborted, removeSharedAbort } from "./once-aborted.js";

/**
 * A cancellation scope whose `AbortSignal` is built only when someone asks for it.
 *
 * Most scopes on the hot path (one per acquire, one per lock) end without anyone ever
 * listening to their signal, so the scope keeps its state in plain fields, runs internal
 * callbacks from a plain list, and creates the real signal lazily: a signal asked for after
 * the scope ended is already aborted with the same reason.
 *
 * @internal
 */
export class AbortScope {
  // Hot path: see docs/hot-path.md, "Core".
  #aborted = false;
  #reason: unknown;
  #controller: AbortController | undefined;
  /** The first callback (the usual case: one race per scope), then any others. */
  #callback: ((reason: unknown) => void) | undefined;
  #callbacks: Array<(reason: unknown) => void> | undefined;
  /**
   * The first outside signal this scope follows (the usual case: a caller's signal) and the
   * callback it runs, kept in two fields (no list, no remover); then each further one's stop.
   */
  #first: AbortSignal | undefined;
  #onFirst: (() => void) | undefined;
  #followed: Array<() => void> | undefined;
  /** Run by the signal before it answers `aborted`, `reason` or `throwIfAborted()`. */
  readonly #readCheck: ReadCheck | undefined;

  /**
   * @param readCheck what the signal checks before it answers `aborted`, `reason` or
   *   `throwIfAborted()` (see `checkOnRead`); it may end this scope right then. The
   *   scope's own `aborted` and `reason` never run it.
   */
  constructor(readCheck?: ReadCheck) {
    this.#readCheck = readCheck;
  }

  /** True once the scope has ended. */
  get aborted(): boolean {
    return this.#aborted;
  }

  /** Why the scope ended (undefined while it has not). */
  get reason(): unknown {
    return this.#reason;
  }

  /** A real `AbortSignal` that aborts with this scope; built on first access. */
  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      const signal = this.#controller.signal as ScopeSignal;
      if (this.#aborted) this.#controller.abort(this.#reason);
      else {
        signal[signalScope] = this;
        if (this.#readCheck !== undefined) checkOnRead(signal, this.#readCheck);
      }
    }
    return this.#controller.signal;
  }

  /** Ends the scope with `reason`: the signal (if built) aborts and callbacks run. Idempotent. */
  abort(reason: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    this.#finish();
  }

  /**
   * Runs `callback` once when the scope ends. Like an "abort" listener added to an aborted
   * signal, it never runs when the scope has already ended: check `aborted` first. Remove it
   * with {@link removeCallback}.
   */
  addCallback(callback: (reason: unknown) => void): void {
    if (this.#aborted) return;
    if (this.#callback === undefined) this.#callback = callback;
    else {
      this.#callbacks ??= [];
      this.#callbacks.push(callback);
    }
  }

  /** Removes a callback added by {@link addCallback}; harmless when it is not there. */
  removeCallback(callback: (reason: unknown) => void): void {
    if (this.#callback === callback) {
      this.#callback = undefined;
      return;
    }
    const list = this.#callbacks;
    if (list === undefined) return;
    const at = list.indexOf(callback);
    if (at >= 0) list.splice(at, 1);
  }

  /**
   * Ends this scope when `signal` aborts, with its reason. May be called for several. However
   * many scopes follow one signal (a shutdown signal passed to every acquire), the signal
   * gets one "abort" listener (see `onceAborted`).
   */
  follow(signal: AbortSignal | undefined): this {
    if (signal === undefined || this.#aborted) return this;
    if (signal.aborted) {
      this.abort(signal.reason);
      return this;
    }
    // A scope's own signal (a backend linking the signal of its acquire): follow the scope
    // itself, with no "abort" listener on the signal. Hot path: see docs/hot-path.md, "Core".
    const owner = (signal as ScopeSignal)[signalScope];
    if (owner === undefined && this.#first === undefined) {
      const onAbort = () => this.abort(signal.reason);
      this.#first = signal;
      this.#onFirst = onAbort;
      addSharedAbort(signal, onAbort);
      return this;
    }
    let stop: () => void;
    if (owner === undefined) stop = onceAborted(signal, () => this.abort(signal.reason));
    else {
      const onEnd = (reason: unknown) => this.abort(reason);
      owner.addCallback(onEnd);
      stop = () => owner.removeCallback(onEnd);
    }
    this.#followed ??= [];
    this.#followed.push(stop);
    return this;
  }

  /**
   * Stops following the outside signals, so a long-lived one keeps no reference to this
   * scope. The scope itself stays as it is. Ending the scope disposes it too.
   */
  dispose(): void {
    const first = this.#first;
    if (first !== undefined) {
      this.#first = undefined;
      removeSharedAbort(first, this.#onFirst as () => void);
      this.#onFirst = undefined;
    }
    const followed = this.#followed;
    this.#followed = undefined;
    if (followed === undefined) return;
    for (const stop of followed) stop();
  }

  #finish(): void {
    this.dispose();
    if (this.#controller !== undefined) this.#controller.abort(this.#reason);
    const first = this.#callback;
    const callbacks = this.#callbacks;
    this.#callback = undefined;
    this.#callbacks = undefined;
    if (first === undefined && callbacks === undefined) return;
    const reason = this.#reason;
    first?.(reason);
    if (callbacks !== undefined) for (const callback of callbacks) callback(reason);
  }
}

/** Where a scope's own signal keeps its scope (a symbol: invisible to `JSON`, `for...in`, keys). */
const signalScope = Symbol("baton.scope");

interface ScopeSignal extends AbortSignal {
  [signalScope]?: AbortScope;
}

/** Something that can end: a real `AbortSignal` or an {@link AbortScope}. @internal */
export type Abortable = AbortSignal | AbortScope;

/**
 * Runs `callback` once when `source` aborts (not for one that has already aborted: check
 * `aborted` first). Undo with {@link removeAbortCallback}.
 *
 * @internal
 */
export function addAbortCallback(source: Abortable, callback: () => void): void {
  if (source instanceof AbortScope) source.addCallback(callback);
  else addSharedAbort(source, callback);
}

/** Removes a callback added by {@link addAbortCallback}; harmless when it ran or is gone. @internal */
export function removeAbortCallback(source: Abortable, callback: () => void): void {
  if (source instanceof AbortScope) source.removeCallback(callback);
  else removeSharedAbort(source, callback);
}
