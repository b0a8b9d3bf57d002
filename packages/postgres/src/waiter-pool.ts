import { BackendUnavailableError } from "@baton/core";
import type pg from "pg";
import { type Connections, endClient } from "./connections.js";
import type { PgConnectionConfig } from "./pg-shapes.js";
import { SQLSTATE, sqlState } from "./postgres-errors.js";
import { QUEUE_LEAVE, type Statement, WAIT_UNTIL_FREE } from "./statements.js";

/** A waiter connection, taken from a {@link WaiterPool} and given back to it. */
export interface Waiter {
  readonly client: pg.Client;
  readonly pid: number;
  broken: boolean;
  /** Settles when the last statement run on it, and any cancel of it, has finished. */
  settled: Promise<void>;
}

/** How a statement on a waiter connection ended (see {@link WaiterPool.run}). */
export type WaitOutcome = "done" | "lock-timeout" | "cancelled";

function noop(): void {}

/** Resolves after the pending promise callbacks (and I/O callbacks) have run. */
export function nextMacrotask(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** How many idle waiter connections are kept for reuse. */
const MAX_IDLE = 4;

/**
 * Connections that wait in the server until an advisory lock is free. A wait never runs on a
 * session's own connection (its renewals would queue behind it). A cancelled wait is
 * cancelled in the server (`pg_cancel_backend`), so it leaves no queued lock request behind;
 * a waiter connection is reused only after its cancel has landed, and after it has dropped the
 * queue key it may hold (else it is ended, which drops it too).
 */
export class WaiterPool {
  readonly #connection: PgConnectionConfig;
  readonly #connections: Connections;
  readonly #cancel: (pid: number) => Promise<void>;
  readonly #idle: Waiter[] = [];
  readonly #all = new Set<Waiter>();
  #closed = false;

  /**
   * @param connection - settings for new waiter connections
   * @param connections - the backend's connections, which new waiter connections join
   * @param cancel - cancels the running statement of backend `pid` (from another connection)
   */
  constructor(
    connection: PgConnectionConfig,
    connections: Connections,
    cancel: (pid: number) => Promise<void>,
  ) {
    this.#connection = connection;
    this.#connections = connections;
    this.#cancel = cancel;
  }

  /**
   * Resolves once nobody holds `key` exclusively (at that instant: the caller must still race
   * for it), or after `boundMs` at the latest. Rejects with `signal.reason` when aborted,
   * leaving nothing queued in the server.
   */
  async waitUntilFree(key: bigint, boundMs: number, signal: AbortSignal): Promise<void> {
    const waiter = await this.take(signal);
    try {
      await this.run(waiter, WAIT_UNTIL_FREE, [key.toString(), String(boundMs)], signal);
    } finally {
      this.give(waiter, false);
    }
  }

  /**
   * Runs `statement` on `waiter`, a connection taken with {@link take}. Resolves `"done"`, or
   * `"lock-timeout"` (55P03) or `"cancelled"` (57014, not by `signal`: a timeout set for the
   * role, or an administrator). When `signal` aborts it rejects with its reason at once and
   * cancels the statement in the server; {@link give} waits for that cancel to land.
   */
  run(
    waiter: Waiter,
    statement: Statement,
    values: unknown[],
    signal: AbortSignal,
  ): Promise<WaitOutcome> {
    if (signal.aborted) return Promise.reject(signal.reason);
    return new Promise<WaitOutcome>((resolve, reject) => {
      let settled = false;
      let cancelling: Promise<boolean> | undefined;
      const onAbort = () => {
        if (settled) return;
        settled = true;
        reject(signal.reason);
        cancelling = this.#cancel(waiter.pid).then(
          () => true,
          () => false,
        );
      };
      signal.addEventListener("abort", onAbort, { once: true });
      const query = waiter.client.query({ ...statement, values });
      waiter.settled = query.then(noop, noop).then(async () => {
        signal.removeEventListener("abort", onAbort);
        // A cancel that may not have landed could still hit this connection's next statement.
        if (cancelling !== undefined && !(await cancelling)) waiter.broken = true;
      });
      query.then(
        () => {
          if (settled) return;
          settled = true;
          resolve("done");
        },
        (error: unknown) => {
          const state = sqlState(error);
          const timedOut = state === SQLSTATE.lockNotAvailable;
          const cancelled = state === SQLSTATE.queryCanceled;
          if (!timedOut && !cancelled) waiter.broken = true;
          if (settled) return;
          settled = true;
          if (timedOut) resolve("lock-timeout");
          else if (cancelled) resolve("cancelled");
          else {
            reject(
              new BackendUnavailableError(
                `waiting for a PostgreSQL advisory lock failed: ${(error as Error).message}`,
                { cause: error },
              ),
            );
          }
        },
      );
    });
  }

  /** Ends every waiter connection. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#idle.length = 0;
    const all = [...this.#all];
    this.#all.clear();
    await Promise.all(all.map((w) => endClient(w.client)));
  }

  /** A waiter connection of its own, until {@link give} (in every case). */
  async take(signal: AbortSignal): Promise<Waiter> {
    if (this.#closed) throw new BackendUnavailableError("this PostgreSQL backend is closed");
    const idle = this.#idle.pop();
    if (idle !== undefined) return idle;
    const client = this.#connections.client({
      fallback_application_name: "baton-waiter",
      ...this.#connection,
    });
    const waiter: Waiter = { client, pid: 0, broken: false, settled: Promise.resolve() };
    client.on("error", () => {
      waiter.broken = true;
      this.#drop(waiter);
    });
    client.on("end", () => {
      waiter.broken = true;
      this.#drop(waiter);
    });
    this.#all.add(waiter);
    try {
      await client.connect();
      // Waiters wait as long as their caller wants, and idle in the pool between waits.
      await client.query(
        "SET lock_timeout = 0; SET statement_timeout = 0; SET idle_session_timeout = 0; SET client_connection_check_interval = 1000",
      );
      const result = await client.query("SELECT pg_backend_pid() AS pid");
      (waiter as { pid: number }).pid = (result.rows[0] as { pid: number }).pid;
    } catch (error) {
      this.#drop(waiter);
      void client.end().catch(() => undefined);
      if (signal.aborted) throw signal.reason;
      throw new BackendUnavailableError(
        `could not open a PostgreSQL connection to wait on: ${(error as Error).message}`,
        { cause: error },
      );
    }
    if (this.#closed) {
      this.#drop(waiter);
      void client.end().catch(() => undefined);
      throw new BackendUnavailableError("this PostgreSQL backend is closed");
    }
    return waiter;
  }

  /**
   * Gives `waiter` back once its last statement (and any cancel of it) has finished. With
   * `leave`, it first drops the queue key it may hold ({@link QUEUE_LEAVE}); a connection that
   * cannot is ended, which frees it as well.
   */
  give(waiter: Waiter, leave: boolean): void {
    void waiter.settled.then(async () => {
      if (leave && !waiter.broken && !this.#closed) {
        // Mostly called as a grant is being handed out: let that finish first, the next in
        // line only needs to be queued again before the lock is released.
        // Hot path: see docs/hot-path.md, "PostgreSQL".
        await nextMacrotask();
        await waiter.client.query(QUEUE_LEAVE).catch(() => {
          waiter.broken = true;
        });
      }
      this.#keep(waiter);
    });
  }

  #keep(waiter: Waiter): void {
    if (waiter.broken || this.#closed || this.#idle.length >= MAX_IDLE) {
      this.#drop(waiter);
      void waiter.client.end().catch(() => undefined);
      return;
    }
    this.#idle.push(waiter);
  }

  #drop(waiter: Waiter): void {
    this.#all.delete(waiter);
    const at = this.#idle.indexOf(waiter);
    if (at >= 0) this.#idle.splice(at, 1);
  }
}
