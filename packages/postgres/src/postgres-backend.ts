import {
  type BackendSession,
  BackendUnavailableError,
  ConfigError,
  type Guarantees,
  type LockBackend,
  type OpenSessionOptions,
} from "@baton/core";
import type pg from "pg";
import { Connections, endClient } from "./connections.js";
import { KeyWaits } from "./key-waits.js";
import { describeTarget, endpointOf, openSessionContext, toBatonError } from "./postgres-errors.js";
import { schemaNames, tokenTag } from "./postgres-keys.js";
import {
  PostgresLeaseSession,
  type PostgresLeaseSessionContext,
} from "./postgres-lease-session.js";
import { leaseStatements } from "./postgres-lease-statements.js";
import {
  type PostgresBackendOptions,
  type ResolvedPostgresOptions,
  resolvePostgresOptions,
} from "./postgres-options.js";
import { PostgresSession, type PostgresSessionContext } from "./postgres-session.js";
import { ensureSchema, type Queryable } from "./schema.js";
import { inspectionStatements, statements } from "./statements.js";
import { WaiterPool } from "./waiter-pool.js";

/**
 * What PostgreSQL locks promise (the advisory mode; for row leases see
 * {@link POSTGRES_LEASE_GUARANTEES}). Tokens come from one sequence on one primary: strictly
 * increasing there, also across restarts; a failover to an asynchronous replica that missed
 * the newest `nextval` can repeat tokens. Waiting for a lock is not strictly FIFO (a waiter
 * whose wait is interrupted, e.g. by its session's renewal, goes to the back; a try may barge
 * in). Semaphores and read-write locks keep one queue per name in a table, in arrival order:
 * a request never overtakes one that waits. Not consensus-backed. Inspection lists and reads
 * locks, permit keys and records; a forced release frees one grant (not the holder's
 * session): a permit grant at once, a lock when the holder's own session lets go of it at its
 * next renewal, within a third of the TTL (an advisory lock belongs to its connection; see
 * postgres-inspection.ts).
 */
export const POSTGRES_GUARANTEES: Guarantees = {
  fencing: "monotonic",
  fifo: false,
  // A waiter waits in the server (pg_advisory_lock, or a shared lock on a waiter connection):
  // a release wakes it at once.
  waiters: "woken",
  consensus: false,
  crossProcess: true,
  records: true,
  semaphores: true,
  inspection: true,
  forceRelease: "grant",
};

/**
 * What the row-lease mode (`locks: "lease"`) promises: as {@link POSTGRES_GUARANTEES}, without
 * semaphores and read-write locks (a `ConfigError` when used). A forced release deletes the
 * lease row at once; the holder's renewal reports it.
 */
export const POSTGRES_LEASE_GUARANTEES: Guarantees = {
  ...POSTGRES_GUARANTEES,
  // A waiter reads the lease row again from time to time, and soon after it saw a new lease.
  waiters: "poll-resets",
  semaphores: false,
};

/**
 * PostgreSQL backend (`postgres://`, `postgresql://`): session advisory locks on one dedicated
 * connection per Baton session, turned into leases by `idle_session_timeout` = TTL and a
 * renewal every TTL/3; tokens from a sequence taken in the same statement as the lock. With
 * `locks: "lease"` (`?locks=lease`), row leases instead, which work through a pooler in
 * transaction mode (see {@link PostgresBackendOptions.locks}).
 */
export class PostgresBackend implements LockBackend {
  readonly kind = "postgres";
  /** {@link POSTGRES_GUARANTEES}, or {@link POSTGRES_LEASE_GUARANTEES} with `locks: "lease"`. */
  readonly guarantees: Guarantees;
  /** The checked options. */
  readonly options: ResolvedPostgresOptions;
  /**
   * Where the backend connects, e.g. `db1:5432` (never the user nor the password), named in
   * core's messages about it; undefined when the connection settings do not say.
   */
  readonly endpoint: string | undefined;
  readonly #context: PostgresSessionContext;
  readonly #sessions = new Set<BackendSession>();
  #lease: PostgresLeaseSessionContext | undefined;
  readonly #waiters: WaiterPool;
  /** Every connection this backend opens, so that close() ends them all in bounded time. */
  readonly #connections = new Connections();
  #control: pg.Pool | undefined;
  #ready: Promise<void> | undefined;
  /** The sessions table has its TTL column (found by the schema check). */
  #sessionTtl = false;
  /** The schema has the tables of inspection and forced release (found by the schema check). */
  #operations = false;
  #closed = false;

