/**
 * An abort controller that follows `signal`: aborted with `signal.reason` when `signal`
 * aborts, and abortable on its own (e.g. by a closing session). `unlink()` removes the
 * listener; call it when done, so a long-lived `signal` keeps no reference to this one.
 * (Cheaper than `AbortSignal.any`, which registers a dependent signal on a long-lived source.)
 */
export function linkedAbort(signal: AbortSignal): {
  readonly controller: AbortController;
  unlink(): void;
} {
  const controller = new AbortController();
  if (signal.aborted) {
    controller.abort(signal.reason);
    return { controller, unlink: () => undefined };
  }
  const onAbort = () => controller.abort(signal.reason);
  signal.addEventListener("abort", onAbort, { once: true });
  return { controller, unlink: () => signal.removeEventListener("abort", onAbort) };
}
