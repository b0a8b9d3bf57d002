import type {
  AcquireOptions,
  Coordinator,
  Lock,
  LockLostError,
  TryAcquireOptions,
} from "@baton/core";
import { acquireFailureOf } from "./acquire-outcome.js";
import type { History } from "./history.js";
import { recordedToken } from "./recorded-token.js";

/**
 * An in-process coordinator whose acquires, releases, renewals and losses go into a
 * {@link History} under the name `process`. Deadlines are exact: read from the lock
 * (`remainingMs()`) when it is granted and after every confirmed renewal, so a loss by
 * deadline is recorded at the deadline itself, not when the timer got round to it.
 *
 * @example
 * const c = new RecordedCoordinator(history, "main", createCoordinator({ url, ttlMs }));
 * const lock = await c.acquire("job");
 * await c.release(lock);
 */
export class RecordedCoordinator {
  readonly history: History;
  readonly process: string;
  readonly coordinator: Coordinator;
  /** Live locks and their current local deadline on the history's clock. */
  readonly #deadlines = new Map<Lock, number>();
  readonly #unsubscribe: (() => void)[] = [];

  constructor(history: History, process: string, coordinator: Coordinator) {
    this.history = history;
    this.process = process;
    this.coordinator = coordinator;
    this.#unsubscribe.push(
      coordinator.on("renewed", () => {
        const now = history.now();
        let deadline: number | undefined;
        for (const lock of this.#deadlines.keys()) {
          if (!lock.held) continue;
          deadline = now + lock.remainingMs();
          this.#deadlines.set(lock, deadline);
        }
        history.renew(process, {
          ok: true,
          at: now,
          ...(deadline !== undefined ? { deadline } : {}),
        });
      }),
      coordinator.on("renewFailed", () => {
        history.renew(process, { ok: false });
      }),
    );
  }

  /** Acquires through the coordinator, recording the call and its outcome; rethrows errors. */
  async acquire(name: string, options?: AcquireOptions): Promise<Lock> {
    return (await this.#record(name, () => this.coordinator.acquire(name, options))) as Lock;
  }

  /**
   * Tries once through the coordinator: a lock (recorded `ok`), or `null` when someone else
   * holds it (recorded `fail`); errors are recorded as `unknown` and rethrown.
   */
  tryAcquire(name: string, options?: TryAcquireOptions): Promise<Lock | null> {
    return this.#record(name, () => this.coordinator.tryAcquire(name, options));
  }

  /** Releases `lock`, recording the call and whether it was still held. */
  async release(lock: Lock): Promise<boolean> {
    const handle = this.history.invokeRelease(this.process, lock.name);
    try {
      const wasHeld = await lock.release();
      handle.done(wasHeld);
      return wasHeld;
    } catch (error) {
      handle.unknown(String((error as Error)?.message ?? error));
      throw error;
    }
  }

  /** Stops recording renewals (the coordinator itself stays open). */
  detach(): void {
    for (const f of this.#unsubscribe.splice(0)) f();
  }

  /** Closes the coordinator (recording nothing more for it). */
  async close(): Promise<void> {
    this.detach();
    await this.coordinator.close();
  }

  async #record(name: string, call: () => Promise<Lock | null>): Promise<Lock | null> {
    const handle = this.history.invokeAcquire(this.process, name);
    let lock: Lock | null;
    try {
      lock = await call();
    } catch (error) {
      const failure = acquireFailureOf(error);
      if (failure.status === "fail") handle.fail(failure.reason);
      else handle.unknown(failure.reason);
      throw error;
    }
    if (lock === null) {
      handle.fail("held by someone else (tryAcquire returned null)");
      return null;
    }
    const now = this.history.now();
    const deadline = now + lock.remainingMs();
    handle.ok(recordedToken(lock), { deadline, at: now });
    this.#track(lock, deadline);
    return lock;
  }

  #track(lock: Lock, deadline: number): void {
    this.#deadlines.set(lock, deadline);
    const onAbort = () => {
      const now = this.history.now();
      const reason = (lock.signal.reason as LockLostError | undefined)?.reason ?? "unknown";
      const known = this.#deadlines.get(lock);
      this.#deadlines.delete(lock);
      if (reason === "released") return;
      // A loss by deadline happened at the deadline, however late the timer fired.
      const at = reason === "deadline" && known !== undefined ? Math.min(now, known) : now;
      this.history.lost(this.process, lock.name, { token: recordedToken(lock), reason, at });
    };
    if (lock.signal.aborted) onAbort();
    else lock.signal.addEventListener("abort", onAbort, { once: true });
  }
}
