import { BackendUnavailableError } from "@baton/core";
import pg from "pg";
import { WAIT_UNTIL_FREE } from "./statements.js";

interface Waiter {
  readonly client: pg.Client;
  readonly pid: number;
  broken: boolean;
}

/** How many idle waiter connections are kept for reuse. */
const MAX_IDLE = 4;

/**
 * Connections that wait in the server until an advisory lock is free. A wait never runs on a
 * session's own connection (its renewals would queue behind it). A cancelled wait is
 * cancelled in the server (`pg_cancel_backend`), so it leaves no queued lock request behind;
 * a waiter connection is reused only after its cancel has landed.
 */
export class WaiterPool {
  readonly #connection: pg.ClientConfig;
  readonly #cancel: (pid: number) => Promise<void>;
  readonly #idle: Waiter[] = [];
  readonly #all = new Set<Waiter>();
  #closed = false;

  /**
   * @param connection - settings for new waiter connections
   * @param cancel - cancels the running statement of backend `pid` (from another connection)
   */
  constructor(connection: pg.ClientConfig, cancel: (pid: number) => Promise<void>) {
    this.#connection = connection;
    this.#cancel = cancel;
  }

  /**
   * Resolves once nobody holds `key` exclusively (at that instant: the caller must still race
   * for it). Rejects with `signal.reason` when aborted, leaving nothing queued in the server.
   */
  async waitUntilFree(key: bigint, signal: AbortSignal): Promise<void> {
    const waiter = await this.#take(signal);
    if (signal.aborted) {
      this.#give(waiter);
      throw signal.reason;
    }
    return await new Promise<void>((resolve, reject) => {
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
      const finish = () => {
        signal.removeEventListener("abort", onAbort);
        if (cancelling === undefined) this.#give(waiter);
        else
          void cancelling.then((cancelled) => {
            // A cancel that may not have landed could still hit this connection's next wait.
            if (!cancelled) waiter.broken = true;
            this.#give(waiter);
          });
      };
      waiter.client.query({ ...WAIT_UNTIL_FREE, values: [key.toString()] }).then(
        () => {
          finish();
          if (settled) return;
          settled = true;
          resolve();
        },
        (error: unknown) => {
          finish();
          if (settled) return;
          settled = true;
          const state = (error as { code?: string }).code;
          // A lock_timeout or statement_timeout set for the role: the caller just tries again.
          if (state === "55P03" || state === "57014") resolve();
          else {
            waiter.broken = true;
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
    await Promise.allSettled(all.map((w) => w.client.end()));
  }

  async #take(signal: AbortSignal): Promise<Waiter> {
    if (this.#closed) throw new BackendUnavailableError("this PostgreSQL backend is closed");
    const idle = this.#idle.pop();
    if (idle !== undefined) return idle;
    const client = new pg.Client({
      fallback_application_name: "baton-waiter",
      ...this.#connection,
    });
    const waiter: Waiter = { client, pid: 0, broken: false };
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

  #give(waiter: Waiter): void {
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
