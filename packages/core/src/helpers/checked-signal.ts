/**
 * What a `checkOnRead` signal asks before it answers: a synchronous check that may end
 * the signal's scope (aborting the signal) right then. It must be cheap and must not throw.
 *
 * @internal
 */
export interface ReadCheck {
  check(): void;
}

const nativeAborted = accessor("aborted");
const nativeReason = accessor("reason");
const nativeThrowIfAborted = AbortSignal.prototype.throwIfAborted;

/** Where a checked signal keeps its check (a symbol: invisible to `JSON`, `for...in`, keys). */
const readCheck = Symbol("baton.readCheck");

interface CheckedSignal extends AbortSignal {
  [readCheck]?: ReadCheck;
}

/**
 * The prototype of every checked signal: `AbortSignal.prototype` with `aborted`, `reason` and
 * `throwIfAborted()` that run the signal's check first and then the native behaviour. One
 * shared object, so a check allocates nothing and a signal costs one prototype switch.
 */
// Hot path: see docs/hot-path.md, "Core".
const checkedPrototype: AbortSignal = Object.create(AbortSignal.prototype, {
  aborted: {
    get(this: CheckedSignal): boolean {
      this[readCheck]?.check();
      return nativeAborted.call(this) as boolean;
    },
    enumerable: true,
    configurable: true,
  },
  reason: {
    get(this: CheckedSignal): unknown {
      this[readCheck]?.check();
      return nativeReason.call(this);
    },
    configurable: true,
  },
  throwIfAborted: {
    value: function throwIfAborted(this: CheckedSignal): void {
      this[readCheck]?.check();
      nativeThrowIfAborted.call(this);
    },
    writable: true,
    configurable: true,
  },
});

/**
 * Makes `signal` run `source.check()` before it answers `aborted`, `reason` or
 * `throwIfAborted()`, so the first of those a caller reads tells the truth even when the
 * timer that would have aborted the signal has not run yet (a process resuming from a pause
 * runs its own overdue timers and I/O callbacks first). The signal stays a real
 * `AbortSignal`: `instanceof`, events, `AbortSignal.any` and every API that takes a signal
 * work as before. Listeners still hear of the abort only when it happens: on a check or when
 * the timer runs.
 *
 * @internal
 */
export function checkOnRead(signal: AbortSignal, source: ReadCheck): AbortSignal {
  Object.setPrototypeOf(signal, checkedPrototype);
  (signal as CheckedSignal)[readCheck] = source;
  return signal;
}

function accessor(name: "aborted" | "reason"): (this: AbortSignal) => unknown {
  const get = Object.getOwnPropertyDescriptor(AbortSignal.prototype, name)?.get;
  if (get === undefined) throw new Error(`AbortSignal.prototype.${name} is not an accessor`);
  return get;
}

/**
 * The check `signal` runs before it answers (see {@link checkOnRead}), or `undefined` for a
 * signal that checks nothing: so a signal linked to it can run the same check.
 *
 * @internal
 */
export function readCheckOf(signal: AbortSignal | undefined): ReadCheck | undefined {
  return (signal as CheckedSignal | undefined)?.[readCheck];
}
