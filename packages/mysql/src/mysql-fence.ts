import {
  BackendUnavailableError,
  BatonError,
  ConfigError,
  DEFAULT_TTL_MS,
  type Fence,
  type FenceRaiseOptions,
  parseBackendUrl,
  StaleTokenError,
} from "@baton/core";
import mysql from "mysql2/promise";
import { errorNumber, isFatal, toBatonError } from "./mysql-errors.js";
import {
  type MysqlFenceOptions,
  type ResolvedMysqlFenceOptions,
  resolveMysqlFenceOptions,
  timeoutSeconds,
} from "./mysql-fence-options.js";
import { type MysqlFenceQueryable, prepareFenceTable } from "./mysql-fence-table.js";
import { connectionFromUrl } from "./mysql-options.js";

/** Connections of the pool a fence opens for itself from a URL. */
const OWN_POOL_SIZE = 4;
/** ER_LOCK_WAIT_TIMEOUT: a statement waited `innodb_lock_wait_timeout` for a row lock. */
const LOCK_WAIT_TIMEOUT_ERRNO = 1205;

/**
 * A connection checked out of a pool, as {@link MysqlFence} uses it for one transaction (a
 * mysql2 `PoolConnection` of `mysql2/promise` is one): statements, `release()` to give it
 * back, and `destroy()` to close a connection whose transaction must not go on.
 */
export interface MysqlFenceConnection extends MysqlFenceQueryable {
  /** Gives the connection back to its pool. */
  release(): void;
  /** Closes the connection at once; the server rolls back its open transaction. */
  destroy(): void;
}

/**
 * What the fence uses of a pool (a mysql2 `Pool` of `mysql2/promise` is one): statements,
 * and connections for transactions.
 */
export interface MysqlFencePool extends MysqlFenceQueryable {
  /** A connection of the pool, given back with `release()`. */
  getConnection(): Promise<MysqlFenceConnection>;
}

/** A pool of mysql2's callback API: the fence uses its `promise()` form. */
export interface MysqlFenceCallbackPool {
  /** The same pool, with promises. */
  promise(): MysqlFencePool;
}

/**
 * A fence in MySQL or MariaDB (a `job_fence` table): one row per resource holding the newest
 * token seen. Raising the fence and the write it guards share one transaction, so a stale
 * token leaves nothing behind, and the fence row stays locked until that transaction ends,
 * so fenced writes to one resource are serialised.
 *
 * Usable as the `fence` of a correctness-mode coordinator with any backend that mode accepts
 * (etcd, ZooKeeper, PostgreSQL, MySQL, memory): the coordinator raises it with each new lock's
 * token (under the lock name) before the holder's first write. A raise is one statement that
 * stores the token only when it is at least the stored one. A write then passes only with the
 * token its resource was raised to: a stale token is a `StaleTokenError`, a resource nothing
 * raised (not the lock's name) a `ConfigError`, unless `raiseOnWrite` is set.
 *
 * Its own transactions set `innodb_lock_wait_timeout` and `wait_timeout` on their connection
 * (see `timeoutMs`), and put them back after, so a holder paused in the middle of a fenced
 * write is cut off by the server and cannot block the next holder for long, nor commit when
 * it wakes.
 */
export class MysqlFence implements Fence {
  /** The quoted table name. */
  readonly table: string;
  readonly #pool: MysqlFencePool;
  /** The pool the fence opened from a URL, which `close()` ends. */
  readonly #ownPool: mysql.Pool | undefined;
  readonly #o: ResolvedMysqlFenceOptions;
  readonly #raise: string;
  readonly #read: string;
  #closed = false;
  #ready: Promise<void> | undefined;

