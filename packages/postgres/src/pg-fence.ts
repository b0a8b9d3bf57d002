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
import pg from "pg";
import {
  type PgFenceOptions,
  type ResolvedPgFenceOptions,
  resolvePgFenceOptions,
  transactionLimits,
} from "./pg-fence-options.js";
import { prepareFenceTable } from "./pg-fence-table.js";
import type { PgClientLike, PgPoolLike, Queryable } from "./pg-shapes.js";
import { SQLSTATE, sqlState, toBatonError } from "./postgres-errors.js";
import { connectionFromUrl } from "./postgres-options.js";

/** Connections of the pool a fence opens for itself from a URL. */
const OWN_POOL_SIZE = 4;

/**
 * A fence in PostgreSQL (a `job_fence` table): one row per resource holding the newest token
 * seen. Raising the fence and the write it guards share one transaction, so a stale token
 * leaves nothing behind, and the fence row stays locked until that transaction ends, so
 * fenced writes to one resource are serialised.
 *
 * Usable as the `fence` of a correctness-mode coordinator with any backend that mode accepts
 * (etcd, ZooKeeper, PostgreSQL, memory): the coordinator raises it with each new lock's token
 * (under the lock name) before the holder's first write. A write then passes only with the
 * token its resource was raised to: a stale token is a `StaleTokenError`, a resource nothing
 * raised (not the lock's name) a `ConfigError`, unless `raiseOnWrite` is set.
 *
 * Its own transactions set `lock_timeout` and `idle_in_transaction_session_timeout` (see
 * `timeoutMs`), so a holder paused in the middle of a fenced write is cut off by the server
 * and cannot block the next holder for long, nor commit when it wakes.
 */
export class PgFence implements Fence {
  /** The quoted table name. */
  readonly table: string;
  readonly #pool: FencePool;
  /** The pool the fence opened from a URL, which `close()` ends. */
  readonly #ownPool: pg.Pool | undefined;
  readonly #o: ResolvedPgFenceOptions;
  readonly #raise: string;
  readonly #read: string;
  #ready: Promise<void> | undefined;

