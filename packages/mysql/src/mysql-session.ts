import {
  type BackendAcquireOptions,
  type BackendSession,
  boundedCall,
  ConfigError,
  type Grant,
  type Holder,
  type KeepAliveResult,
  linkSignals,
  NameTable,
  SessionLostError,
  type StoredRecord,
} from "@baton/core";
import { isFatal, toBatonError } from "./mysql-errors.js";
import type { RecordStatements } from "./mysql-lease-statements.js";
import { MysqlRecords } from "./mysql-records.js";
import type { MysqlConnectionConfig } from "./mysql-shapes.js";
import {
  type Connection,
  connect,
  endConnection,
  LEASE_MODE_HINT,
  newConnection,
  refuseUnsafePath,
  run,
} from "./named-lock-connection.js";
import {
  decodeAcquire,
  decodeHeartbeat,
  decodeHolder,
  decodeReleased,
} from "./named-lock-replies.js";
import type { NamedLockStatements } from "./named-lock-statements.js";
import type { NamedLockWaiters } from "./named-lock-waiters.js";
import { UrgentFirst } from "./urgent-first.js";

/** The server's idle limit (`wait_timeout`) is whole seconds: the TTL is too. */
export const TTL_STEP_MS = 1_000;

/** How long `close()` gives the tidying of holder rows before ending the connection. */
const CLOSE_TIDY_MS = 1_000;

/** Released grants whose holder rows are deleted by the next heartbeat, at most. */
const MAX_RELEASED = 1_000;

/** How long a renewal may take before `keepAlive()` gives up on it: half the TTL. */
function renewalBoundMs(ttlMs: number): number {
  return Math.max(50, Math.floor(ttlMs / 2));
}

/**
 * How long one wait on a waiter connection lasts at most (whole seconds, as `GET_LOCK` takes
 * them on every server) before the waiting session tries again: a bound in case the kill of an
 * abandoned wait is lost, and a fresh try now and then in case a release was missed.
 */
function waitSliceSeconds(ttlMs: number): number {
  return Math.max(1, Math.ceil(ttlMs / 1_000));
}

/** Checks that the server's idle limit can express `ttlMs` (whole seconds, at least one). */
export function checkNamedLockTtl(ttlMs: number): void {
  if (!Number.isInteger(ttlMs) || ttlMs < TTL_STEP_MS || ttlMs % TTL_STEP_MS !== 0) {
    throw new ConfigError(
      "ttlMs",
      `the MySQL named-lock mode frees a frozen holder's locks with the server's idle limit (wait_timeout), which is whole seconds: use a multiple of ${TTL_STEP_MS} ms that is at least ${TTL_STEP_MS}, got ${ttlMs}`,
    );
  }
}

/** What a session needs from its backend. */
export interface MysqlSessionContext {
  /** Settings of the session's own connection. */
  readonly settings: MysqlConnectionConfig;
  /** The server, as messages name it (`host:port`; never the user nor the password). */
  readonly where: string;
  readonly statements: NamedLockStatements;
  /** The statements of durable records (shared with the row-lease mode). */
  readonly recordStatements: RecordStatements;
  /** The backend's namespace (records are kept per namespace). */
  readonly namespace: string;
  /** The `GET_LOCK` name of a lock name (at most 64 characters, distinct per name). */
  readonly lockKey: (name: string) => string;
  /** Connections to wait on (a wait never occupies the session's connection). */
  readonly waiters: NamedLockWaiters;
}

/** The private part of a grant: which session and named lock it belongs to. */
export interface MysqlGrantHandle {
  readonly session: MysqlSession;
  readonly lockKey: string;
}

/** A grant this session holds. */
interface Held {
  readonly name: string;
  readonly lockKey: string;
  readonly token: bigint;
}

/**
 * One Baton session of the named-lock mode = one dedicated connection whose idle limit
 * (`wait_timeout`) is the TTL, holding its locks with `GET_LOCK`. A named lock lives exactly
 * as long as the connection that took it: a frozen process stops sending heartbeats, the
 * server ends its connection after the TTL and frees its locks; a killed process closes the
 * socket and frees them at once. The connection is checked once at open (not a Galera node,
 * no proxy in between) and its id by every heartbeat.
 *
 * Statements: the server runs a connection's statements one at a time, so the session sends
 * one at a time and keeps the others in its own queue, where the heartbeat goes first. A
 * heartbeat then waits for at most the one statement running, never for every acquire in
 * flight: each acquire costs the server more the more named locks the connection holds (MariaDB
 * looks through them for every metadata lock a statement takes), and behind dozens of them a
 * heartbeat of a session holding tens of thousands of locks took longer than its bound, and
 * every lock of the session was lost.
 */
