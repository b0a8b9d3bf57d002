import type {
  AcquireOptions,
  Coordinator,
  Lock,
  LockLostError,
  Permit,
  PermitAcquireOptions,
  PermitTryOptions,
  ReadWriteLock,
  Semaphore,
  TryAcquireOptions,
} from "@baton/core";
import { acquireFailureOf } from "./acquire-outcome.js";
import {
  type AcquireHandle,
  type History,
  type PermitShare,
  READ_SHARE,
  WRITE_SHARE,
} from "./history.js";
import { recordedToken } from "./recorded-token.js";

/**
 * An in-process coordinator whose acquires, releases, renewals and losses go into a
 * {@link History} under the name `process`. Deadlines are exact: read from the lock
 * (`remainingMs()`) when it is granted and after every confirmed renewal, so a loss by
 * deadline is recorded at the deadline itself, not when the timer got round to it. Permits
 * of a semaphore and read or write locks of a read-write lock are recorded with what they
 * take and a hold id of their own, so one coordinator may hold several of a name at once.
 *
 * @example
 * const c = new RecordedCoordinator(history, "main", createCoordinator({ url, ttlMs }));
 * const lock = await c.acquire("job");
 * await c.release(lock);
 * const permit = await c.acquirePermits(c.coordinator.semaphore("exports", { permits: 3 }));
 * await c.release(permit);
 */
export class RecordedCoordinator {
  readonly history: History;
  readonly process: string;
  readonly coordinator: Coordinator;
  /** Live locks and their current local deadline on the history's clock. */
  readonly #deadlines = new Map<Lock, number>();
  /** The hold id of each permit recorded here. */
  readonly #holds = new WeakMap<Lock, string>();
  #holdSeq = 0;
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

  /** Takes permits of `semaphore` (`semaphore.acquire`), recording the call and its outcome. */
  async acquirePermits(semaphore: Semaphore, options?: PermitAcquireOptions): Promise<Permit> {
    const share = semaphoreShare(semaphore, options?.permits);
    return (await this.#recordPermit(semaphore.name, share, () =>
      semaphore.acquire(options),
    )) as Permit;
  }

  /** Tries once for permits of `semaphore`: `null` (recorded `fail`) when not enough are free. */
  tryAcquirePermits(semaphore: Semaphore, options?: PermitTryOptions): Promise<Permit | null> {
    const share = semaphoreShare(semaphore, options?.permits);
    return this.#recordPermit(semaphore.name, share, () => semaphore.tryAcquire(options));
  }

  /** Takes a read lock of `rw`, recording the call and its outcome. */
  async read(rw: ReadWriteLock, options?: AcquireOptions): Promise<Permit> {
    return (await this.#recordPermit(rw.name, READ_SHARE, () => rw.read(options))) as Permit;
  }

  /** Takes the write lock of `rw`, recording the call and its outcome. */
  async write(rw: ReadWriteLock, options?: AcquireOptions): Promise<Permit> {
    return (await this.#recordPermit(rw.name, WRITE_SHARE, () => rw.write(options))) as Permit;
  }

  /** Tries once for a read lock of `rw` (`null`, recorded `fail`, when a writer holds or waits). */
  tryRead(rw: ReadWriteLock, options?: TryAcquireOptions): Promise<Permit | null> {
    return this.#recordPermit(rw.name, READ_SHARE, () => rw.tryRead(options));
  }

  /** Tries once for the write lock of `rw` (`null`, recorded `fail`, when anybody holds or waits). */
  tryWrite(rw: ReadWriteLock, options?: TryAcquireOptions): Promise<Permit | null> {
    return this.#recordPermit(rw.name, WRITE_SHARE, () => rw.tryWrite(options));
  }

  /**
   * Downgrades the write lock `write` to a read lock, recorded as the write's release (when
   * the call is made: the write is no longer relied on) and a read acquired by the call.
   */
  async downgrade(write: Permit): Promise<Permit> {
    const at = this.history.now();
    const release = this.history.invokeRelease(
      this.process,
      write.name,
      at,
      this.#holds.get(write),
    );
    const acquire = this.#invokePermit(write.name, READ_SHARE, at);
    let read: Permit;
    try {
      read = await write.downgrade();
    } catch (error) {
      release.unknown(String((error as Error)?.message ?? error));
      this.#fail(acquire.handle, error);
      throw error;
    }
    release.done(true);
    this.#granted(read, acquire);
    return read;
  }

  /** Releases `lock` (or permit), recording the call and whether it was still held. */
  async release(lock: Lock): Promise<boolean> {
    const handle = this.history.invokeRelease(
      this.process,
      lock.name,
      this.history.now(),
      this.#holds.get(lock),
    );
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

  #invokePermit(
    name: string,
    share: PermitShare,
    at = this.history.now(),
  ): { handle: AcquireHandle; hold: string } {
    this.#holdSeq += 1;
    const hold = `${this.process}#${this.#holdSeq}`;
    return { handle: this.history.invokePermits(this.process, name, share, hold, at), hold };
  }

  async #recordPermit(
    name: string,
    share: PermitShare,
    call: () => Promise<Permit | null>,
  ): Promise<Permit | null> {
    const acquire = this.#invokePermit(name, share);
    let permit: Permit | null;
    try {
      permit = await call();
    } catch (error) {
      this.#fail(acquire.handle, error);
      throw error;
    }
    if (permit === null) {
      acquire.handle.fail("not enough permits free (tryAcquire returned null)");
      return null;
    }
    this.#granted(permit, acquire);
    return permit;
  }

  #granted(permit: Permit, acquire: { handle: AcquireHandle; hold: string }): void {
    this.#holds.set(permit, acquire.hold);
    const now = this.history.now();
    const deadline = now + permit.remainingMs();
    acquire.handle.ok(recordedToken(permit), { deadline, at: now });
    this.#track(permit, deadline);
  }

  #fail(handle: AcquireHandle, error: unknown): void {
    const failure = acquireFailureOf(error);
    if (failure.status === "fail") handle.fail(failure.reason);
    else handle.unknown(failure.reason);
  }

  async #record(name: string, call: () => Promise<Lock | null>): Promise<Lock | null> {
    const handle = this.history.invokeAcquire(this.process, name);
    let lock: Lock | null;
    try {
      lock = await call();
    } catch (error) {
      this.#fail(handle, error);
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
      const hold = this.#holds.get(lock);
      this.history.lost(this.process, lock.name, {
        token: recordedToken(lock),
        reason,
        at,
        ...(hold !== undefined ? { hold } : {}),
      });
    };
    if (lock.signal.aborted) onAbort();
    else lock.signal.addEventListener("abort", onAbort, { once: true });
  }
}

function semaphoreShare(semaphore: Semaphore, permits: number | undefined): PermitShare {
  return { permits: permits ?? 1, limit: semaphore.permits, mode: "permit" };
}