  /**
   * @param pool a `pg.Pool` (any {@link PgPoolLike}; never ended by the fence), or a
   *   `postgres://` URL: the fence then opens a small pool of its own, ended by
   *   {@link PgFence.close}.
   */
  constructor(pool: PgPoolLike | string, options: PgFenceOptions = {}) {
    this.#o = resolvePgFenceOptions(options);
    if (typeof pool === "string") {
      this.#ownPool = poolFromUrl(pool);
      this.#pool = this.#ownPool;
    } else {
      if (typeof pool !== "object" || pool === null || typeof pool.connect !== "function") {
        throw new ConfigError("pool", "must be a pg.Pool or a postgres:// URL");
      }
      this.#pool = pool;
      this.#ownPool = undefined;
    }
    const { table, resource, token } = this.#o;
    this.table = table;
    this.#raise = `INSERT INTO ${table} AS f (${resource}, ${token}) VALUES ($1::text, $2::bigint)
ON CONFLICT (${resource}) DO UPDATE SET ${token} = EXCLUDED.${token} WHERE f.${token} <= EXCLUDED.${token}
RETURNING 1`;
    this.#read = `SELECT ${token}::bigint::text AS token FROM ${table} WHERE ${resource} = $1`;
  }

  /**
   * Raises the fence of `resource` to `token` in a transaction of its own. Rejects with
   * `StaleTokenError` when a greater token was already seen; the same token is accepted
   * again. Waits for a row lock at most `timeoutMs` (or `options.ttlMs`); when
   * `options.signal` aborts, the raise is rolled back (its connection closed if need be) and
   * never takes effect later.
   */
  async raise(resource: string, token: bigint, options: FenceRaiseOptions = {}): Promise<void> {
    checkArgs(resource, token);
    const { signal, ttlMs } = checkRaiseOptions(options);
    signal?.throwIfAborted();
    await this.#ensureTable();
    const limitMs = this.#o.timeoutMs ?? ttlMs ?? DEFAULT_TTL_MS;
    // No user code runs in this transaction: every error is the store's, so none escapes as
    // a raw driver error (a server restart mid-raise is a BackendUnavailableError).
    await this.#inTransaction(resource, limitMs, true, signal, async (client) => {
      await this.#upsert(client, resource, token);
    }).catch((error: unknown) => {
      if (signal?.aborted && error === signal.reason) throw error;
      throw toBatonError(error, `could not raise the fence of "${resource}" in ${this.table}`);
    });
  }

  /**
   * Checks the fence inside the caller's own open transaction on `client`: passes when the
   * fence of `resource` holds `token` (the lock's raise put it there), rejects with
   * `StaleTokenError` when it holds a greater one (then roll the transaction back), and with
   * `ConfigError` (field `resource`) when it was not raised to `token`, unless
   * `raiseOnWrite`. The fence row stays locked until that transaction ends. Bound the
   * transaction yourself (see the package README): `SET LOCAL lock_timeout` and
   * `SET LOCAL idle_in_transaction_session_timeout` to the lock's TTL, right after `BEGIN`.
   */
  async check(client: Queryable, resource: string, token: bigint): Promise<void> {
    checkArgs(resource, token);
    if (typeof client !== "object" || client === null || typeof client.query !== "function") {
      throw new ConfigError("client", "must be a pg client inside an open transaction");
    }
    await this.#ensureTable();
    await this.#check(client, resource, token);
  }

  /**
   * Runs `fn` in one transaction that first checks the fence of `resource` (as
   * {@link PgFence.check}). A stale token rejects with `StaleTokenError` before `fn` runs;
   * an error of `fn` rolls everything back. Resolves with `fn`'s result after the commit.
   * The transaction waits for a row lock, and sits idle between statements, at most
   * `timeoutMs` (default 15000): past that the server ends it, nothing is committed, and it
   * rejects with `BackendUnavailableError` (the lock is then likely lost as well).
   *
   * `Client` is the type of the clients the fence's pool gives: `pg.PoolClient` for a
   * `pg.Pool` and for a pool the fence opened from a URL; name it to get your driver's own
   * type (`fence.transaction<void, pg.PoolClient>(...)`, or annotate `fn`'s parameter).
   */
  async transaction<T, Client extends PgClientLike = PgClientLike>(
    resource: string,
    token: bigint,
    fn: (client: Client) => T | Promise<T>,
  ): Promise<T> {
    checkArgs(resource, token);
    if (typeof fn !== "function") throw new ConfigError("fn", "must be a function");
    await this.#ensureTable();
    const limitMs = this.#o.timeoutMs ?? DEFAULT_TTL_MS;
    return this.#inTransaction(resource, limitMs, false, undefined, async (client) => {
      await this.#check(client, resource, token);
      // The fence's pool gives the caller's driver's clients (see Client above).
      return fn(client as Client);
    });
  }

  /** The newest token the fence has seen for `resource`, or `undefined`. */
  async highest(resource: string): Promise<bigint | undefined> {
    await this.#ensureTable();
    const result = await this.#pool.query(this.#read, [resource]);
    const row = result.rows[0] as { token: string } | undefined;
    return row === undefined ? undefined : BigInt(row.token);
  }

  /**
   * Creates the fence table (and its schema) when missing and checks an existing one's
   * columns. Idempotent. Every other method does it on first use.
   */
  migrate(): Promise<void> {
    return this.#ensureTable();
  }

  /** Ends the pool the fence opened from a URL; does nothing to a pool it was given. */
  async close(): Promise<void> {
    if (this.#ownPool !== undefined && !this.#ownPool.ended) await this.#ownPool.end();
  }

  async #check(db: Queryable, resource: string, token: bigint): Promise<void> {
    if (this.#o.raiseOnWrite) {
      await this.#upsert(db, resource, token);
      return;
    }
    const row = (await db.query(`${this.#read} FOR UPDATE`, [resource])).rows[0] as
      | { token: string }
      | undefined;
    const held = row === undefined ? undefined : BigInt(row.token);
    if (held === token) return;
    if (held !== undefined && held > token) throw new StaleTokenError(resource, token, held);
    throw new ConfigError(
      "resource",
      `the fence of "${resource}" in ${this.table} ${held === undefined ? "was never raised" : `holds token ${held}`}, not ${token}: nothing raised it when that token's lock was granted, so it cannot reject a stale holder. Correctness mode raises the fence under the lock's name: write with the lock's name as the resource, or call raise(resource, token) for each other resource right after acquiring, before its first write`,
    );
  }

  async #upsert(db: Queryable, resource: string, token: bigint): Promise<void> {
    const raised = await db.query(this.#raise, [resource, token.toString()]);
    if (raised.rows.length > 0) return;
    const row = (await db.query(this.#read, [resource])).rows[0] as { token: string } | undefined;
    throw new StaleTokenError(resource, token, row === undefined ? token : BigInt(row.token));
  }

  /**
   * Runs `fn` between `BEGIN` (with the limits) and `COMMIT` on a pooled connection. When
   * `signal` aborts before the commit, the connection is closed, so the server rolls back
   * even a statement still waiting for a lock. A connection that dies (the server ended the
   * transaction, say) is never returned to the pool.
   */
  async #inTransaction<T>(
    resource: string,
    limitMs: number,
    ownStatements: boolean,
    signal: AbortSignal | undefined,
    fn: (client: PgClientLike) => Promise<T>,
  ): Promise<T> {
    const client = await connect(this.#pool, signal);
    let ended: unknown;
    // A checked-out client has no error listener of the pool's: without this, a connection
    // ended by the server between statements would crash the process.
    const onError = (error: unknown) => {
      ended ??= error;
    };
    client.on("error", onError);
    let committing = false;
    const onAbort = () => {
      if (committing) return;
      ended ??= signal?.reason;
      void client.end().catch(() => undefined);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      await client.query(transactionLimits(limitMs, ownStatements));
      const result = await fn(client);
      signal?.throwIfAborted();
      committing = true;
      await client.query("COMMIT");
      return result;
    } catch (error) {
      // After a failed COMMIT there is nothing to roll back, and this only warns.
      if (ended === undefined) {
        await client.query("ROLLBACK").catch((rollbackError: unknown) => {
          ended = rollbackError;
        });
      }
      if (signal?.aborted) throw signal.reason;
      throw this.#explain(error, resource, limitMs, ended !== undefined);
    } finally {
      signal?.removeEventListener("abort", onAbort);
      if (ended === undefined) client.removeListener("error", onError);
      client.release(ended === undefined ? undefined : true);
    }
  }

  /** What a failed fence transaction tells its caller. */
  #explain(error: unknown, resource: string, limitMs: number, connectionGone: boolean): unknown {
    const state = sqlState(error);
    if (state === SQLSTATE.lockNotAvailable || state === SQLSTATE.queryCanceled) {
      return new BackendUnavailableError(
        `a fenced transaction on "${resource}" in ${this.table} waited ${limitMs} ms for a row lock, held by another transaction (a paused holder's fenced write, or one of your own without a lock_timeout); nothing was committed`,
        { cause: error },
      );
    }
    if (error instanceof BatonError) return error;
    if (connectionGone) {
      return new BackendUnavailableError(
        `a fenced transaction on "${resource}" in ${this.table} lost its connection before it committed, so nothing of it was committed (${(error as Error)?.message ?? String(error)}). PostgreSQL ends a fenced transaction left idle for ${limitMs} ms, as when its process was paused: its lock is then likely lost too`,
        { cause: error },
      );
    }
    return error;
  }

  #ensureTable(): Promise<void> {
    this.#ready ??= prepareFenceTable(this.#pool, this.#o).catch((error: unknown) => {
      this.#ready = undefined;
      throw error;
    });
    return this.#ready;
  }
}

