import { boundedCall, systemClock } from "@baton/core";

/** How long a cancel of a wait may take to land before it is sent again. */
const CANCEL_AGAIN_MS = 25;

const BACKGROUND = { keepAlive: false } as const;

/**
 * A wait for a lock that runs on a session's own connection (see
 * PostgresSession.#waitAcquire), and its cancel. Another statement that needs the connection,
 * or an abort, {@link interrupt}s it: a wait already running in the server is then cancelled
 * from another connection, again every {@link CANCEL_AGAIN_MS} until it ends (a cancel that
 * reaches the server before the statement is lost).
 */
export class ConnectionWait {
  #interrupted = false;
  #running = false;
  #finished = false;
  readonly #cancels: Promise<void>[] = [];
  readonly #cancel: () => Promise<void>;

  /** @param cancel - cancels the running statement of the connection (`pg_cancel_backend`) */
  constructor(cancel: () => Promise<void>) {
    this.#cancel = cancel;
  }

  /** Whether it was interrupted (then it is not started, or ends soon). */
  get interrupted(): boolean {
    return this.#interrupted;
  }

  /** Ends it soon: another statement needs the connection, or the wait was aborted. */
  readonly interrupt = (): void => {
    if (this.#interrupted) return;
    this.#interrupted = true;
    if (this.#running) this.#sendCancel();
  };

  /**
   * Runs the wait statement `query` (an interrupt from now on cancels it in the server): its
   * result, or its error.
   */
  async run<T>(query: () => Promise<T>): Promise<T> {
    this.#running = true;
    try {
      return await query();
    } finally {
      this.#running = false;
      this.#finished = true;
    }
  }

  /**
   * After {@link run}, when it was cancelled and the connection lives on (`alive`): waits for
   * the cancels to land, at most `boundMs` (a cancel that cannot reach the server, whose
   * connection cannot be opened, must not hold up the session's statements). A cancel that
   * arrived after the wait ended may still be pending in the server then, and would fail the
   * next statement: `absorb` runs a statement and resolves `true` when a cancel failed it
   * (then it runs again, three times at most), `false` when none is left.
   */
  async settle(boundMs: number, alive: () => boolean, absorb: () => Promise<boolean>) {
    if (this.#cancels.length === 0 || !alive()) return;
    await boundedCall(Promise.all(this.#cancels), { timeoutMs: boundMs }).catch(() => undefined);
    for (let i = 0; i < 3; i++) if (!(await absorb())) return;
  }

  #sendCancel(): void {
    this.#cancels.push(
      this.#cancel().then(
        () => {
          systemClock.setTimer(
            () => {
              if (!this.#finished) this.#sendCancel();
            },
            CANCEL_AGAIN_MS,
            BACKGROUND,
          );
        },
        () => undefined,
      ),
    );
  }
}
