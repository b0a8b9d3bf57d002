import {
  type BackendSession,
  BackendUnavailableError,
  type Guarantees,
  type LockBackend,
  type OpenSessionOptions,
} from "@baton/core";
import mysql from "mysql2";
import { describeTarget, endpointOf, openSessionContext, toBatonError } from "./mysql-errors.js";
import { tableNames } from "./mysql-keys.js";
import { MysqlLeaseSession, type MysqlLeaseSessionContext } from "./mysql-lease-session.js";
import { leaseStatements, recordStatements } from "./mysql-lease-statements.js";
import {
  type MysqlBackendOptions,
  type ResolvedMysqlOptions,
  resolveMysqlOptions,
} from "./mysql-options.js";
import { callbackQueryable, type MysqlCallbackQueryable } from "./mysql-shapes.js";
import { openNamedLockSession } from "./named-lock-mode.js";
import { ensureSchema, SERVER_MICROS } from "./schema.js";
import { UrgentFirst } from "./urgent-first.js";

/**
 * What the named-lock mode promises (the default; for row leases see
 * {@link MYSQL_ROW_LEASE_GUARANTEES}). Tokens come from one counter row on one server, taken in
 * the statement that takes the lock: strictly increasing there, also across restarts; a
 * failover to a replica that missed the newest increment can repeat tokens. Waiting is not
 * strictly FIFO. No semaphores or read-write locks. Not consensus-backed.
 */
export const MYSQL_GUARANTEES: Guarantees = {
  fencing: "monotonic",
  fifo: false,
  // A waiter waits in the server (GET_LOCK on a waiter connection): a release wakes it at once.
  waiters: "woken",
  consensus: false,
  crossProcess: true,
  records: true,
  semaphores: false,
};

/**
 * What the row-lease mode (`mode: "row-lease"`) promises: as {@link MYSQL_GUARANTEES}, with
 * inspection and forced release of one grant (the lease row is deleted at once; the holder's
 * renewal reports it). Waiters poll, so no FIFO; a waiter that sees a new lease on the name
 * looks again soon.
 */
export const MYSQL_ROW_LEASE_GUARANTEES: Guarantees = {
  ...MYSQL_GUARANTEES,
  waiters: "poll-resets",
  inspection: true,
  forceRelease: "grant",
};

/** Connections of the row-lease mode's pool, per backend. */
const LEASE_POOL_SIZE = 10;

/** How long an idle pooled connection stays open, ms. */
const LEASE_POOL_IDLE_MS = 10_000;

/** How long `close()` gives the pool's connections to end politely, ms. */
const POOL_END_BOUND_MS = 1_000;

/**
 * MySQL and MariaDB backend (`mysql://`, `mariadb://`), with `mysql2`. Two modes (see
 * {@link MysqlBackendOptions.mode}): named locks (`GET_LOCK`) on one dedicated connection per
 * Baton session, made into a lease by the connection's idle limit; or row leases, a row per
 * session with an expiry on the server's clock renewed by one statement per interval, for
 * pools, proxies and Galera. Tokens come from a counter table in both.
 */
export class MysqlBackend implements LockBackend {
  readonly kind = "mysql";
  /** {@link MYSQL_GUARANTEES}, or {@link MYSQL_ROW_LEASE_GUARANTEES} with `mode: "row-lease"`. */
  readonly guarantees: Guarantees;
  /** The checked options. */
  readonly options: ResolvedMysqlOptions;
  /** Where the backend connects, e.g. `db1:3306` (never the user nor the password). */
  readonly endpoint: string;
  readonly #sessions = new Set<BackendSession>();
  #pool: mysql.Pool | undefined;
  #lease: MysqlLeaseSessionContext | undefined;
  #ready: Promise<void> | undefined;
  #closed = false;
  /** The pool has ended (after the sessions closed): no call may start. */
  #ended = false;
  /** Calls on pooled connections: at most the pool's size at once, renewals first (see #run). */
  readonly #calls = new UrgentFirst(LEASE_POOL_SIZE);

  /** Checks `options` (throwing `ConfigError` before any I/O); connects lazily. */
  constructor(options: MysqlBackendOptions) {
    this.options = resolveMysqlOptions(options);
    this.endpoint = endpointOf(this.options.connection);
    this.guarantees =
      this.options.mode === "row-lease" ? MYSQL_ROW_LEASE_GUARANTEES : MYSQL_GUARANTEES;
  }

