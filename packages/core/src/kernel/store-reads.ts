import type { BackendSession, Holder, PermitHolder } from "../contract/backend.js";
import { asUnavailable, BackendUnavailableError, ConfigError } from "../contract/errors.js";
import { AbortScope } from "../helpers/abort-scope.js";
import { type BackoffOptions, backoffMs } from "../helpers/backoff.js";
import { boundedCall, raceAbortable } from "../helpers/bounded-call.js";
import { type Clock, sleep } from "../helpers/clock.js";
import { linkSignals } from "../helpers/link-signals.js";
import type { BackendLoader } from "./backend-loader.js";
import type { CoordinatorEventHub } from "./events.js";
import { noPermitsError, noRecordsError } from "./kernel-errors.js";
import { closedError, type Lifecycle } from "./lifecycle.js";
import type { ManagedSession } from "./managed-session.js";
import type { RecordAccess } from "./recipe-host.js";
import type { SessionPool } from "./session-pool.js";

/** A backend session that keeps durable records. */
type RecordSession = BackendSession & Required<Pick<BackendSession, "readRecord" | "writeRecord">>;

/** The pause between tries of a watch whose store failed. */
const WATCH_RETRY: BackoffOptions = { minMs: 20, maxMs: 1_000 };

/**
 * What a coordinator reads from its store through the live session: holders, permit holders,
 * durable records and watches, each bounded by one TTL and ended by `close()`.
 */
export class StoreReads {
  readonly #ttlMs: number;
  readonly #clock: Clock;
  readonly #events: CoordinatorEventHub;
  readonly #sessions: SessionPool;
  readonly #backend: BackendLoader;
  readonly #lifecycle: Lifecycle;

  constructor(
    ttlMs: number,
    clock: Clock,
    events: CoordinatorEventHub,
    sessions: SessionPool,
    backend: BackendLoader,
    lifecycle: Lifecycle,
  ) {
    this.#ttlMs = ttlMs;
    this.#clock = clock;
    this.#events = events;
    this.#sessions = sessions;
    this.#backend = backend;
    this.#lifecycle = lifecycle;
  }

  /** The current holder of `name` as the store sees it (`name` checked by the caller). */
  holder(name: string): Promise<Holder | null> {
    return this.#bounded(`the holder of "${name}"`, (session) => session.holder(name));
  }

  /** The granted permits of `name`. */
  permitHolders(name: string): Promise<PermitHolder[]> {
    return this.#bounded(`the permit holders of "${name}"`, (session) => {
      const read = session.permitHolders;
      if (read === undefined) throw noPermitsError(this.#backend.kind());
      return read.call(session, name);
    });
  }

  /**
   * A read of the store through the live session, bounded like every other call by one TTL;
   * `what` names it in the timeout error.
   */
  async #bounded<T>(what: string, read: (session: BackendSession) => Promise<T>): Promise<T> {
    const lifecycle = this.#lifecycle;
    lifecycle.assertOpen();
    // Bounded like every other call: one TTL.
    const bound = new AbortScope();
    lifecycle.pending.add(bound);
    const timer = this.#clock.setTimer(
      () => bound.abort(new Error("baton: budget ran out")),
      this.#ttlMs,
    );
    try {
      const session = await this.#sessions.current(bound);
      return await raceAbortable(read(session.backendSession), bound);
    } catch (error) {
      if (lifecycle.closing.signal.aborted) throw closedError();
      if (bound.aborted) {
        throw new BackendUnavailableError(
          `the store did not answer a read of ${what} within ${this.#ttlMs} ms`,
        );
      }
      if (error instanceof ConfigError) throw error;
      throw asUnavailable(error, `could not read ${what}`);
    } finally {
      timer.cancel();
      lifecycle.pending.delete(bound);
    }
  }

  /** The store's durable records, through the live session, each call bounded by one TTL. */
  async records(signal: AbortSignal | undefined): Promise<RecordAccess> {
    this.#lifecycle.assertOpen();
    await this.#recordSession(signal);
    const bound = {
      timeoutMs: this.#ttlMs,
      signal: this.#lifecycle.closing.signal,
      what: "the job record",
    };
    // Each call goes through the session live at that moment: a run outlives the session it
    // started on when its holder was paused, and its outcome must still be written (or refused).
    return {
      read: async (key) => {
        const session = await this.#recordSession(signal);
        return boundedCall(session.readRecord(key), { ...bound, name: key });
      },
      write: async (key, value, expected) => {
        const session = await this.#recordSession(signal);
        return boundedCall(session.writeRecord(key, value, expected), { ...bound, name: key });
      },
    };
  }

  /** The live backend session, checked to keep records. */
  async #recordSession(signal: AbortSignal | undefined): Promise<RecordSession> {
    const backend = await this.#backend.get();
    if (!backend.guarantees.records) throw noRecordsError(backend.kind);
    const session = (await this.#sessions.current(signal)).backendSession;
    if (session.readRecord === undefined || session.writeRecord === undefined) {
      throw new ConfigError(
        "backend",
        `the ${backend.kind} backend declares records, but its session has no readRecord/writeRecord: the adapter is broken`,
      );
    }
    return session as RecordSession;
  }

  /**
   * The holder of `name` now and after every change (`name` and `user` checked by the
   * caller); see `Coordinator.watch`.
   */
  async *watch(name: string, user: AbortSignal | undefined): AsyncGenerator<Holder | null> {
    this.#lifecycle.assertOpen();
    const linked = linkSignals([user, this.#lifecycle.closing.signal]);
    const signal = linked.signal;
    try {
      for (let failures = 0; !signal.aborted; ) {
        try {
          const session = await this.#sessions.current(signal);
          const source = session.backendSession.watch
            ? session.backendSession.watch(name, signal)
            : this.#poll(session, name, signal);
          for await (const holder of source) {
            failures = 0;
            yield holder;
          }
          if (!signal.aborted) throw new BackendUnavailableError(`the watch of "${name}" ended`);
        } catch (error) {
          if (signal.aborted) break;
          this.#events.emit("backgroundError", { error, during: `watching "${name}"` });
          failures++;
          await sleep(this.#clock, backoffMs(failures, WATCH_RETRY), signal).catch(() => undefined);
        }
      }
    } finally {
      linked.abort(new Error("baton: watch ended"));
    }
  }

  async *#poll(
    session: ManagedSession,
    name: string,
    signal: AbortSignal,
  ): AsyncGenerator<Holder | null> {
    let last: string | undefined;
    while (!signal.aborted && session.isValid()) {
      const holder = await raceAbortable(session.backendSession.holder(name), signal);
      const key = holder === null ? "" : `${holder.ownerId}\u0000${holder.token}`;
      if (key !== last) {
        last = key;
        yield holder;
      }
      await sleep(this.#clock, session.renewEveryMs, signal);
    }
  }
}
