/**
 * A signal aborted when either `a` or `b` aborts (with that one's reason). Unlike
 * `AbortSignal.any`, it unhooks itself from both on `dispose()`, so linking a short wait to a
 * long-lived session signal leaves nothing registered on the session's.
 */
export function linkSignals(
  a: AbortSignal,
  b: AbortSignal,
): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  const fromA = () => controller.abort(a.reason);
  const fromB = () => controller.abort(b.reason);
  const dispose = () => {
    a.removeEventListener("abort", fromA);
    b.removeEventListener("abort", fromB);
  };
  if (a.aborted) fromA();
  else if (b.aborted) fromB();
  else {
    a.addEventListener("abort", fromA, { once: true });
    b.addEventListener("abort", fromB, { once: true });
  }
  return { signal: controller.signal, dispose };
}
