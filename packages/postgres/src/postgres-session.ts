import {
  type BackendAcquireOptions,
  type BackendPermitOptions,
  type BackendSession,
  boundedCall,
  ConfigError,
  type ForceReleaseOptions,
  type Grant,
  type Holder,
  type KeepAliveResult,
  type KeyPage,
  type KeyState,
  type ListKeysOptions,
  linkSignals,
  NameTable,
  type PermitHolder,
  type RevokedGrant,
  SessionLostError,
  type StoredRecord,
} from "@baton/core";
import type pg from "pg";
import { ConnectionWait } from "./connection-wait.js";
import { type Connections, endClient } from "./connections.js";
import type { KeyWaits, WaitTicket } from "./key-waits.js";
import { type Orphan, Orphans } from "./orphans.js";
import type { PgConnectionConfig } from "./pg-shapes.js";
import {
  decodeHolder,
  decodeLostKey,
  decodePid,
  decodeRenewalRow,
  decodeUnlocked,
  grantedToken,
  holderRowValues,
  recordNeeded,
  tokenToRecord,
  unlockHeldValues,
} from "./postgres-codec.js";
import {
  describeTarget,
  endedConnection,
  lockTableFull,
  missingPrepared,
  openSessionContext,
  SQLSTATE,
  sqlState,
  toBatonError,
  waitEndedEmpty,
} from "./postgres-errors.js";
import { AdvisoryInspection } from "./postgres-inspection.js";
import { advisoryKey, permitChannel, type TokenTag } from "./postgres-keys.js";
import { PermitHandle, PostgresPermits } from "./postgres-permits.js";
import { PostgresRecords } from "./postgres-records.js";
import { callPrepared, PreparedCall } from "./prepared-call.js";
import { RecentContention } from "./recent-contention.js";
import {
  type BatchedRelease,
  decodeUnlockedMany,
  ReleaseBatch,
  releaseManyValues,
} from "./release-batch.js";
import { StatementQueue } from "./statement-queue.js";
import type { InspectionStatements, Statement, Statements } from "./statements.js";
import { type TagUse, TagUses } from "./token-locks.js";
import type { WaiterPool } from "./waiter-pool.js";
import { type WatchedLock, watchHolder } from "./watch-holder.js";

/** Holder rows awaiting deletion at most (beyond, they stay until their key is taken again). */
const MAX_RELEASED = 10_000;

/** How long `close()` gives the tidying of holder rows before ending the connection. */
const CLOSE_TIDY_MS = 1_000;

/**
 * How long one wait on the session's connection lasts at most before it is sent again: a
 * bound in case a cancel is lost, well within the renewal's (TTL / 2).
 */
function waitSliceMs(ttlMs: number): number {
  return Math.max(50, Math.floor(ttlMs / 4));
}

/** How long a renewal may take before `keepAlive()` gives up on it: half the TTL. */
function renewalBoundMs(ttlMs: number): number {
  return Math.max(50, Math.floor(ttlMs / 2));
}

const PING: Statement = { name: "baton_ping", text: "SELECT 1" };

/** What a session needs from its backend. */
export interface PostgresSessionContext {
  readonly connection: PgConnectionConfig;
  /** The backend's connections, which the session's joins. */
  readonly connections: Connections;
  readonly namespace: string;
  /** The schema's quoted name (its permit channel is named after it). */
  readonly quotedSchema: string;
  readonly statements: Statements;
  readonly waits: KeyWaits;
  readonly waiters: WaiterPool;
  /** Cancels the running statement of backend `pid` (`pg_cancel_backend`, another connection). */
  readonly cancel: (pid: number) => Promise<void>;
  /** The token-lock tag of a key (`tokenTag`; a test may make keys share one). */
  readonly tag: (key: bigint) => TokenTag;
  /** True when the `sessions` table has its TTL column (see `SchemaState` in schema.ts). */
  readonly sessionTtl: () => boolean;
  /** Inspection and forced release (postgres-inspection.ts). */
  readonly inspection: InspectionStatements;
  /** True when the schema has the tables of inspection (see `SchemaState` in schema.ts). */
  readonly operations: () => boolean;
}

/** A grant this session holds. */
interface Held extends Orphan {
  readonly name: string;
  readonly token: bigint;
  /** True: the token is kept in a token lock (no holder row); false: in the holder row. */
  readonly tokenKept: boolean;
}

/** Private part of a grant: which session and key it belongs to. */
interface PostgresGrantHandle {
  readonly session: PostgresSession;
  readonly key: bigint;
}

/** Runs a statement: in the connection's turn, or directly while the caller holds it. */
type Run = (config: pg.QueryConfig) => Promise<unknown>;

