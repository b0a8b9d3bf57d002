import { AbortScope } from "./abort-scope.js";

/**
 * An AbortSignal that aborts when any of `signals` does (with that signal's reason), and a
 * `dispose()` that unhooks it, so it leaves no listener behind on long-lived signals. For
 * short-lived use in place of `AbortSignal.any` (see docs/hot-path.md, "Core"). (An abort
 * scope whose signal is built at once; use a scope directly where the signal may never be
 * needed.)
 */
export function linkSignals(signals: readonly (AbortSignal | undefined)[]): {
  signal: AbortSignal;
  /** Aborts the linked signal directly (e.g. a budget ran out). */
  abort: (reason: unknown) => void;
  dispose: () => void;
} {
  const scope = new AbortScope();
  for (const s of signals) scope.follow(s);
  return {
    signal: scope.signal,
    abort: (reason) => scope.abort(reason),
    dispose: () => scope.dispose(),
  };
}