  /**
   * @param pool a mysql2 pool (`mysql2/promise`'s, or the callback API's; any
   *   {@link MysqlFencePool}; never ended by the fence), or a `mysql://` or `mariadb://` URL:
   *   the fence then opens a small pool of its own, ended by {@link MysqlFence.close}.
   */
  constructor(
    pool: MysqlFencePool | MysqlFenceCallbackPool | string,
    options: MysqlFenceOptions = {},
  ) {
    this.#o = resolveMysqlFenceOptions(options);
    if (typeof pool === "string") {
      this.#ownPool = poolFromUrl(pool);
      this.#pool = this.#ownPool as unknown as MysqlFencePool;
    } else {
      this.#pool = promisePool(pool);
      this.#ownPool = undefined;
    }
    const { table, resource, token } = this.#o;
    this.table = table.sql;
    // One statement: the token is stored only when it is at least the stored one, and
    // LAST_INSERT_ID(expr) hands back what the row holds afterwards, as the result's insertId.
    this.#raise = `INSERT INTO ${table.sql} (${resource}, ${token}) VALUES (?, LAST_INSERT_ID(CAST(? AS SIGNED)))
ON DUPLICATE KEY UPDATE ${token} = LAST_INSERT_ID(IF(${token} <= VALUES(${token}), VALUES(${token}), ${token}))`;
    this.#read = `SELECT CAST(${token} AS CHAR) AS token FROM ${table.sql} WHERE ${resource} = ?`;
  }

  /**
   * Raises the fence of `resource` to `token` in a transaction of its own. Rejects with
   * `StaleTokenError` when a greater token was already seen; the same token is accepted
   * again. Waits for a row lock at most `timeoutMs` (or `options.ttlMs`), rounded up to a
   * second; when `options.signal` aborts, the raise's connection is closed, so the server
   * rolls it back and it never takes effect later.
   */
  async raise(resource: string, token: bigint, options: FenceRaiseOptions = {}): Promise<void> {
    checkArgs(resource, token);
    const { signal, ttlMs } = checkRaiseOptions(options);
    signal?.throwIfAborted();
    await this.#ensureTable();
    const limitMs = this.#o.timeoutMs ?? ttlMs ?? DEFAULT_TTL_MS;
    // No user code runs in this transaction: every error is the store's, so none escapes as
    // a raw driver error (a server restart mid-raise is a BackendUnavailableError).
    await this.#inTransaction(resource, limitMs, signal, async (connection) => {
      await this.#upsert(connection, resource, token);
    }).catch((error: unknown) => {
      if (signal?.aborted && error === signal.reason) throw error;
      throw toBatonError(error, `could not raise the fence of "${resource}" in ${this.table}`);
    });
  }

  /**
   * Checks the fence inside the caller's own open transaction on `connection`: passes when
   * the fence of `resource` holds `token` (the lock's raise put it there), rejects with
   * `StaleTokenError` when it holds a greater one (then roll the transaction back), and with
   * `ConfigError` (field `resource`) when it was not raised to `token`, unless
   * `raiseOnWrite`. The fence row stays locked (`FOR UPDATE`) until that transaction ends.
   * Bound the transaction yourself (see the package README): set `innodb_lock_wait_timeout`
   * and `wait_timeout` to the lock's TTL, in seconds, before `START TRANSACTION`.
   */
  async check(connection: MysqlFenceQueryable, resource: string, token: bigint): Promise<void> {
    checkArgs(resource, token);
    if (
      typeof connection !== "object" ||
      connection === null ||
      typeof connection.query !== "function"
    ) {
      throw new ConfigError(
        "connection",
        "must be a mysql2/promise connection inside an open transaction",
      );
    }
    await this.#ensureTable();
    await this.#check(connection, resource, token);
  }

  /**
   * Runs `fn` in one transaction that first checks the fence of `resource` (as
   * {@link MysqlFence.check}). A stale token rejects with `StaleTokenError` before `fn`
   * runs; an error of `fn` rolls everything back. Resolves with `fn`'s result after the
   * commit. The transaction waits for a row lock, and sits idle between statements, at most
   * `timeoutMs` (default 15000, rounded up to a second): past that the server ends it,
   * nothing is committed, and it rejects with `BackendUnavailableError` (the lock is then
   * likely lost as well).
   *
   * `Connection` is the type of the connections the fence's pool gives: a mysql2
   * `PoolConnection` for a `mysql2/promise` pool and for a pool the fence opened from a URL;
   * name it to get your driver's own type (`fence.transaction<void, PoolConnection>(...)`,
   * or annotate `fn`'s parameter).
   */
  async transaction<T, Connection extends MysqlFenceQueryable = MysqlFenceConnection>(
    resource: string,
    token: bigint,
    fn: (connection: Connection) => T | Promise<T>,
  ): Promise<T> {
    checkArgs(resource, token);
    if (typeof fn !== "function") throw new ConfigError("fn", "must be a function");
    await this.#ensureTable();
    const limitMs = this.#o.timeoutMs ?? DEFAULT_TTL_MS;
    return this.#inTransaction(resource, limitMs, undefined, async (connection) => {
      await this.#check(connection, resource, token);
      // The fence's pool gives the caller's driver's connections (see Connection above).
      return fn(connection as unknown as Connection);
    });
  }

  /** The newest token the fence has seen for `resource`, or `undefined`. */
  async highest(resource: string): Promise<bigint | undefined> {
    await this.#ensureTable();
    try {
      return await this.#readToken(this.#pool, resource);
    } catch (error) {
      throw toBatonError(error, `could not read the fence of "${resource}" in ${this.table}`);
    }
  }

  /**
   * Creates the fence table when missing and checks an existing one's columns. Idempotent.
   * Every other method does it on first use.
   */
  migrate(): Promise<void> {
    return this.#ensureTable();
  }

  /** Ends the pool the fence opened from a URL; does nothing to a pool it was given. */
  async close(): Promise<void> {
    if (this.#ownPool === undefined || this.#closed) return;
    this.#closed = true;
    await this.#ownPool.end();
  }

  async #readToken(
    db: MysqlFenceQueryable,
    resource: string,
    lock = "",
  ): Promise<bigint | undefined> {
    const [rows] = await db.query(`${this.#read}${lock}`, [resource]);
    const row = (rows as Array<{ token: string }>)[0];
    return row === undefined ? undefined : BigInt(row.token);
  }

  async #check(db: MysqlFenceQueryable, resource: string, token: bigint): Promise<void> {
    if (this.#o.raiseOnWrite) {
      await this.#upsert(db, resource, token);
      return;
    }
    const held = await this.#readToken(db, resource, " FOR UPDATE");
    if (held === token) return;
    if (held !== undefined && held > token) throw new StaleTokenError(resource, token, held);
    throw new ConfigError(
      "resource",
      `the fence of "${resource}" in ${this.table} ${held === undefined ? "was never raised" : `holds token ${held}`}, not ${token}: nothing raised it when that token's lock was granted, so it cannot reject a stale holder. Correctness mode raises the fence under the lock's name: write with the lock's name as the resource, or call raise(resource, token) for each other resource right after acquiring, before its first write`,
    );
  }

