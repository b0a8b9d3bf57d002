import {
  type BackendSession,
  BackendUnavailableError,
  type Guarantees,
  type LockBackend,
  type OpenSessionOptions,
} from "@baton/core";
import pg from "pg";
import { KeyWaits } from "./key-waits.js";
import { openSessionContext, toBatonError } from "./postgres-errors.js";
import { schemaNames, tokenTag } from "./postgres-keys.js";
import {
  type PostgresBackendOptions,
  type ResolvedPostgresOptions,
  resolvePostgresOptions,
} from "./postgres-options.js";
import { PostgresSession, type PostgresSessionContext } from "./postgres-session.js";
import { ensureSchema, type Queryable } from "./schema.js";
import { statements } from "./statements.js";
import { WaiterPool } from "./waiter-pool.js";

/**
 * What PostgreSQL locks promise. Tokens come from one sequence on one primary: strictly
 * increasing there, also across restarts; a failover to an asynchronous replica that missed
 * the newest `nextval` can repeat tokens. Waiting is not strictly FIFO (a waiter whose wait
 * is interrupted, e.g. by its session's renewal, goes to the back; a try may barge in). Not
 * consensus-backed.
 */
export const POSTGRES_GUARANTEES: Guarantees = {
  fencing: "monotonic",
  fifo: false,
  consensus: false,
  crossProcess: true,
  records: true,
};

/**
 * PostgreSQL backend (`postgres://`, `postgresql://`): session advisory locks on one dedicated
 * connection per Baton session, turned into leases by `idle_session_timeout` = TTL and a
 * renewal every TTL/3; tokens from a sequence taken in the same statement as the lock.
 */
export class PostgresBackend implements LockBackend {
  readonly kind = "postgres";
  readonly guarantees = POSTGRES_GUARANTEES;
  /** The checked options. */
  readonly options: ResolvedPostgresOptions;
  readonly #context: PostgresSessionContext;
  readonly #sessions = new Set<PostgresSession>();
  readonly #waiters: WaiterPool;
  #control: pg.Pool | undefined;
  #ready: Promise<void> | undefined;
  #closed = false;

  /** Checks `options` (throwing `ConfigError` before any I/O); connects lazily. */
  constructor(options: PostgresBackendOptions) {
    this.options = resolvePostgresOptions(options);
    this.#waiters = new WaiterPool(this.options.connection, (pid) => this.#cancel(pid));
    this.#context = {
      connection: this.options.connection,
      namespace: this.options.namespace,
      statements: statements(schemaNames(this.options.quotedSchema)),
      waits: new KeyWaits(this.#waiters),
      waiters: this.#waiters,
      cancel: (pid) => this.#cancel(pid),
      tag: tokenTag,
    };
  }

  async openSession(options: OpenSessionOptions): Promise<BackendSession> {
    if (this.#closed) throw new BackendUnavailableError("this PostgreSQL backend is closed");
    if (options.signal?.aborted) throw options.signal.reason;
    await this.#ensureReady();
    const session = await PostgresSession.open(
      this.#context,
      options.ownerId,
      options.ttlMs,
      options.signal,
      (closed) => this.#sessions.delete(closed),
    );
    if (this.#closed) {
      await session.close();
      throw new BackendUnavailableError("this PostgreSQL backend is closed");
    }
    this.#sessions.add(session);
    return session;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const sessions = [...this.#sessions];
    this.#sessions.clear();
    await Promise.allSettled(sessions.map((s) => s.close()));
    await this.#waiters.close();
    await this.#control?.end().catch(() => undefined);
  }

  /** Creates (or checks) the schema once; a failure is retried on the next open. */
  #ensureReady(): Promise<void> {
    this.#ready ??= (async () => {
      const db: Queryable = this.options.pool ?? this.#controlPool();
      try {
        await ensureSchema(
          db,
          schemaNames(this.options.quotedSchema),
          this.options.schema,
          this.options.migrate,
          true,
        );
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
      const pool = new pg.Pool({
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

  async #cancel(pid: number): Promise<void> {
    await this.#controlPool().query("SELECT pg_cancel_backend($1)", [pid]);
  }
}