/** A pooled client, or the signal's reason; a client that comes after the abort goes back. */
async function connect(pool: FencePool, signal: AbortSignal | undefined): Promise<PgClientLike> {
  const pending = pool.connect();
  if (signal === undefined) return asConnectError(pending);
  return new Promise<PgClientLike>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    asConnectError(pending).then(
      (client) => {
        signal.removeEventListener("abort", onAbort);
        if (signal.aborted) client.release();
        else resolve(client);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}

function asConnectError(pending: Promise<PgClientLike>): Promise<PgClientLike> {
  return pending.catch((error: unknown) => {
    throw toBatonError(error, "the fence could not take a connection from its pool");
  });
}

function poolFromUrl(url: string): pg.Pool {
  const parsed = connectionFromUrl(parseBackendUrl(url));
  if (parsed.schema !== undefined || parsed.namespace !== undefined) {
    throw new ConfigError(
      "url",
      'a fence URL takes no "schema" or "namespace" parameter; name the fence table with the table option',
    );
  }
  // PgConnectionConfig describes pg's ClientConfig by shape: pg reads it as it is.
  const pool = new pg.Pool({ ...(parsed.connection as pg.ClientConfig), max: OWN_POOL_SIZE });
  // An idle connection the server ended is dropped by the pool and replaced on next use.
  pool.on("error", () => undefined);
  return pool;
}

/** What the fence uses of its pool: statements, and clients for transactions. */
type FencePool = Pick<PgPoolLike, "query" | "connect">;

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
 * A fenced store in PostgreSQL: `check(client, resource, token)` inside your own
 * transaction, or `transaction(resource, token, fn)`. Also a `Fence` for correctness mode.
 * `pool` is a `pg.Pool`, or a `postgres://` URL for a pool of the fence's own (see
 * {@link PgFence.close}).
 */
export function pgFence(pool: PgPoolLike | string, options?: PgFenceOptions): PgFence {
  return new PgFence(pool, options);
}
