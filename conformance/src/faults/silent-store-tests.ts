import { BackendUnavailableError, createCoordinator, type LockBackend } from "@baton/core";
import { afterEach, beforeEach, expect, it } from "vitest";
import { settleTime } from "./settle-time.js";
import { SilentListener } from "./silent-listener.js";

/**
 * How long `close()` may take against a store that never answers: generous for a busy
 * machine (a close that waits on the store would take minutes, not seconds).
 */
export const SILENT_CLOSE_BOUND_MS = 5_000;

/**
 * A {@link SilentListener} for every test of the enclosing `describe` block: started before
 * each test, closed after it. Returns the current test's listener.
 *
 * @example
 * const silent = silentListenerPerTest();
 * it("...", async () => {
 *   const backend = new RedisBackend({ url: `redis://127.0.0.1:${silent().port}` });
 * });
 */
export function silentListenerPerTest(): () => SilentListener {
  let silent: SilentListener | undefined;
  beforeEach(async () => {
    silent = await SilentListener.start();
  });
  afterEach(async () => {
    await silent?.close();
    silent = undefined;
  });
  return () => {
    if (silent === undefined) throw new Error("the silent listener is read outside a test");
    return silent;
  };
}

/** What {@link silentStoreTests} needs of an adapter. */
export interface SilentStoreTarget {
  /** The listener of the current test (see {@link silentListenerPerTest}). */
  readonly listener: () => SilentListener;
  /** Put before each test's title, e.g. `"(lease) "`. */
  readonly label?: string;
  /** A backend URL that reaches `silent`. */
  url(silent: SilentListener): string;
  /** A backend that reaches `silent`, with a connect timeout longer than the test waits. */
  backend(silent: SilentListener): LockBackend;
  /** What the acquire's error must name (default `127.0.0.1:<port>`). */
  names?(silent: SilentListener): string[];
  /** A secret in the URL (a password) that no error may print. */
  readonly secret?: string;
}

/**
 * Registers the tests every adapter owes a store that accepts connections and never
 * answers: an acquire gives up with a `BackendUnavailableError` naming the server (never a
 * secret) and `coordinator.close()` then settles soon, and `backend.close()` settles while a
 * session is still opening, failing the open; neither leaves a connection open.
 */
export function silentStoreTests(target: SilentStoreTarget): void {
  const label = target.label ?? "";
  const names = (silent: SilentListener) =>
    target.names?.(silent) ?? [`${silent.host}:${silent.port}`];
  const never = target.secret === undefined ? "" : ", never the password";

  it(`${label}an acquire that gives up names the server${never}; coordinator.close() settles soon after, no connection left`, async () => {
    const silent = target.listener();
    const coordinator = createCoordinator({ url: target.url(silent), ttlMs: 2_000 });
    const error = await coordinator.acquire("job", { waitMs: 30_000 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(BackendUnavailableError);
    const message = (error as Error).message;
    for (const name of names(silent)) expect(message).toContain(name);
    if (target.secret !== undefined) expect(message).not.toContain(target.secret);
    expect(silent.accepted).toBeGreaterThan(0);
    expect(await settleTime(coordinator.close(), 20_000)).toBeLessThan(SILENT_CLOSE_BOUND_MS);
    await silent.until((s) => s.open === 0);
  }, 60_000);

  it(`${label}backend.close() settles while a session is still opening, and the open fails`, async () => {
    const silent = target.listener();
    const backend = target.backend(silent);
    const opening = backend.openSession({ ttlMs: 2_000, ownerId: "silent" });
    opening.catch(() => undefined);
    await silent.until((s) => s.accepted > 0);
    expect(await settleTime(backend.close(), 20_000)).toBeLessThan(SILENT_CLOSE_BOUND_MS);
    // The open does not outlive the backend's close either, and no connection is left open.
    expect(await settleTime(opening, 20_000)).toBeLessThan(SILENT_CLOSE_BOUND_MS);
    await expect(opening).rejects.toBeInstanceOf(BackendUnavailableError);
    await silent.until((s) => s.open === 0);
  }, 60_000);
}