export class MysqlSession implements BackendSession {
  readonly ownerId: string;
  readonly ttlMs: number;
  readonly #connection: Connection;
  readonly #context: MysqlSessionContext;
  readonly #lost = new AbortController();
  /** Aborted by close(): ends the waits of this session's acquires. */
  readonly #closed = new AbortController();
  readonly #records: MysqlRecords;
  readonly #onClose: ((session: MysqlSession) => void) | undefined;
  /** Held grants by lock name. */
  readonly #held = new NameTable<Held>();
  /** Released grants whose holder rows the next heartbeat deletes (off the hot path). */
  #released: Held[] = [];
  /** GET_LOCK names a failed statement may have left held: released by the next heartbeat. */
  readonly #orphans = new Set<string>();
  /** The server's id of the connection, as the first statements saw it. */
  #id = 0;
  /**
   * Settles once the acquires sent so far have ended, a failed one's open transaction rolled
   * back: the session's other writes (records, holder rows) wait for it, so that none runs
   * inside that transaction and is rolled back with it.
   */
  #acquires: Promise<unknown> = Promise.resolve();
  /** Acquires sent and not yet ended (a failed one's rollback included). */
  #acquiring = 0;
  /** The connection's statements, one at a time: heartbeats first, then the others in order. */
  readonly #statements = new UrgentFirst(1);
  /** Released grants' holder rows are being deleted apart from the heartbeat. */
  #tidying = false;
  #renewal: Promise<KeepAliveResult | undefined> | undefined;
  #closing: Promise<void> | undefined;

