/** The one "abort" listener on a signal and the callbacks it runs. */
interface FanOut {
  readonly callbacks: Set<() => void>;
  readonly listener: () => void;
}

const fanOuts = new WeakMap<AbortSignal, FanOut>();

/**
 * Runs `callback` once when `signal` aborts, through a single "abort" listener on that signal
 * however many callbacks wait on it. Many waits commonly share one signal (a service's
 * shutdown signal passed to every `acquire`); an `EventTarget` listener per wait would make
 * Node print `MaxListenersExceededWarning` past ten of them (and costs more: see
 * docs/hot-path.md, "Core"). The signal's listener goes away with its last callback.
 *
 * Like an "abort" listener, `callback` never runs for a signal that has already aborted
 * (check `signal.aborted` first), and a function added twice to one signal runs once (pass a
 * new function per wait). Returns the function that removes `callback` (harmless after it
 * ran).
 *
 * @example
 * if (signal.aborted) throw signal.reason;
 * const stop = onceAborted(signal, () => cancelMyWait(signal.reason));
 * try {
 *   await myWait();
 * } finally {
 *   stop();
 * }
 */
export function onceAborted(signal: AbortSignal, callback: () => void): () => void {
  addSharedAbort(signal, callback);
  return () => removeSharedAbort(signal, callback);
}

/** {@link onceAborted} without the remover: undo with {@link removeSharedAbort}. @internal */
export function addSharedAbort(signal: AbortSignal, callback: () => void): void {
  let fanOut = fanOuts.get(signal);
  if (fanOut === undefined) {
    const callbacks = new Set<() => void>();
    const listener = () => {
      fanOuts.delete(signal);
      for (const run of callbacks) run();
      callbacks.clear();
    };
    fanOut = { callbacks, listener };
    fanOuts.set(signal, fanOut);
    signal.addEventListener("abort", listener, { once: true });
  }
  fanOut.callbacks.add(callback);
}

/** Removes a callback added by {@link addSharedAbort}; harmless when it ran or is gone. @internal */
export function removeSharedAbort(signal: AbortSignal, callback: () => void): void {
  const fanOut = fanOuts.get(signal);
  if (fanOut === undefined || !fanOut.callbacks.delete(callback) || fanOut.callbacks.size > 0) {
    return;
  }
  fanOuts.delete(signal);
  signal.removeEventListener("abort", fanOut.listener);
}