  async #upsert(db: MysqlFenceQueryable, resource: string, token: bigint): Promise<void> {
    const [header] = await db.query(this.#raise, [resource, token.toString()]);
    // What the row holds now; a table with an AUTO_INCREMENT column of its own, or a token
    // past 2^53 on a pool without supportBigNumbers, reads it back instead.
    const insertId = (header as { insertId?: unknown } | null)?.insertId;
    if (
      (typeof insertId === "number" && Number.isSafeInteger(insertId)) ||
      typeof insertId === "string"
    ) {
      if (BigInt(insertId) === token) return;
    }
    const held = await this.#readToken(db, resource);
    if (held === token) return;
    throw new StaleTokenError(resource, token, held ?? token);
  }

  /**
   * Runs `fn` between `START TRANSACTION` and `COMMIT` on a pooled connection, with the
   * server's timeouts set to `limitMs` and put back after. When `signal` aborts before the
   * commit, the connection is closed, so the server rolls back even a statement still waiting
   * for a lock. A connection that failed (the server ended the transaction, say) is closed,
   * never given back to the pool.
   */
  async #inTransaction<T>(
    resource: string,
    limitMs: number,
    signal: AbortSignal | undefined,
    fn: (connection: MysqlFenceConnection) => Promise<T>,
  ): Promise<T> {
    const connection = await connect(this.#pool, signal);
    let ended: unknown;
    let committing = false;
    // mysql2 settles no statement of a destroyed connection: an abort rejects this instead.
    let onAbort: () => void = () => undefined;
    const abandoned = new Promise<never>((_resolve, reject) => {
      onAbort = () => {
        if (committing) return;
        ended ??= signal?.reason;
        connection.destroy();
        reject(signal?.reason);
      };
    });
    abandoned.catch(() => undefined);
    const step = <R>(pending: R | Promise<R>): Promise<R> =>
      signal === undefined ? Promise.resolve(pending) : Promise.race([pending, abandoned]);
    signal?.addEventListener("abort", onAbort, { once: true });
    const seconds = timeoutSeconds(limitMs);
    let limited = false;
    try {
      await step(
        connection.query(
          `SET @baton_fence_lock_wait = @@SESSION.innodb_lock_wait_timeout, @baton_fence_idle = @@SESSION.wait_timeout, SESSION innodb_lock_wait_timeout = ${seconds}, SESSION wait_timeout = ${seconds}`,
        ),
      );
      limited = true;
      await step(connection.query("START TRANSACTION"));
      const result = await step(fn(connection));
      signal?.throwIfAborted();
      committing = true;
      await connection.query("COMMIT");
      return result;
    } catch (error) {
      if (ended === undefined && !isFatal(error) && !committing) {
        await connection.query("ROLLBACK").catch((rollbackError: unknown) => {
          ended = rollbackError;
        });
      }
      if (isFatal(error)) ended ??= error;
      if (signal?.aborted) throw signal.reason;
      throw this.#explain(error, resource, limitMs, ended !== undefined);
    } finally {
      signal?.removeEventListener("abort", onAbort);
      if (ended === undefined && limited) {
        await connection
          .query(
            "SET SESSION innodb_lock_wait_timeout = @baton_fence_lock_wait, SESSION wait_timeout = @baton_fence_idle",
          )
          .catch((error: unknown) => {
            ended = error;
          });
      }
      if (ended === undefined) connection.release();
      else connection.destroy();
    }
  }

  /** What a failed fence transaction tells its caller. */
  #explain(error: unknown, resource: string, limitMs: number, connectionGone: boolean): unknown {
    const seconds = timeoutSeconds(limitMs);
    if (errorNumber(error) === LOCK_WAIT_TIMEOUT_ERRNO) {
      return new BackendUnavailableError(
        `a fenced transaction on "${resource}" in ${this.table} waited ${seconds} s for a row lock, held by another transaction (a paused holder's fenced write, or one of your own without a lock wait timeout); nothing was committed`,
        { cause: error },
      );
    }
    if (error instanceof BatonError) return error;
    if (connectionGone) {
      return new BackendUnavailableError(
        `a fenced transaction on "${resource}" in ${this.table} lost its connection before it committed, so nothing of it was committed (${(error as Error)?.message ?? String(error)}). The server ends a fenced transaction left idle for ${seconds} s, as when its process was paused: its lock is then likely lost too`,
        { cause: error },
      );
    }
    return error;
  }

  #ensureTable(): Promise<void> {
    this.#ready ??= prepareFenceTable(this.#pool, this.#o, toBatonError).catch((error: unknown) => {
      this.#ready = undefined;
      throw error;
    });
    return this.#ready;
  }
}