  private constructor(
    connection: Connection,
    context: MysqlSessionContext,
    ownerId: string,
    ttlMs: number,
    onClose: ((session: MysqlSession) => void) | undefined,
  ) {
    this.#connection = connection;
    this.#context = context;
    this.ownerId = ownerId;
    this.ttlMs = ttlMs;
    this.#onClose = onClose;
    this.#records = new MysqlRecords({
      statements: context.recordStatements,
      namespace: context.namespace,
      timeoutMs: renewalBoundMs(ttlMs),
      run: async (sql, values) => {
        // Never inside a transaction a failed acquire left open (see #acquires).
        await this.#acquires;
        return this.#send(sql, values, false);
      },
      failure: (error, what) => this.#failure(error, what),
    });
  }

  /** Aborted with `SessionLostError` when the connection ends or fails, or is found moved. */
  get lost(): AbortSignal {
    return this.#lost.signal;
  }

  /**
   * Connects a dedicated connection, sets its idle limit to the TTL and checks that a named
   * lock taken on it is one lock (see refuseUnsafePath).
   */
  static async open(
    context: MysqlSessionContext,
    ownerId: string,
    ttlMs: number,
    signal: AbortSignal | undefined,
    onClose?: (session: MysqlSession) => void,
  ): Promise<MysqlSession> {
    checkNamedLockTtl(ttlMs);
    if (signal?.aborted) throw signal.reason;
    const connection = newConnection(context.settings);
    const session = new MysqlSession(connection, context, ownerId, ttlMs, onClose);
    // Attached before connecting: an error event without a listener would crash the process.
    connection.on("error", (error: Error) => session.#markLost(error));
    connection.on("end", () => session.#markLost(undefined));
    const onAbort = () => connection.destroy();
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      await connect(connection);
      await run(connection, `SET SESSION wait_timeout = ${ttlMs / TTL_STEP_MS}`);
      await refuseUnsafePath(connection, context.where);
      session.#id = decodeHeartbeat(await run(connection, context.statements.heartbeat));
    } catch (error) {
      connection.destroy();
      if (signal?.aborted) throw signal.reason;
      if (error instanceof ConfigError) throw error;
      throw toBatonError(error, `could not open a MySQL session at ${context.where}`);
    } finally {
      signal?.removeEventListener("abort", onAbort);
    }
    return session;
  }

  async keepAlive(): Promise<KeepAliveResult | undefined> {
    this.#assertLive();
    // One renewal in flight at a time: a slow one is joined, never piled on.
    this.#renewal ??= this.#renew().finally(() => {
      this.#renewal = undefined;
    });
    return boundedCall(this.#renewal, {
      timeoutMs: renewalBoundMs(this.ttlMs),
      what: `a MySQL heartbeat at ${this.#context.where}`,
    });
  }

  /**
   * The heartbeat: one statement that resets the server's idle clock of the connection (and
   * with it every lock the connection holds), after deleting released grants' holder rows.
   */
  async #renew(): Promise<KeepAliveResult | undefined> {
    const { statements } = this.#context;
    for (const lockKey of [...this.#orphans]) {
      // Released meanwhile by an acquire of the same name (which then took it again).
      if (!this.#orphans.has(lockKey)) continue;
      this.#orphans.delete(lockKey);
      try {
        await this.#statement(statements.releaseIfHeld, [lockKey, lockKey], true);
      } catch (error) {
        if (this.#alive()) this.#orphans.add(lockKey);
        throw error;
      }
    }
    // With acquires in flight, one of them may have left its transaction open (until its
    // rollback), so the holder rows are deleted after them, apart from the heartbeat.
    const tidyNow = this.#acquiring === 0;
    const released = tidyNow ? this.#released : [];
    if (tidyNow) this.#released = [];
    else this.#tidyAfterAcquires();
    let id: number;
    try {
      id =
        released.length === 0
          ? decodeHeartbeat(await this.#statement(statements.heartbeat, [], true))
          : decodeHeartbeat(
              await this.#statement(
                statements.tidyThenHeartbeat(released.length),
                released.flatMap((r) => [r.lockKey, r.token.toString()]),
                true,
              ),
            );
    } catch (error) {
      if (this.#released.length < MAX_RELEASED) this.#released = released.concat(this.#released);
      throw error;
    }
    if (id !== this.#id) {
      // Another server connection answered: the locks are on the one that took them, which
      // this session no longer reaches.
      const error = new SessionLostError(
        `the MySQL session of "${this.ownerId}" at ${this.#context.where} was lost: its statements now run on server connection ${id}, not ${this.#id}, which holds its locks (a proxy or pooler in between?); ${LEASE_MODE_HINT}`,
      );
      this.#markLost(error);
      throw error;
    }
    return undefined;
  }

  /**
   * Deletes the released grants' holder rows once the acquires sent so far have ended (see
   * #acquires), in the background; rows whose delete fails wait for the next try.
   */
  #tidyAfterAcquires(): void {
    if (this.#tidying || this.#released.length === 0) return;
    this.#tidying = true;
    void this.#acquires
      .then(async () => {
        const released = this.#released;
        this.#released = [];
        if (released.length === 0 || !this.#alive()) return;
        try {
          await this.#statement(
            this.#context.statements.tidyThenHeartbeat(released.length),
            released.flatMap((r) => [r.lockKey, r.token.toString()]),
          );
        } catch {
          if (this.#alive() && this.#released.length < MAX_RELEASED) {
            this.#released = released.concat(this.#released);
          }
        }
      })
      .finally(() => {
        this.#tidying = false;
      });
  }

  async acquire(key: string, options: BackendAcquireOptions): Promise<Grant | null> {
    this.#assertLive();
    const lockKey = this.#context.lockKey(key);
    if (this.#orphans.has(lockKey)) {
      // Left held by a failed statement: released first, so it is not taken for this grant.
      this.#orphans.delete(lockKey);
      try {
        await this.#statement(this.#context.statements.releaseIfHeld, [lockKey, lockKey]);
      } catch (error) {
        if (this.#alive()) this.#orphans.add(lockKey);
        throw error;
      }
    }
    const first = await this.#try(key, lockKey, options.value);
    if (first !== null || !options.wait) return first;
    const linked = linkSignals([options.signal, this.#lost.signal, this.#closed.signal]);
    try {
      const slice = waitSliceSeconds(this.ttlMs);
      for (;;) {
        await this.#context.waiters.waitUntilFree(lockKey, slice, linked.signal);
        this.#assertLive();
        const grant = await this.#try(key, lockKey, options.value);
        if (grant !== null) return grant;
      }
    } finally {
      linked.dispose();
    }
  }

  /** One try, without waiting: the grant, or `null` when another connection holds the lock. */
  #try(name: string, lockKey: string, value: string | undefined): Promise<Grant | null> {
    this.#acquiring++;
    const attempt = this.#attempt(name, lockKey, value);
    this.#acquires = Promise.allSettled([this.#acquires, attempt]);
    const ended = () => {
      this.#acquiring--;
    };
    attempt.then(ended, ended);
    return attempt;
  }

  async #attempt(name: string, lockKey: string, value: string | undefined): Promise<Grant | null> {
    let token: bigint | null;
    try {
      // Hot path: see docs/hot-path.md, "MySQL".
      token = decodeAcquire(
        await this.#statement(this.#context.statements.acquire, [
          lockKey,
          lockKey,
          name,
          this.ownerId,
          value ?? null,
        ]),
      );
    } catch (error) {
      // The lock may have been granted before a later step failed: it outlives the
      // transaction. Roll back and give it back, or have the next heartbeat (or acquire) do it.
      await this.#giveBack(lockKey);
      throw error;
    }
    if (token === null) return null;
    this.#held.set(name, { name, lockKey, token });
    const handle: MysqlGrantHandle = { session: this, lockKey };
    return { key: name, ownerId: this.ownerId, token, handle };
  }

  async #giveBack(lockKey: string): Promise<void> {
    if (!this.#alive()) return;
    try {
      await this.#statement(this.#context.statements.releaseIfHeld, [lockKey, lockKey]);
    } catch {
      if (this.#alive()) this.#orphans.add(lockKey);
    }
  }

  async release(grant: Grant): Promise<boolean> {
    const handle = grant.handle as MysqlGrantHandle | undefined;
    const held = this.#held.get(grant.key);
    if (handle?.session !== this || held === undefined || held.token !== grant.token) return false;
    this.#held.delete(grant.key);
    // A dead connection has already freed everything it held.
    if (this.#lost.signal.aborted) return false;
    try {
      const released = decodeReleased(
        await this.#statement(this.#context.statements.release, [held.lockKey]),
      );
      if (this.#released.length < MAX_RELEASED) this.#released.push(held);
      return released;
    } catch (error) {
      // Never renewed again; the next heartbeat releases it if the connection lives on.
      if (this.#alive()) this.#orphans.add(held.lockKey);
      throw error;
    }
  }

  async holder(name: string): Promise<Holder | null> {
    this.#assertLive();
    const lockKey = this.#context.lockKey(name);
    return decodeHolder(await this.#statement(this.#context.statements.holder, [lockKey, lockKey]));
  }

  async readRecord(key: string): Promise<StoredRecord | null> {
    this.#assertLive();
    return this.#records.read(key);
  }

  async writeRecord(key: string, value: string, expected: string | null): Promise<string | null> {
    this.#assertLive();
    return this.#records.write(key, value, expected);
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#closed.abort(new SessionLostError("this MySQL session is closed"));
      this.#onClose?.(this);
      const rows = [...this.#held.values(), ...this.#released];
      this.#held.clear();
      this.#released = [];
      if (!this.#lost.signal.aborted && rows.length > 0) {
        // Tidy this session's holder rows, bounded: the connection ends either way (which
        // frees its locks), and a later grant of a name overwrites its row.
        const tidy = run(
          this.#connection,
          this.#context.statements.tidyThenHeartbeat(rows.length),
          rows.flatMap((r) => [r.lockKey, r.token.toString()]),
        );
        await boundedCall(tidy, { timeoutMs: CLOSE_TIDY_MS }).catch(() => undefined);
      }
      // Ending the connection frees every named lock it holds.
      await endConnection(this.#connection);
    })();
    return this.#closing;
  }

  /** Whether the connection lives on and the session is not closing. */
  #alive(): boolean {
    return !this.#lost.signal.aborted && this.#closing === undefined;
  }

  #assertLive(): void {
    if (this.#closing !== undefined) throw new SessionLostError("this MySQL session is closed");
    if (this.#lost.signal.aborted) throw this.#lost.signal.reason;
  }

  #markLost(error: Error | undefined): void {
    if (this.#lost.signal.aborted) return;
    this.#held.clear();
    this.#orphans.clear();
    if (error instanceof SessionLostError) {
      this.#lost.abort(error);
      return;
    }
    const why =
      error === undefined ? "its connection ended" : `its connection failed: ${error.message}`;
    this.#lost.abort(
      new SessionLostError(
        `the MySQL session of "${this.ownerId}" at ${this.#context.where} was lost: ${why}`,
        { cause: error },
      ),
    );
  }

  /**
   * Runs `sql` on the session's connection, after the statements queued before it (`urgent`:
   * after the running one only): its result, or the error to throw ({@link #failure}).
   */
  async #statement(sql: string, values: unknown[], urgent = false): Promise<unknown> {
    try {
      return await this.#send(sql, values, urgent);
    } catch (error) {
      throw this.#failure(error, "MySQL statement");
    }
  }

  /** Queues `sql` for the connection (see the class comment): mysql2's result, or its error. */
  #send(sql: string, values: unknown[], urgent: boolean): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.#statements.run((done) => {
        this.#connection.query(
          { sql, values, supportBigNumbers: true, bigNumberStrings: true },
          (error, result) => {
            done();
            if (error) reject(error);
            else resolve(result);
          },
        );
      }, urgent);
    });
  }

  /**
   * The error to throw for a failed statement: a failure that ended the connection loses the
   * session; `context` says what was being done, and the message adds the server.
   */
  #failure(error: unknown, context: string): unknown {
    if (isFatal(error)) this.#markLost(error as Error);
    if (this.#lost.signal.aborted) return this.#lost.signal.reason;
    if (this.#closing !== undefined) {
      return new SessionLostError(`the MySQL session of "${this.ownerId}" is closed`, {
        cause: error,
      });
    }
    return toBatonError(error, `${context} at ${this.#context.where}`);
  }
}
