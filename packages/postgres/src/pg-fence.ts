import { ConfigError, type Fence, StaleTokenError } from "@baton/core";
import type pg from "pg";
import { isPrivilegeError, sqlState } from "./pg-errors.js";
import type { Queryable } from "./schema.js";
import { quoteQualified } from "./sql-identifier.js";

/** Options of {@link pgFence}. */
export interface PgFenceOptions {
  /**
   * The fence table, `table` or `schema.table` (default `baton.fence`), with columns
   * `resource text PRIMARY KEY, token bigint NOT NULL`. Created on first use when missing.
   */
  readonly table?: string;
}

/**
 * A fence in PostgreSQL (a `job_fence` table): one row per resource holding the newest token
 * seen. Raising the fence and the write it guards share one transaction, so a stale token
 * leaves nothing behind, and the fence row stays locked until that transaction ends, so
 * fenced writes to one resource are serialised.
 *
 * Usable as the `fence` of a correctness-mode coordinator with any backend: the coordinator
 * raises it with each new lock's token (under the lock name) before the holder's first write.
 */
export class PgFence implements Fence {
  /** The quoted table name. */
  readonly table: string;
  readonly #pool: pg.Pool;
  readonly #tableName: string;
  readonly #raise: string;
  #ready: Promise<void> | undefined;

  constructor(pool: pg.Pool, options: PgFenceOptions = {}) {
    if (typeof pool !== "object" || pool === null || typeof pool.connect !== "function") {
      throw new ConfigError("pool", "must be a pg.Pool");
    }
    if (typeof options !== "object" || options === null) {
      throw new ConfigError("options", "must be an object");
    }
    for (const key of Object.keys(options)) {
      if (key !== "table") throw new ConfigError(`options.${key}`, "unknown option; use table");
    }
    this.#tableName = options.table ?? "baton.fence";
    this.table = quoteQualified(this.#tableName, "table");
    this.#pool = pool;
    this.#raise = `INSERT INTO ${this.table} AS f (resource, token) VALUES ($1::text, $2::bigint)
ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token WHERE f.token <= EXCLUDED.token
RETURNING f.token`;
  }

  /**
   * Raises the fence of `resource` to `token` in its own transaction. Rejects with
   * `StaleTokenError` when a greater token was already seen; the same token is accepted again.
   */
  async raise(resource: string, token: bigint): Promise<void> {
    checkArgs(resource, token);
    await this.#ensureTable();
    await this.#check(this.#pool, resource, token);
  }

  /**
   * Checks and raises the fence inside the caller's own open transaction on `client`: rejects
   * with `StaleTokenError` when a greater token was seen (then roll the transaction back).
   * The fence row stays locked until that transaction ends.
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
   * Runs `fn` in one transaction that first raises the fence of `resource` to `token`. A stale
   * token rejects with `StaleTokenError` before `fn` runs; an error of `fn` rolls back the
   * raise as well. Resolves with `fn`'s result after the commit.
   */
  async transaction<T>(
    resource: string,
    token: bigint,
    fn: (client: pg.PoolClient) => T | Promise<T>,
  ): Promise<T> {
    checkArgs(resource, token);
    if (typeof fn !== "function") throw new ConfigError("fn", "must be a function");
    await this.#ensureTable();
    const client = await this.#pool.connect();
    let broken: Error | undefined;
    try {
      await client.query("BEGIN");
      try {
        await this.#check(client, resource, token);
        const result = await fn(client);
        await client.query("COMMIT");
        return result;
      } catch (error) {
        await client.query("ROLLBACK").catch((rollbackError: Error) => {
          broken = rollbackError;
        });
        throw error;
      }
    } finally {
      client.release(broken);
    }
  }

  /** The newest token the fence has seen for `resource`, or `undefined`. */
  async highest(resource: string): Promise<bigint | undefined> {
    await this.#ensureTable();
    const result = await this.#pool.query(`SELECT token FROM ${this.table} WHERE resource = $1`, [
      resource,
    ]);
    const row = result.rows[0] as { token: string } | undefined;
    return row === undefined ? undefined : BigInt(row.token);
  }

  /** Creates the fence table (and its schema) when missing. Idempotent. */
  migrate(): Promise<void> {
    return this.#ensureTable();
  }

  async #check(db: Queryable, resource: string, token: bigint): Promise<void> {
    const raised = await db.query(this.#raise, [resource, token.toString()]);
    if (raised.rows.length > 0) return;
    const current = await db.query(`SELECT token FROM ${this.table} WHERE resource = $1`, [
      resource,
    ]);
    const row = current.rows[0] as { token: string } | undefined;
    throw new StaleTokenError(resource, token, row === undefined ? token : BigInt(row.token));
  }

  #ensureTable(): Promise<void> {
    this.#ready ??= this.#createTable().catch((error: unknown) => {
      this.#ready = undefined;
      throw error;
    });
    return this.#ready;
  }

  async #createTable(): Promise<void> {
    const found = await this.#pool.query("SELECT to_regclass($1) IS NOT NULL AS ready", [
      this.table,
    ]);
    if ((found.rows[0] as { ready: boolean }).ready) return;
    const dot = this.table.indexOf('"."');
    const schema = dot >= 0 ? this.table.slice(0, dot + 1) : undefined;
    const ddl = [
      "BEGIN",
      // Serialise concurrent creators (the key is SHA-256 of "baton:fence").
      "SELECT pg_advisory_xact_lock(-1790974060622371838)",
      ...(schema === undefined ? [] : [`CREATE SCHEMA IF NOT EXISTS ${schema}`]),
      `CREATE TABLE IF NOT EXISTS ${this.table} (resource text PRIMARY KEY, token bigint NOT NULL)`,
      "COMMIT",
    ].join(";\n");
    try {
      await this.#pool.query(ddl);
    } catch (error) {
      if (sqlState(error) === "23505") return;
      if (isPrivilegeError(error)) {
        throw new ConfigError(
          "privileges",
          `may not create the fence table ${this.table} (${(error as Error).message}); create it once as a privileged role: CREATE TABLE ${this.table} (resource text PRIMARY KEY, token bigint NOT NULL)`,
          { cause: error },
        );
      }
      throw error;
    }
  }
}

function checkArgs(resource: unknown, token: unknown): void {
  if (typeof resource !== "string" || resource.length === 0) {
    throw new ConfigError("resource", "must be a non-empty string");
  }
  if (typeof token !== "bigint") {
    throw new ConfigError("token", `must be a bigint, got ${typeof token}`);
  }
}

/**
 * A fenced store in PostgreSQL: `check(client, resource, token)` inside your own
 * transaction, or `transaction(resource, token, fn)`. Also a `Fence` for correctness mode.
 */
export function pgFence(pool: pg.Pool, options?: PgFenceOptions): PgFence {
  return new PgFence(pool, options);
}