  /** Checks `options` (throwing `ConfigError` before any I/O); connects lazily. */
  constructor(options: PostgresBackendOptions) {
    this.options = resolvePostgresOptions(options);
    this.endpoint = endpointOf(this.options.connection);
    this.guarantees =
      this.options.locks === "lease" ? POSTGRES_LEASE_GUARANTEES : POSTGRES_GUARANTEES;
    this.#waiters = new WaiterPool(this.options.connection, this.#connections, (pid) =>
      this.#cancel(pid),
    );
    this.#context = {
      connection: this.options.connection,
      connections: this.#connections,
      namespace: this.options.namespace,
      quotedSchema: this.options.quotedSchema,
      statements: statements(schemaNames(this.options.quotedSchema)),
      waits: new KeyWaits(this.#waiters),
      waiters: this.#waiters,
      cancel: (pid) => this.#cancel(pid),
      tag: tokenTag,
      sessionTtl: () => this.#sessionTtl,
      inspection: inspectionStatements(schemaNames(this.options.quotedSchema)),
      operations: () => this.#operations,
    };
  }

  async openSession(options: OpenSessionOptions): Promise<BackendSession> {
    if (this.#closed) throw new BackendUnavailableError("this PostgreSQL backend is closed");
    if (options.signal?.aborted) throw options.signal.reason;
    await this.#ensureReady();
    const onClose = (closed: BackendSession) => this.#sessions.delete(closed);
    const session =
      this.options.locks === "lease"
        ? await PostgresLeaseSession.open(
            this.#leaseContext(),
            options.ownerId,
            options.ttlMs,
            options.signal,
            onClose,
          )
        : await PostgresSession.open(
            this.#context,
            options.ownerId,
            options.ttlMs,
            options.signal,
            onClose,
          );
    if (this.#closed) {
      await session.close();
      throw new BackendUnavailableError("this PostgreSQL backend is closed");
    }
    this.#sessions.add(session);
    return session;
  }

  /**
   * Closes every session (tidying its rows for a bounded time), then ends every connection,
   * those still connecting included. Bounded whatever the server does: a connection that does
   * not end politely within a moment has its socket destroyed.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const sessions = [...this.#sessions];
    this.#sessions.clear();
    await Promise.allSettled(sessions.map((s) => s.close()));
    await this.#waiters.close();
    await Promise.all([
      this.#lease && this.#connections.endPool(this.#lease.pool),
      this.#control && this.#connections.endPool(this.#control),
    ]);
    // Whatever is left (a connect or a schema check a silent server never answers, a session
    // still opening) ends now; an open waiting on it fails.
    this.#connections.destroyAll();
  }

  /** The row-lease sessions' context, with its pool, made on first use. */
  #leaseContext(): PostgresLeaseSessionContext {
    if (this.#lease === undefined) {
      const pool = this.#connections.pool({
        fallback_application_name: "baton",
        ...this.options.connection,
        max: this.options.poolSize,
        idleTimeoutMillis: 10_000,
        allowExitOnIdle: true,
      });
      pool.on("error", () => undefined);
      this.#lease = {
        pool,
        namespace: this.options.namespace,
        statements: leaseStatements(schemaNames(this.options.quotedSchema)),
        recordStatements: this.#context.statements,
        poll: { minMs: 20, maxMs: 250 },
        where: describeTarget(this.options.connection),
        listRecords: this.#context.inspection.listRecords,
        operations: () => this.#operations,
      };
    }
    return this.#lease;
  }

  /** Creates (or checks) the schema once; a failure is retried on the next open. */
  #ensureReady(): Promise<void> {
    this.#ready ??= (async () => {
      const db: Queryable = this.options.pool ?? this.#controlPool();
      try {
        const state = await ensureSchema(
          db,
          schemaNames(this.options.quotedSchema),
          this.options.schema,
          this.options.migrate,
          true,
          this.options.locks,
        );
        this.#sessionTtl = state.sessionTtl;
        this.#operations = state.operations;
        if (this.options.locks === "advisory") await this.#refuseTransactionPooler();
      } catch (error) {
        throw toBatonError(error, openSessionContext(this.options.connection));
      }
    })().catch((error: unknown) => {
      this.#ready = undefined;
      throw error;
    });
    return this.#ready;
  }

  /** A small private pool for schema checks and cancelling waits. */
  #controlPool(): pg.Pool {
    if (this.#control === undefined) {
      const pool = this.#connections.pool({
        fallback_application_name: "baton-control",
        ...this.options.connection,
        max: 2,
        idleTimeoutMillis: 5_000,
        allowExitOnIdle: true,
      });
      // An idle pooled connection that fails is dropped by the pool; never crash for it.
      pool.on("error", () => undefined);
      this.#control = pool;
    }
    return this.#control;
  }

  /**
   * Session advisory locks belong to a server connection; through a pooler in transaction (or
   * statement) mode, a Baton session's statements land on whatever server connection is free,
   * and other clients' statements on its. Two client connections served by one server process
   * give such a pooler away (PgBouncer hands out the server connection used last).
   */
  async #refuseTransactionPooler(): Promise<void> {
    const first = this.#connections.client({
      fallback_application_name: "baton-control",
      ...this.options.connection,
    });
    const second = this.#connections.client({
      fallback_application_name: "baton-control",
      ...this.options.connection,
    });
    first.on("error", () => undefined);
    second.on("error", () => undefined);
    try {
      await Promise.all([first.connect(), second.connect()]);
      const pid = async (client: pg.Client) =>
        (await client.query("SELECT pg_backend_pid() AS pid")).rows[0]?.pid as number;
      // Either sign gives such a pooler away: the second connection served by the first one's
      // server process, or the first one moved to another. Two rounds, in case other clients
      // of the pooler took the server connection in between.
      for (let round = 0; round < 2; round++) {
        const a = await pid(first);
        const b = await pid(second);
        const again = await pid(first);
        if (a === b || again !== a) {
          throw new ConfigError(
            "url",
            `${describeTarget(this.options.connection)} is reached through a pooler in transaction mode (such as PgBouncer with pool_mode = transaction): ${a === b ? `two connections were served by one server process (pid ${a})` : `one connection was served by server process ${a}, then ${again}`}, and session advisory locks need a server connection of their own. Use the row-lease mode (locks: "lease", or ?locks=lease in the URL), or connect to PostgreSQL directly or through a session-mode pool`,
          );
        }
      }
    } finally {
      await Promise.all([endClient(first), endClient(second)]);
    }
  }

  async #cancel(pid: number): Promise<void> {
    await this.#controlPool().query("SELECT pg_cancel_backend($1)", [pid]);
  }
}