/**
 * One Baton session = one dedicated PostgreSQL connection with `idle_session_timeout` = TTL.
 * Its advisory locks live exactly as long as the connection: a frozen process stops sending
 * renewals, the server ends the idle connection after the TTL and frees its locks; a killed
 * process closes the socket and frees them at once.
 */
export class PostgresSession implements BackendSession {
  readonly ownerId: string;
  readonly ttlMs: number;
  readonly #client: pg.Client;
  readonly #context: PostgresSessionContext;
  readonly #lost = new AbortController();
  /** Held grants by lock name. */
  readonly #held = new NameTable<Held>();
  /** Lock names by advisory key, to catch two names of one session hashing alike. */
  readonly #names = new Map<bigint, string>();
  /** Released grants whose holder rows are deleted by the next renewal (off the hot path). */
  #released: Held[] = [];
  /** How many keys of this session use each token-lock tag. */
  readonly #tags = new TagUses();
  /** Keys left held by failed statements, unlocked by the next renewal (or try). */
  readonly #orphans = new Orphans(this.#tags);
  readonly #onClose: ((session: PostgresSession) => void) | undefined;
  #renewal: Promise<KeepAliveResult | undefined> | undefined;
  #closing: Promise<void> | undefined;
  /** The connection's statements, one at a time (see #send). */
  readonly #statements: StatementQueue;
  /** The releases of the current turn, sent as one statement (see ReleaseBatch). */
  readonly #releases = new ReleaseBatch(
    (releases, done) => this.#sendReleases(releases, done),
    // A wait for a lock holds the connection, so the queue is not idle during one either.
    () => this.#statements.idle,
  );
  /** The wait for a lock that occupies the connection, if any (see #waitAcquire). */
  #waiting: ConnectionWait | undefined;
  /** The server process of the connection (to cancel a wait). */
  #pid = 0;
  /** Durable records, read and written in the connection's turn. */
  readonly #records: PostgresRecords;
  /** Keys lately found held: a waiting acquire of one waits at once (see acquire). */
  readonly #contention: RecentContention;
  /** Semaphores and read-write locks, in the connection's turn. */
  readonly #permits: PostgresPermits;
  /** The channel the schema's permit grants are announced on. */
  readonly #permitChannel: string;
  /** Keys whose names this connection recorded in `lock_names` (see postgres-inspection.ts). */
  readonly #named = new Set<bigint>();
  /** Tokens of revocations the last renewal read: the next one deletes them. */
  #acks: string[] = [];
  readonly #inspection: AdvisoryInspection;

  private constructor(
    client: pg.Client,
    context: PostgresSessionContext,
    ownerId: string,
    ttlMs: number,
    onClose: ((session: PostgresSession) => void) | undefined,
  ) {
    this.#client = client;
    this.#statements = new StatementQueue(client);
    this.#context = context;
    this.#onClose = onClose;
    this.ownerId = ownerId;
    this.ttlMs = ttlMs;
    this.#contention = new RecentContention(ttlMs);
    this.#records = new PostgresRecords({
      statements: context.statements,
      timeoutMs: renewalBoundMs(ttlMs),
      run: async (statement, values) =>
        (await this.#send({ name: statement.name, text: statement.text, values })).rows,
      failure: (error, what) => this.#failure(error, what),
    });
    this.#permitChannel = permitChannel(context.quotedSchema);
    this.#permits = new PostgresPermits({
      namespace: context.namespace,
      ownerId,
      ttlMs,
      statements: context.statements,
      lost: this.#lost.signal,
      column: (statement, values) => this.#column(statement, values),
      rows: (statement, values) => this.#query(statement, values),
      simple: async (text) => {
        try {
          await this.#send({ text });
        } catch (error) {
          throw this.#failure(error);
        }
      },
      assertLive: () => this.#assertLive(),
    });
    this.#inspection = new AdvisoryInspection(
      {
        namespace: context.namespace,
        rows: async (text, values) => {
          try {
            return (await this.#send({ text, values })).rows;
          } catch (error) {
            throw this.#failure(error, "PostgreSQL inspection");
          }
        },
        ready: context.operations,
      },
      context.inspection,
      context.tag,
      () => this.#permits.sessionKey,
    );
  }

  /** Aborted with `SessionLostError` when the connection ends or fails. */
  get lost(): AbortSignal {
    return this.#lost.signal;
  }

  /** Connects a dedicated client, sets `idle_session_timeout` = `ttlMs`. */
  static async open(
    context: PostgresSessionContext,
    ownerId: string,
    ttlMs: number,
    signal: AbortSignal | undefined,
    onClose?: (session: PostgresSession) => void,
  ): Promise<PostgresSession> {
    if (signal?.aborted) throw signal.reason;
    // In pg's pipeline mode the statements of the session's callers go out without waiting for
    // the answers to those before them (see StatementQueue).
    // Hot path: see docs/hot-path.md, "PostgreSQL".
    const client = context.connections.client({
      fallback_application_name: "baton",
      ...context.connection,
      pipeline: true,
    });
    const session = new PostgresSession(client, context, ownerId, ttlMs, onClose);
    // Attached before connecting: an error event without a listener would crash the process.
    client.on("error", (error) => session.#markLost(error));
    client.on("end", () => session.#markLost(undefined));
    client.on("notification", (message) => {
      if (message.channel === session.#permitChannel) session.#permits.notified(message.payload);
    });
    const onAbort = () => {
      void client.end().catch(() => undefined);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      await client.connect();
      const { rows } = await client.query({
        ...(context.sessionTtl()
          ? context.statements.register
          : context.statements.registerWithoutTtl),
        values: [String(ttlMs), ownerId],
      });
      session.#pid = decodePid(rows);
    } catch (error) {
      void client.end().catch(() => undefined);
      if (signal?.aborted) throw signal.reason;
      throw toBatonError(error, openSessionContext(context.connection));
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
      what: `a PostgreSQL renewal at ${describeTarget(this.#context.connection)}`,
    });
  }

  async #renew(): Promise<KeepAliveResult | undefined> {
    try {
      return await this.#renewHeld();
    } catch (error) {
      // The server's lock table is full (or a statement whose first parse failed for that
      // reason was sent again before the failure came back, see missingPrepared): statements
      // that read a table fail, but the session's locks live as long as its connection, and a
      // statement that takes no lock table entry renews the connection's lease. What is held
      // is checked, and orphans unlocked, by a later renewal.
      if (!lockTableFull(error) && !missingPrepared(error)) throw error;
      await this.#query(PING, []);
      return undefined;
    }
  }

  /** The renewal: also checks what the connection still holds, and tidies what it released. */
  async #renewHeld(): Promise<KeepAliveResult | undefined> {
    if (this.#orphans.size > 0) {
      const orphans = this.#orphans.all();
      await this.#query(this.#context.statements.unlockHeld, unlockHeldValues(orphans));
      for (const orphan of orphans) this.#orphans.unlocked(orphan);
    }
    // Permit entries live as long as the connection: the statement below renews them all.
    if (this.#permits.leftovers) await this.#permits.releaseLeftovers();
    const held = [...this.#held.values()];
    const released = this.#released;
    if (this.#context.operations()) return this.#renewWithOperations(held);
    if (held.length === 0 && released.length === 0) {
      await this.#query(PING, []);
      return undefined;
    }
    this.#released = [];
    const rows = await this.#query(this.#context.statements.renew, [
      held.map((h) => h.key.toString()),
      ...holderRowValues(released),
    ]);
    if (rows.length === 0) return undefined;
    const lostKeys: string[] = [];
    for (const row of rows) this.#lose(decodeLostKey(row), lostKeys);
    return { lostKeys };
  }

  /** The key `key` this connection no longer holds: forgets it, and names it in `lostKeys`. */
  #lose(key: bigint, lostKeys: string[]): void {
    const name = this.#names.get(key);
    if (name === undefined) return;
    const lost = this.#held.get(name);
    lostKeys.push(name);
    this.#forget(name);
    // Whatever of it may be left (its token lock) is unlocked with the orphans.
    if (lost !== undefined) this.#orphans.keep(lost);
  }

  /**
   * The renewal when the schema has the tables of inspection: the same statement also records
   * the names of keys held since the last one, forgets those released, and reads this
   * connection's revocations (see postgres-inspection.ts). A revoked grant still held is
   * unlocked here, by a second statement only then, and reported revoked.
   */
  async #renewWithOperations(held: Held[]): Promise<KeepAliveResult | undefined> {
    const released = this.#released;
    const named: Held[] = [];
    for (const h of held) if (!this.#named.has(h.key)) named.push(h);
    const forgotten: bigint[] = [];
    for (const key of this.#named) if (!this.#names.has(key)) forgotten.push(key);
    const acks = this.#acks;
    if (
      held.length === 0 &&
      released.length === 0 &&
      forgotten.length === 0 &&
      acks.length === 0 &&
      !this.#permits.holding
    ) {
      await this.#query(PING, []);
      return undefined;
    }
    this.#released = [];
    this.#acks = [];
    const { statements } = this.#context;
    const renewed = [held.map((h) => h.key.toString()), ...holderRowValues(released)];
    let rows: Record<string, unknown>[];
    try {
      // The usual renewal has nothing to record, forget or delete: only the read is added.
      rows =
        named.length === 0 && forgotten.length === 0 && acks.length === 0
          ? await this.#query(statements.renewRevocations, renewed)
          : await this.#query(statements.renewOperations, [
              ...renewed,
              named.map((h) => h.key.toString()),
              named.map((h) => h.name),
              this.#context.namespace,
              forgotten.map(String),
              acks,
            ]);
    } catch (error) {
      // Nothing of it happened: deleted again by the next renewal.
      this.#acks = acks.concat(this.#acks);
      throw error;
    }
    for (const h of named) this.#named.add(h.key);
    for (const key of forgotten) this.#named.delete(key);
    if (rows.length === 0) return undefined;
    const lostKeys: string[] = [];
    const revoked: RevokedGrant[] = [];
    const unlock: Held[] = [];
    for (const row of rows) {
      const decoded = decodeRenewalRow(row);
      if (decoded.revoked === undefined) {
        this.#lose(decoded.key, lostKeys);
        continue;
      }
      const { token, reason, permit } = decoded.revoked;
      this.#acks.push(token.toString());
      if (permit !== undefined) {
        // Its entry is gone at the server: nothing to unlock.
        if (this.#permits.revoked(permit, token)) {
          revoked.push({ space: "permit", key: permit, token, reason });
        }
        continue;
      }
      const name = this.#names.get(decoded.key);
      const grant = name === undefined ? undefined : this.#held.get(name);
      // A revocation of an earlier grant of the key (released since) ends nothing.
      if (name === undefined || grant === undefined || grant.token !== token) continue;
      this.#forget(name);
      revoked.push({ space: "lock", key: name, token, reason });
      unlock.push(grant);
    }
    if (unlock.length > 0) await this.#unlockRevoked(unlock);
    return {
      ...(lostKeys.length > 0 ? { lostKeys } : {}),
      ...(revoked.length > 0 ? { revoked } : {}),
    };
  }

  /**
   * Unlocks revoked grants at once, so the next waiter gets them; when that fails, they are
   * orphans the next renewal (or acquire of the key) unlocks.
   */
  async #unlockRevoked(grants: Held[]): Promise<void> {
    for (const grant of grants) {
      if (!grant.tokenKept && this.#released.length < MAX_RELEASED) this.#released.push(grant);
      this.#orphans.keep(grant);
    }
    try {
      await this.#query(this.#context.statements.unlockHeld, unlockHeldValues(grants));
      for (const grant of grants) this.#orphans.unlocked(grant);
    } catch {
      // Left to the next renewal.
    }
  }

  async acquire(name: string, options: BackendAcquireOptions): Promise<Grant | null> {
    this.#assertLive();
    const key = advisoryKey(this.#context.namespace, name);
    const clash = this.#names.get(key);
    if (clash !== undefined) {
      throw new ConfigError(
        "name",
        `"${name}" and "${clash}" hash to the same advisory key in namespace "${this.#context.namespace}"; rename one or use another namespace`,
      );
    }
    let ticket: WaitTicket | undefined;
    let waited = false;
    /** Whether this acquire may still wait on the session's connection (see below). */
    let ownWait = true;
    try {
      // A key this session lately found held is waited for at once: the try would most likely
      // be refused (see RecentContention). Hot path: see docs/hot-path.md, "PostgreSQL".
      const waitAtOnce =
        options.wait &&
        this.#waiting === undefined &&
        this.#statements.idle &&
        this.#contention.recent(key);
      let grant = waitAtOnce ? null : await this.#tryAcquire(name, key, options.value);
      if (grant === null && options.wait && !waitAtOnce) this.#contention.seen(key);
      for (;;) {
        // The first try leaves the signal alone (see BackendAcquireOptions.signal): reading
        // it may build it. After a wait, a grant that comes after an abort is given back.
        if (grant !== null) {
          if (!waited || !options.signal.aborted) return grant;
          await this.release(grant).catch(() => undefined);
          throw options.signal.reason;
        }
        if (!options.wait) return null;
        const { signal } = options;
        if (signal.aborted) throw signal.reason;
        this.#assertLive();
        waited = true;
        if (ownWait && this.#waiting === undefined && this.#statements.idle) {
          // Nothing else uses the connection: wait in PostgreSQL's own queue of the key, on
          // it. A release hands the lock straight to the first waiter, and wakes nobody else.
          ticket?.leave();
          ticket = undefined;
          const wait = await this.#waitAcquire(name, key, options.value, signal);
          if (wait.interrupted) {
            // Other callers need the connection: from now on this acquire waits on a waiter
            // connection, so that their statements are not held up by one cancel after another.
            ownWait = false;
          }
          grant = wait.grant;
          continue;
        }
        // The connection waits for another lock, or serves other callers: wake when this one
        // is free (released, or its holder's connection ended), then race.
        ticket ??= this.#context.waits.join(key, this.ttlMs);
        // linkSignals, not AbortSignal.any: on Node 20 every AbortSignal.any on the long-lived
        // lost signal stays registered with it, and a session waits many times.
        const link = linkSignals([signal, this.#lost.signal]);
        try {
          await ticket.turn(link.signal);
        } finally {
          link.dispose();
        }
        if (signal.aborted) throw signal.reason;
        this.#assertLive();
        grant = await this.#tryAcquire(name, key, options.value);
      }
    } finally {
      ticket?.leave();
    }
  }

  /**
   * Waits for `key` in the server on the session's own connection ({@link
   * Statements.waitAcquire}) and takes it. The grant is `null` when the wait ended without it:
   * a slice ran out, `signal` aborted, or another statement needed the connection (then the
   * wait was cancelled for it, and `interrupted` is true). Nothing is left held then.
   */
  async #waitAcquire(
    name: string,
    key: bigint,
    value: string | undefined,
    signal: AbortSignal,
  ): Promise<{ readonly grant: Grant | null; readonly interrupted: boolean }> {
    const wait = new ConnectionWait(() => this.#context.cancel(this.#pid));
    const grant = await this.#waitOnConnection(wait, name, key, value, signal);
    return { grant, interrupted: wait.interrupted };
  }

  /** {@link #waitAcquire}'s wait, `wait` its cancel. */
  async #waitOnConnection(
    wait: ConnectionWait,
    name: string,
    key: bigint,
    value: string | undefined,
    signal: AbortSignal,
  ): Promise<Grant | null> {
    // The releases asked for before go before the wait (and do not interrupt it).
    if (this.#releases.pending) this.#releases.flush();
    this.#waiting = wait;
    signal.addEventListener("abort", wait.interrupt, { once: true });
    // Chosen in the order the statements run (a token lock only when no other key uses the
    // tag): as the turn is taken.
    const tag = this.#context.tag(key);
    const tokenKept = value === undefined && this.#tags.free(tag);
    const use = this.#tags.use(tag);
    /** Whether `use` went to a grant or an orphan (else it ends here). */
    let handed = false;
    // Take the connection's turn (statements sent from now on come after, and interrupt).
    const turn = this.#statements.hold();
    let done = noop;
    try {
      done = await turn;
      if (wait.interrupted || this.#statements.queued > 0 || signal.aborted) return null;
      this.#assertLive();
      await this.#unlockOrphan(key, this.#direct);
      let column: string | null = null;
      let failure: unknown;
      try {
        const slice = String(waitSliceMs(this.ttlMs));
        const { statements } = this.#context;
        column = await wait.run(() =>
          tokenKept
            ? callPrepared(this.#client, statements.waitAcquireTokenKept, [
                key.toString(),
                String(tag),
                slice,
              ])
            : callPrepared(this.#client, statements.waitAcquire, [
                key.toString(),
                name,
                this.ownerId,
                value ?? null,
                slice,
              ]),
        );
      } catch (error) {
        failure = error;
      }
      await wait.settle(waitSliceMs(this.ttlMs), this.#alive, this.#absorbCancel);
      if (failure !== undefined) {
        // The lock may have been granted before the statement failed (cancelled, or a later
        // step timed out): session advisory locks outlive it. Give it back, or have the next
        // renewal (or try) do it.
        handed = true;
        await this.#giveBack(key, tokenKept, use, this.#direct);
        if (waitEndedEmpty(failure)) return null;
        throw this.#failure(failure);
      }
      if (column === null) return null;
      handed = true;
      return await this.#settle(name, key, value, column, tokenKept, use, this.#direct);
    } finally {
      if (!handed) this.#tags.end(use);
      signal.removeEventListener("abort", wait.interrupt);
      if (this.#waiting === wait) this.#waiting = undefined;
      done();
    }
  }

  /** Whether the connection lives on and the session is not closing. */
  readonly #alive = (): boolean => !this.#lost.signal.aborted && this.#closing === undefined;

  /**
   * After a cancel of a wait (see ConnectionWait.settle): `true` when a cancel that arrived
   * after the wait ended failed this statement, `false` when it ran to its end (none is left)
   * or the connection is gone.
   */
  readonly #absorbCancel = async (): Promise<boolean> => {
    if (this.#lost.signal.aborted) return false;
    try {
      await this.#client.query(PING);
      return false;
    } catch (error) {
      return sqlState(error) === SQLSTATE.queryCanceled;
    }
  };

  async #tryAcquire(name: string, key: bigint, value: string | undefined): Promise<Grant | null> {
    // Checked here first: awaiting a call that has nothing to do costs a turn of the queue.
    if (this.#orphans.has(key)) await this.#unlockOrphan(key, this.#inTurn);
    // Chosen as the statement is sent, so in the order the statements run.
    const tag = this.#context.tag(key);
    const tokenKept = value === undefined && this.#tags.free(tag);
    const use = this.#tags.use(tag);
    const { statements } = this.#context;
    let column: string | null;
    try {
      column = tokenKept
        ? await this.#column(statements.acquireTokenKept, [key.toString(), String(tag)])
        : await this.#column(statements.acquire, [
            key.toString(),
            name,
            this.ownerId,
            value ?? null,
          ]);
    } catch (error) {
      // A session advisory lock outlives a failed statement: give it back if we got it.
      await this.#giveBack(key, tokenKept, use, this.#inTurn);
      throw error;
    }
    if (column === null) {
      this.#tags.end(use);
      return null;
    }
    return this.#settle(name, key, value, column, tokenKept, use, this.#inTurn);
  }

  /**
   * The grant of a granted acquire's `column`: at once in the usual case (no promise, no extra
   * turn). When a token-kept acquire's token lock was not taken (another connection holds
   * that pair exclusively, or the token's offset does not fit in an int4: see
   * postgres-codec.ts), the holder row is recorded first, by a second statement; if that
   * fails the lock is given back. `use` is the grant's (or the orphan's) from here on.
   */
  #settle(
    name: string,
    key: bigint,
    value: string | undefined,
    column: string,
    tokenKept: boolean,
    use: TagUse,
    run: Run,
  ): Grant | Promise<Grant> {
    if (!tokenKept || !recordNeeded(column)) {
      return this.#granted(name, key, grantedToken(column), tokenKept, use);
    }
    return this.#recordThenGrant(name, key, value, tokenToRecord(column), use, run);
  }

  async #recordThenGrant(
    name: string,
    key: bigint,
    value: string | undefined,
    token: bigint,
    use: TagUse,
    run: Run,
  ): Promise<Grant> {
    try {
      await run({
        ...this.#context.statements.record,
        values: [key.toString(), name, this.ownerId, value ?? null, token.toString()],
      });
    } catch (error) {
      await this.#giveBack(key, false, use, run);
      throw this.#failure(error);
    }
    return this.#granted(name, key, token, false, use);
  }

  /** Runs a statement on the connection now (the caller holds its turn: see #waitAcquire). */
  readonly #direct: Run = (config) => this.#client.query(config);
  /** Runs a statement in the connection's turn (see #send). */
  readonly #inTurn: Run = (config) => this.#send(config);

  /**
   * A lock this connection may still hold from a failed statement ({@link #orphans}) is
   * unlocked before `key` is taken again, so it is not mistaken for the new grant.
   */
  async #unlockOrphan(key: bigint, run: Run) {
    const orphan = this.#orphans.get(key);
    if (orphan === undefined) return;
    try {
      await run({ ...this.#context.statements.unlockHeld, values: unlockHeldValues([orphan]) });
    } catch (error) {
      throw this.#failure(error);
    }
    this.#orphans.unlocked(orphan);
  }

  /**
   * After a statement that may have taken `key` (and, when `tokenKept`, its token lock) failed
   * (session advisory locks outlive it): unlock what is held; if that fails too, it is an
   * orphan the next renewal (or try) unlocks. Takes over `use`.
   */
  async #giveBack(key: bigint, tokenKept: boolean, use: TagUse, run: Run) {
    if (!this.#alive()) return;
    const orphan: Orphan = { key, tokenKept, use };
    try {
      await run({ ...this.#context.statements.unlockHeld, values: unlockHeldValues([orphan]) });
      this.#tags.end(use);
    } catch {
      if (this.#alive()) this.#orphans.keep(orphan);
    }
  }

  #granted(name: string, key: bigint, token: bigint, tokenKept: boolean, use: TagUse): Grant {
    this.#held.set(name, { name, key, token, tokenKept, use });
    this.#names.set(key, name);
    const handle: PostgresGrantHandle = { session: this, key };
    return { key: name, ownerId: this.ownerId, token, handle };
  }

  async release(grant: Grant): Promise<boolean> {
    if (grant.handle instanceof PermitHandle) {
      return grant.handle.owner === this.#permits ? this.#permits.release(grant) : false;
    }
    const handle = grant.handle as PostgresGrantHandle | undefined;
    const held = this.#held.get(grant.key);
    if (handle?.session !== this || held === undefined || held.token !== grant.token) return false;
    this.#forget(grant.key);
    // A dead connection has already freed everything it held.
    if (this.#lost.signal.aborted) return false;
    try {
      const unlocked = await this.#releases.add({
        key: held.key.toString(),
        tokenLock: held.tokenKept
          ? { token: held.token.toString(), tag: String(held.use.tag) }
          : null,
      });
      if (!held.tokenKept && this.#released.length < MAX_RELEASED) this.#released.push(held);
      this.#tags.end(held.use);
      return unlocked;
    } catch (error) {
      // Never renewed again; the next renewal unlocks it if the connection lives on.
      if (!this.#lost.signal.aborted) this.#orphans.keep(held);
      throw error;
    }
  }

  async holder(name: string): Promise<Holder | null> {
    this.#assertLive();
    const key = advisoryKey(this.#context.namespace, name);
    const rows = await this.#query(this.#context.statements.holder, [
      key.toString(),
      this.#context.tag(key),
    ]);
    return decodeHolder(rows);
  }

  /**
   * Pushes the holder of `name` now and after every change until `signal` aborts (see
   * {@link watchHolder}).
   */
  watch(name: string, signal: AbortSignal): AsyncGenerator<Holder | null> {
    const lock: WatchedLock = {
      key: advisoryKey(this.#context.namespace, name),
      read: () => this.holder(name),
      ttlMs: this.ttlMs,
      lost: this.#lost.signal,
      waiters: this.#context.waiters,
    };
    return watchHolder(lock, signal);
  }

  async acquirePermits(name: string, options: BackendPermitOptions): Promise<Grant | null> {
    this.#assertLive();
    return this.#permits.acquire(name, options);
  }

  async permitHolders(name: string): Promise<PermitHolder[]> {
    this.#assertLive();
    return this.#permits.holders(name);
  }

  async downgrade(grant: Grant): Promise<Grant | null> {
    this.#assertLive();
    return this.#permits.downgrade(grant);
  }

  async readRecord(key: string): Promise<StoredRecord | null> {
    this.#assertLive();
    return this.#records.read(key);
  }

  async writeRecord(key: string, value: string, expected: string | null): Promise<string | null> {
    this.#assertLive();
    return this.#records.write(key, value, expected);
  }

  async listKeys(options: ListKeysOptions): Promise<KeyPage> {
    this.#assertLive();
    return this.#bounded(
      this.#inspection.listKeys(options),
      "list",
      options.prefix,
      options.signal,
    );
  }

  async inspectKey(space: "lock" | "permit", name: string): Promise<KeyState | null> {
    this.#assertLive();
    return this.#bounded(this.#inspection.inspectKey(space, name), "inspection", name);
  }

  async forceRelease(
    space: "lock" | "permit",
    name: string,
    options: ForceReleaseOptions,
  ): Promise<boolean> {
    this.#assertLive();
    return this.#bounded(
      this.#inspection.forceRelease(space, name, options),
      "forced release",
      name,
      options.signal,
    );
  }

  /** An operator's statement, bounded as a renewal is, and by `signal`. */
  #bounded<T>(call: Promise<T>, what: string, name: string, signal?: AbortSignal): Promise<T> {
    return boundedCall(call, {
      timeoutMs: renewalBoundMs(this.ttlMs),
      signal,
      what: `a PostgreSQL ${what} at ${describeTarget(this.#context.connection)}`,
      name,
      onAbandoned: (late) => late.catch(noop),
    });
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#onClose?.(this);
      const rows = [...this.#held.values(), ...this.#released].filter((h) => !h.tokenKept);
      this.#held.clear();
      this.#names.clear();
      this.#released = [];
      if (!this.#lost.signal.aborted) {
        // Tidy this session's holder rows, permits and registration; bounded, since the
        // connection ends either way (which frees the permits' waiters within their poll,
        // and a later connection with its pid replaces the registration).
        const permits = this.#permits.releaseAll();
        const tidy = this.#send({
          ...(this.#context.operations()
            ? this.#context.statements.unregisterOperations
            : this.#context.statements.unregister),
          values: holderRowValues(rows),
        });
        await boundedCall(Promise.all([permits, tidy]), { timeoutMs: CLOSE_TIDY_MS }).catch(
          () => undefined,
        );
      }
      // Ending the connection frees every advisory lock it holds (a server that does not
      // answer sees the socket close).
      await endClient(this.#client);
    })();
    return this.#closing;
  }

  #forget(name: string): void {
    const held = this.#held.get(name);
    if (held === undefined) return;
    this.#held.delete(name);
    this.#names.delete(held.key);
  }

  #assertLive(): void {
    if (this.#closing !== undefined)
      throw new SessionLostError("this PostgreSQL session is closed");
    if (this.#lost.signal.aborted) throw this.#lost.signal.reason;
  }

  #markLost(error: Error | undefined): void {
    if (this.#lost.signal.aborted) return;
    const why =
      error === undefined ? "its connection ended" : `its connection failed: ${error.message}`;
    this.#held.clear();
    this.#names.clear();
    this.#permits.lost();
    this.#lost.abort(
      new SessionLostError(`the PostgreSQL session of "${this.ownerId}" was lost: ${why}`, {
        cause: error,
      }),
    );
  }

  /**
   * Sends one turn's releases (see ReleaseBatch): one alone with its own statement, more with
   * one statement for them all. `done` gets whether each was unlocked, or the error to throw.
   */
  #sendReleases(
    releases: readonly BatchedRelease[],
    done: (error: unknown, unlocked: readonly boolean[] | null) => void,
  ): void {
    // A wait for a lock occupies the connection: cancel it, it is sent again after this.
    this.#waiting?.interrupt();
    const { statements } = this.#context;
    const one = releases.length === 1 ? (releases[0] as BatchedRelease) : undefined;
    const call =
      one === undefined
        ? new PreparedCall(statements.releaseMany, releaseManyValues(releases), (error, column) => {
            if (error !== null) return done(this.#failure(error), null);
            let unlocked: boolean[];
            try {
              unlocked = decodeUnlockedMany(column, releases.length);
            } catch (failure) {
              return done(failure, null);
            }
            done(null, unlocked);
          })
        : new PreparedCall(
            one.tokenLock === null ? statements.release : statements.releaseTokenKept,
            one.tokenLock === null ? [one.key] : [one.key, one.tokenLock.token, one.tokenLock.tag],
            (error, column) => {
              if (error !== null) done(this.#failure(error), null);
              else done(null, [decodeUnlocked(column)]);
            },
          );
    this.#statements.call(call);
  }

  /**
   * Runs `config` on the session's connection once the statements sent before it have
   * finished (see StatementQueue); at once when the connection is free. Rejects with pg's error.
   */
  #send(config: pg.QueryConfig): Promise<pg.QueryResult> {
    return this.#submit(config, false);
  }

  /**
   * Runs `statement` with `values` in the connection's turn: its rows, or the error to throw
   * ({@link #failure}).
   */
  #query(statement: Statement, values: unknown[]): Promise<Record<string, unknown>[]> {
    return this.#submit({ name: statement.name, text: statement.text, values }, true);
  }

  /**
   * Runs `statement` with `values` in the connection's turn as a {@link PreparedCall} (the
   * acquires and releases): its one column, or the error to throw ({@link #failure}).
   */
  #column(statement: Statement, values: readonly (string | null)[]): Promise<string | null> {
    // Hot path: see docs/hot-path.md, "PostgreSQL".
    // The turn's releases were asked for first: they go first.
    if (this.#releases.pending) this.#releases.flush();
    // A wait for a lock occupies the connection: cancel it, it is sent again after this.
    this.#waiting?.interrupt();
    return new Promise((resolve, reject) => {
      this.#statements.call(
        new PreparedCall(statement, values, (error, column) => {
          if (error === null) resolve(column);
          else reject(this.#failure(error));
        }),
      );
    });
  }

  /**
   * {@link #send} and {@link #query}: the result (its rows when `rows`) and the error as is
   * (as {@link #failure} maps it when `rows`). One promise between the caller and pg's callback.
   */
  #submit(config: pg.QueryConfig, rows: false): Promise<pg.QueryResult>;
  #submit(config: pg.QueryConfig, rows: true): Promise<Record<string, unknown>[]>;
  #submit(config: pg.QueryConfig, rows: boolean): Promise<unknown> {
    // The turn's releases were asked for first: they go first.
    if (this.#releases.pending) this.#releases.flush();
    // A wait for a lock occupies the connection: cancel it, it is sent again after this.
    this.#waiting?.interrupt();
    return new Promise((resolve, reject) => {
      this.#statements.submit(config, (error, result) => {
        if (error !== null) reject(rows ? this.#failure(error) : error);
        else resolve(rows ? (result as pg.QueryResult).rows : result);
      });
    });
  }

  /**
   * The error to throw for a failed statement; `context` says what was being done, and the
   * message adds the server it was done at.
   */
  #failure(error: unknown, context = "PostgreSQL query failed"): unknown {
    const at = describeTarget(this.#context.connection);
    if (!this.#alive()) {
      return new SessionLostError(
        `the PostgreSQL session of "${this.ownerId}" at ${at} was lost: ${(error as Error).message}`,
        { cause: error },
      );
    }
    // The server ended this connection (admin command, idle timeout, crash, shutdown).
    if (endedConnection(error)) {
      this.#markLost(error as Error);
      return this.#lost.signal.reason;
    }
    return toBatonError(error, `${context} at ${at}`);
  }
}

function noop(): void {}