  async openSession(options: OpenSessionOptions): Promise<BackendSession> {
    if (this.#closed) throw new BackendUnavailableError("this MySQL backend is closed");
    if (options.signal?.aborted) throw options.signal.reason;
    await this.#ensureReady();
    const onClose = (closed: BackendSession) => this.#sessions.delete(closed);
    // The one place a mode's session is chosen.
    const session =
      this.options.mode === "row-lease"
        ? await MysqlLeaseSession.open(
            this.#leaseContext(),
            options.ownerId,
            options.ttlMs,
            options.signal,
            onClose,
          )
        : await openNamedLockSession(this.options, options, onClose);
    if (this.#closed) {
      await session.close();
      throw new BackendUnavailableError("this MySQL backend is closed");
    }
    this.#sessions.add(session);
    return session;
  }

  /** Closes every session (tidying its rows for a bounded time), then ends every connection. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const sessions = [...this.#sessions];
    this.#sessions.clear();
    // The sessions' close statements run on the pool, so it ends after them.
    await Promise.allSettled(sessions.map((s) => s.close()));
    this.#ended = true;
    if (this.#pool !== undefined) await endPool(this.#pool);
  }

  /** The row-lease sessions' context, made on first use. */
  #leaseContext(): MysqlLeaseSessionContext {
    if (this.#lease === undefined) {
      const names = tableNames(this.options.tablePrefix);
      this.#lease = {
        run: (sql, values, timeoutMs, urgent) => this.#run(sql, values, timeoutMs, urgent),
        namespace: this.options.namespace,
        statements: leaseStatements(names),
        recordStatements: recordStatements(names, SERVER_MICROS),
        poll: { minMs: 20, maxMs: 250 },
        where: describeTarget(this.options.connection),
      };
    }
    return this.#lease;
  }

  /** Creates (or checks) the tables once; a failure is retried on the next open. */
  #ensureReady(): Promise<void> {
    this.#ready ??= (async () => {
      const db: MysqlCallbackQueryable =
        this.options.pool === undefined
          ? this.#connectionPool()
          : callbackQueryable(this.options.pool);
      try {
        await ensureSchema(db, tableNames(this.options.tablePrefix), this.options.migrate);
      } catch (error) {
        throw toBatonError(error, openSessionContext(this.options.connection));
      }
    })().catch((error: unknown) => {
      this.#ready = undefined;
      throw error;
    });
    return this.#ready;
  }

  /** Baton's own pool: a few connections, several statements per call, big numbers as text. */
  #connectionPool(): mysql.Pool {
    if (this.#pool === undefined) {
      this.#pool = mysql.createPool({
        ...(this.options.connection as mysql.PoolOptions),
        charset: "UTF8MB4_GENERAL_CI",
        multipleStatements: true,
        supportBigNumbers: true,
        bigNumberStrings: true,
        connectionLimit: LEASE_POOL_SIZE,
        maxIdle: 1,
        idleTimeout: LEASE_POOL_IDLE_MS,
        enableKeepAlive: true,
      });
      // An idle pooled connection that fails is dropped by the pool; never crash for it.
      this.#pool.on("error", () => undefined);
    }
    return this.#pool;
  }

  /**
   * One call (one round trip) on a pooled connection. A connection whose call failed is
   * destroyed, never given back: a failed statement may leave its transaction open on it. The
   * call is bounded at the client by `timeoutMs` (mysql2 then ends the connection).
   *
   * At most as many calls as the pool has connections run at once; the others wait here, where
   * an `urgent` call (a renewal) goes first. In the pool's own queue a renewal waited behind
   * every call sent before it: thousands of reads (the polls of as many watched names) or of
   * releases (closing a coordinator that holds thousands of locks) delayed it past the session's
   * deadline, and every lock of the session was lost.
   */
  #run(sql: string, values: unknown[], timeoutMs: number, urgent = false): Promise<unknown> {
    if (this.#ended)
      return Promise.reject(new BackendUnavailableError("this MySQL backend is closed"));
    const pool = this.#connectionPool();
    return new Promise((resolve, reject) => {
      this.#calls.run((done) => {
        pool.getConnection((error, connection) => {
          if (error) {
            done();
            reject(error);
            return;
          }
          connection.query({ sql, values, timeout: timeoutMs }, (failure, result) => {
            if (failure) connection.destroy();
            else connection.release();
            done();
            if (failure) reject(failure);
            else resolve(result);
          });
        });
      }, urgent);
    });
  }
}

/** Ends `pool`'s connections politely, for a bounded time (a silent server is not waited for). */
async function endPool(pool: mysql.Pool): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    new Promise<void>((resolve) => pool.end(() => resolve())),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, POOL_END_BOUND_MS);
    }),
  ]);
  clearTimeout(timer);
}
