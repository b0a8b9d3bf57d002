import { AbortScope } from "./abort-scope.js";
import { type ReadCheck, readCheckOf } from "./checked-signal.js";

/**
 * An AbortSignal that aborts when any of `signals` does (with that signal's reason), and a
 * `dispose()` that unhooks it, so it leaves no listener behind on long-lived signals. For
 * short-lived use in place of `AbortSignal.any` (see docs/hot-path.md, "Core"). (An abort
 * scope whose signal is built at once; use a scope directly where the signal may never be
 * needed.) A linked signal checks what the signals it follows check before they answer (a
 * lock's signal: its deadline, see `checkOnRead`), so it tells the truth at its first read
 * after a pause, as they do.
 */
export function linkSignals(signals: readonly (AbortSignal | undefined)[]): {
  signal: AbortSignal;
  /** Aborts the linked signal directly (e.g. a budget ran out). */
  abort: (reason: unknown) => void;
  dispose: () => void;
} {
  const checks: ReadCheck[] = [];
  for (const s of signals) {
    const check = readCheckOf(s);
    if (check !== undefined) checks.push(check);
  }
  const scope = new AbortScope(checks.length === 0 ? undefined : { check: () => runAll(checks) });
  for (const s of signals) scope.follow(s);
  return {
    signal: scope.signal,
    abort: (reason) => scope.abort(reason),
    dispose: () => scope.dispose(),
  };
}

/** Runs each check: one that ends its signal ends the linked one with it (it follows them). */
function runAll(checks: readonly ReadCheck[]): void {
  for (const check of checks) check.check();
}