/** The promise form of a pool of either mysql2 API, checked. */
function promisePool(pool: unknown): MysqlFencePool {
  if (typeof pool === "object" && pool !== null) {
    const p = pool as Partial<MysqlFencePool & MysqlFenceCallbackPool>;
    // A callback pool's getConnection takes a callback; its promise() is the same pool.
    if (typeof p.promise === "function") return p.promise();
    if (typeof p.getConnection === "function" && typeof p.query === "function") {
      return p as MysqlFencePool;
    }
  }
  throw new ConfigError("pool", "must be a mysql2 pool or a mysql:// or mariadb:// URL");
}

/** A pooled connection, or the signal's reason; a connection that comes after the abort goes back. */
async function connect(
  pool: MysqlFencePool,
  signal: AbortSignal | undefined,
): Promise<MysqlFenceConnection> {
  const pending = pool.getConnection().catch((error: unknown) => {
    throw toBatonError(error, "the fence could not take a connection from its pool");
  });
  if (signal === undefined) return pending;
  return new Promise<MysqlFenceConnection>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    pending.then(
      (connection) => {
        signal.removeEventListener("abort", onAbort);
        if (signal.aborted) connection.release();
        else resolve(connection);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}

function poolFromUrl(url: string): mysql.Pool {
  const parsed = connectionFromUrl(parseBackendUrl(url));
  if (
    parsed.mode !== undefined ||
    parsed.namespace !== undefined ||
    parsed.tablePrefix !== undefined
  ) {
    throw new ConfigError(
      "url",
      'a fence URL takes no "mode", "namespace" or "tablePrefix" parameter; name the fence table with the table option',
    );
  }
  // MysqlConnectionConfig describes mysql2's connection options by shape: mysql2 reads it as it is.
  return mysql.createPool({
    ...(parsed.connection as mysql.PoolOptions),
    connectionLimit: OWN_POOL_SIZE,
  });
}

function checkArgs(resource: unknown, token: unknown): void {
  if (typeof resource !== "string" || resource.length === 0) {
    throw new ConfigError("resource", "must be a non-empty string");
  }
  if (typeof token !== "bigint") {
    throw new ConfigError("token", `must be a bigint, got ${typeof token}`);
  }
}

function checkRaiseOptions(options: unknown): FenceRaiseOptions {
  if (typeof options !== "object" || options === null) {
    throw new ConfigError("options", "must be an object");
  }
  const { signal, ttlMs } = options as FenceRaiseOptions;
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new ConfigError("signal", "must be an AbortSignal");
  }
  if (ttlMs !== undefined && !(Number.isSafeInteger(ttlMs) && ttlMs > 0)) {
    throw new ConfigError("ttlMs", `must be a positive whole number of ms, got ${String(ttlMs)}`);
  }
  return { ...(signal ? { signal } : {}), ...(ttlMs ? { ttlMs } : {}) };
}

/**
 * A fenced store in MySQL or MariaDB: `check(connection, resource, token)` inside your own
 * transaction, or `transaction(resource, token, fn)`. Also a `Fence` for correctness mode.
 * `pool` is a mysql2 pool, or a `mysql://` / `mariadb://` URL for a pool of the fence's own
 * (see {@link MysqlFence.close}).
 */
export function mysqlFence(
  pool: MysqlFencePool | MysqlFenceCallbackPool | string,
  options?: MysqlFenceOptions,
): MysqlFence {
  return new MysqlFence(pool, options);
}
