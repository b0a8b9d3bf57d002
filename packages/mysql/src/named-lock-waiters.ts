import { BackendUnavailableError } from "@baton/core";
import type { MysqlConnectionConfig } from "./mysql-shapes.js";
import {
  type Connection,
  connect,
  endConnection,
  newConnection,
  run,
} from "./named-lock-connection.js";
import { decodeFree } from "./named-lock-replies.js";

/** How many idle waiter connections are kept for reuse. */
const MAX_IDLE = 4;

/**
 * How long an idle waiter connection may stay idle at the server (`wait_timeout`, seconds): a
 * process that froze or vanished leaves none behind for long.
 */
const WAITER_IDLE_SECONDS = 60;

interface Waiter {
  readonly connection: Connection;
  readonly id: number;
  broken: boolean;
}

function noop(): void {}

/**
 * Connections that wait in the server until a named lock is free, so that a wait never
 * occupies a session's own connection (its heartbeat would queue behind it, and the server
 * would end it as idle). A wait is `GET_LOCK(name, seconds)` that gives the lock straight back
 * in the same statement when it gets it: the waiting session then tries on its own connection
 * (and may find it taken again: waiting is not FIFO). An abandoned wait is ended in the server
 * with `KILL QUERY` from another connection (the wait then returns NULL, and the connection
 * can be reused); a waiter connection whose wait failed in any other way is ended.
 */
export class NamedLockWaiters {
  readonly #settings: MysqlConnectionConfig;
  readonly #statement: string;
  readonly #idle: Waiter[] = [];
  readonly #all = new Set<Waiter>();
  /** Set by {@link endIdle}: waiters given back end instead of idling, until the next wait. */
  #ending = false;
  #closed = false;

  /**
   * @param settings - settings for new waiter connections
   * @param statement - the wait (NamedLockStatements.waitUntilFree)
   */
  constructor(settings: MysqlConnectionConfig, statement: string) {
    this.#settings = settings;
    this.#statement = statement;
  }

  /**
   * Resolves `true` once the lock `lockKey` was free (at that instant: the caller must still
   * race for it), `false` after `seconds` without. Rejects with `signal.reason` when aborted,
   * leaving no wait behind in the server.
   */
  async waitUntilFree(lockKey: string, seconds: number, signal: AbortSignal): Promise<boolean> {
    if (signal.aborted) throw signal.reason;
    const waiter = await this.#take(signal);
    let abandoned = false;
    let killed: Promise<void> = Promise.resolve();
    let rejectAborted: (reason: unknown) => void = noop;
    const aborted = new Promise<never>((_, reject) => {
      rejectAborted = reject;
    });
    // One listener per wait, removed when the wait ends: an acquire that waits again and again
    // on one signal must not pile listeners up on it.
    const onAbort = () => {
      abandoned = true;
      killed = this.#kill(waiter.id).catch(() => {
        waiter.broken = true;
      });
      rejectAborted(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
    const query = run(waiter.connection, this.#statement, [lockKey, seconds, lockKey]);
    try {
      if (signal.aborted) onAbort();
      const outcome = await Promise.race([query.then((rows) => decodeFree(rows)), aborted]);
      return outcome;
    } catch (error) {
      if (signal.aborted) throw signal.reason;
      waiter.broken = true;
      throw new BackendUnavailableError(
        `waiting for a MySQL named lock failed: ${(error as Error).message}`,
        { cause: error },
      );
    } finally {
      signal.removeEventListener("abort", onAbort);
      // Reused only once its wait has ended in the server (and the kill of it has landed).
      void query
        .then(noop, () => {
          if (!abandoned) waiter.broken = true;
        })
        .then(() => killed)
        .then(() => this.#give(waiter));
    }
  }

  /** Ends every waiter connection; no wait can start after. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#idle.length = 0;
    const all = [...this.#all];
    this.#all.clear();
    await Promise.all(all.map((w) => endConnection(w.connection)));
  }

  /**
   * Ends the idle waiter connections, and those of waits still under way as they end, until
   * the next wait: nothing is kept open while no session needs it.
   */
  async endIdle(): Promise<void> {
    this.#ending = true;
    const idle = this.#idle.splice(0);
    for (const w of idle) this.#all.delete(w);
    await Promise.all(idle.map((w) => endConnection(w.connection)));
  }

  async #take(signal: AbortSignal): Promise<Waiter> {
    if (this.#closed) throw new BackendUnavailableError("this MySQL backend is closed");
    this.#ending = false;
    const idle = this.#idle.pop();
    if (idle !== undefined) return idle;
    const connection = newConnection(this.#settings);
    const waiter: Waiter = { connection, id: 0, broken: false };
    const drop = () => {
      waiter.broken = true;
      this.#drop(waiter);
    };
    connection.on("error", drop);
    connection.on("end", drop);
    this.#all.add(waiter);
    try {
      await connect(connection);
      await run(connection, `SET SESSION wait_timeout = ${WAITER_IDLE_SECONDS}`);
      (waiter as { id: number }).id = connection.threadId ?? 0;
    } catch (error) {
      this.#drop(waiter);
      connection.destroy();
      if (signal.aborted) throw signal.reason;
      throw new BackendUnavailableError(
        `could not open a MySQL connection to wait on: ${(error as Error).message}`,
        { cause: error },
      );
    }
    if (this.#closed) {
      this.#drop(waiter);
      connection.destroy();
      throw new BackendUnavailableError("this MySQL backend is closed");
    }
    return waiter;
  }

  #give(waiter: Waiter): void {
    if (waiter.broken || this.#closed || this.#ending || this.#idle.length >= MAX_IDLE) {
      this.#drop(waiter);
      void endConnection(waiter.connection);
      return;
    }
    this.#idle.push(waiter);
  }

  #drop(waiter: Waiter): void {
    this.#all.delete(waiter);
    const at = this.#idle.indexOf(waiter);
    if (at >= 0) this.#idle.splice(at, 1);
  }

  /**
   * `KILL QUERY id` from a connection of its own, ended at once (a kill is rare: an abandoned
   * wait), so nothing stays open for it.
   */
  async #kill(id: number): Promise<void> {
    if (this.#closed) return;
    const connection = newConnection(this.#settings);
    connection.on("error", noop);
    try {
      await connect(connection);
      await run(connection, `KILL QUERY ${Number(id)}`);
    } finally {
      void endConnection(connection);
    }
  }
}
