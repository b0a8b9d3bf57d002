import type { BackendSession, LockBackend, OpenSessionOptions } from "@baton/core";

/**
 * A backend whose sessions count their `keepAlive()` calls (the renewals core asks for), so a
 * bench can report renewal traffic client-side where the store cannot count it.
 */
export class CountingBackend implements LockBackend {
  readonly #inner: LockBackend;
  /** `keepAlive()` calls over every session opened through this backend. */
  keepAlives = 0;
  /** `keepAlive()` calls that have settled (answered or failed). */
  settled = 0;
  /** Sessions opened through this backend. */
  sessions = 0;
  #onSettled: (() => void)[] = [];

  constructor(inner: LockBackend) {
    this.#inner = inner;
  }

  get kind(): string {
    return this.#inner.kind;
  }

  get guarantees(): LockBackend["guarantees"] {
    return this.#inner.guarantees;
  }

  async openSession(options: OpenSessionOptions): Promise<BackendSession> {
    const session = await this.#inner.openSession(options);
    this.sessions++;
    const keepAlive = session.keepAlive.bind(session);
    // The session object stays the adapter's own (private fields and all); only keepAlive is
    // wrapped, as an own property shadowing the prototype's method.
    Object.defineProperty(session, "keepAlive", {
      configurable: true,
      value: () => {
        this.keepAlives++;
        return keepAlive().finally(() => {
          this.settled++;
          const wake = this.#onSettled;
          this.#onSettled = [];
          for (const w of wake) w();
        });
      },
    });
    return session;
  }

  /** Resolves when the next `keepAlive()` call settles. */
  nextSettled(): Promise<void> {
    return new Promise((resolve) => this.#onSettled.push(resolve));
  }

  close(): Promise<void> {
    return this.#inner.close();
  }
}
