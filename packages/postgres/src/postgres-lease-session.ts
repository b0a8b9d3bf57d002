import { randomUUID } from "node:crypto";
import {
  type BackendAcquireOptions,
  type BackendSession,
  boundedCall,
  type ForceReleaseOptions,
  type Grant,
  type Holder,
  type KeepAliveResult,
  type KeyPage,
  type KeyState,
  type ListKeysOptions,
  PollBackoff,
  SessionLostError,
  type StoredRecord,
  sleep,
  systemClock,
} from "@baton/core";
import type pg from "pg";
import {
  decodeHolder,
  decodeLeaseGrant,
  decodeLeaseRevocations,
  decodeReap,
} from "./postgres-codec.js";
import { SQLSTATE, sqlState, toBatonError } from "./postgres-errors.js";
import { LeaseInspection } from "./postgres-inspection.js";
import type { LeaseStatements } from "./postgres-lease-statements.js";
import { PostgresRecords } from "./postgres-records.js";
import type { Statements } from "./statements.js";

/** What a row-lease session needs from its backend. */
export interface PostgresLeaseSessionContext {
  /** The backend's pool: every statement is one transaction on whatever connection is free. */
  readonly pool: pg.Pool;
  readonly namespace: string;
  readonly statements: LeaseStatements;
  /** The records' statements (run by text, never prepared by name). */
  readonly recordStatements: Statements;
  /** Poll delays of a wait, ms: the first at most `minMs`, doubling up to `maxMs`. */
  readonly poll: { readonly minMs: number; readonly maxMs: number };
  /** The server, for messages: `db1:5432/app` (never credentials). */
  readonly where: string;
  /** The list statement of record keys (InspectionStatements.listRecords). */
  readonly listRecords: string;
  /** True when the schema has the tables of inspection (see `SchemaState` in schema.ts). */
  readonly operations: () => boolean;
}

/** Private part of a grant: which session it belongs to. */
interface LeaseGrantHandle {
  readonly session: PostgresLeaseSession;
}

/**
 * A lease the next renewal deletes, in the same statement: a release that failed (with its
 * token), or an acquire given up on whose grant may have reached the server (token `null`:
 * whatever this session holds under that name, which core does not know it holds).
 */
interface PendingRelease {
  readonly name: string;
  readonly token: string | null;
}

/**
 * One try at a lease: the grant, or the live holder's time left (when read) and its lease's
 * token (text; `null` when not read).
 */
interface TryOutcome {
  readonly grant: Grant | null;
  readonly remainingMs: number | null;
  readonly holderToken: string | null;
}

/** How long `close()` gives the deletion of the session's row. */
const CLOSE_BOUND_MS = 1_000;

/** At most this long for one statement: well inside the third of a TTL a renewal may take. */
function statementBoundMs(ttlMs: number): number {
  return Math.max(50, Math.floor(ttlMs / 3));
}

/**
 * One Baton session in the row-lease mode: a row in `lease_sessions` whose expiry, on the
 * server's clock, one statement per interval pushes a TTL ahead; each held lock is a row in
 * `leases` naming the session. No connection is kept: every statement is a transaction of its
 * own, so the session works through a pooler in transaction mode. A lock whose session
 * expired is taken by the next acquirer, which first deletes the expired session (and, by
 * cascade, its leases); a renewal that commits first keeps it.
 */
export class PostgresLeaseSession implements BackendSession {
  readonly ownerId: string;
  readonly ttlMs: number;
  readonly #id: string;
  readonly #context: PostgresLeaseSessionContext;
  readonly #boundMs: number;
  readonly #records: PostgresRecords;
  readonly #onClose: ((session: PostgresLeaseSession) => void) | undefined;
  /** Leases the next renewal deletes. */
  #pending: PendingRelease[] = [];
  /** The renewal under way and the names of unknown grants it deletes. */
  #renewal: { readonly done: Promise<unknown>; readonly orphans: ReadonlySet<string> } | undefined;
  #closing: Promise<void> | undefined;
  #lost: SessionLostError | undefined;
  /** Tokens of revocations the last renewal read: the next one deletes them. */
  #acks: string[] = [];
  readonly #inspection: LeaseInspection;

  private constructor(
    context: PostgresLeaseSessionContext,
    id: string,
    ownerId: string,
    ttlMs: number,
    onClose: ((session: PostgresLeaseSession) => void) | undefined,
  ) {
    this.#context = context;
    this.#id = id;
    this.ownerId = ownerId;
    this.ttlMs = ttlMs;
    this.#boundMs = statementBoundMs(ttlMs);
    this.#onClose = onClose;
    this.#records = new PostgresRecords({
      statements: context.recordStatements,
      timeoutMs: this.#boundMs,
      run: (statement, values) => this.#rows(statement.text, values),
      failure: (error, what) => this.#failure(error, what),
    });
    this.#inspection = new LeaseInspection(
      {
        namespace: context.namespace,
        rows: (text, values) => this.#rows(text, values),
        ready: context.operations,
      },
      context.statements,
      context.listRecords,
    );
  }

  /** Inserts the session row. */
  static async open(
    context: PostgresLeaseSessionContext,
    ownerId: string,
    ttlMs: number,
    signal: AbortSignal | undefined,
    onClose?: (session: PostgresLeaseSession) => void,
  ): Promise<PostgresLeaseSession> {
    const session = new PostgresLeaseSession(context, randomUUID(), ownerId, ttlMs, onClose);
    await session.#call(
      "open",
      undefined,
      session.#rows(context.statements.openSession, [session.#id, ownerId, ttlMs]),
      signal,
    );
    return session;
  }

  async keepAlive(): Promise<KeepAliveResult | undefined> {
    this.#assertLive();
    const pending = this.#pending;
    this.#pending = [];
    const operations = this.#context.operations();
    const acks = this.#acks;
    this.#acks = [];
    const values = [
      this.#id,
      this.#context.namespace,
      pending.map((p) => p.name),
      pending.map((p) => p.token),
    ];
    const call = this.#call(
      "renewal",
      undefined,
      operations
        ? this.#rows(this.#context.statements.renewOperations, [...values, acks])
        : this.#rows(this.#context.statements.renew, values),
    );
    const orphans = new Set(pending.filter((p) => p.token === null).map((p) => p.name));
    const renewal = { done: call.catch(noop), orphans };
    this.#renewal = renewal;
    let rows: Record<string, unknown>[];
    try {
      rows = await call;
    } catch (error) {
      this.#pending.push(...pending);
      this.#acks = acks.concat(this.#acks);
      throw error;
    } finally {
      if (this.#renewal === renewal) this.#renewal = undefined;
    }
    if (rows[0]?.live !== 1) {
      this.#lost = new SessionLostError(
        `the PostgreSQL session of "${this.ownerId}" was lost: its lease row expired (no renewal reached the server within the TTL) or was removed`,
      );
      throw this.#lost;
    }
    const revocations = decodeLeaseRevocations(rows[0]?.revoked);
    if (revocations.length === 0) return undefined;
    for (const r of revocations) this.#acks.push(r.token.toString());
    return {
      revoked: revocations.map((r) => ({
        space: "lock",
        key: r.name,
        token: r.token,
        reason: r.reason,
      })),
    };
  }

  async acquire(key: string, options: BackendAcquireOptions): Promise<Grant | null> {
    this.#assertLive();
    await this.#dropUnknownGrant(key);
    // A new lease on the name starts the pauses over (the guarantees' "poll-resets").
    const pauses = new PollBackoff(this.#context.poll);
    for (let attempt = 0; ; attempt++) {
      const outcome = await this.#call(
        "acquire",
        key,
        this.#tryOnce(key, options.value),
        attempt === 0 ? undefined : options.signal,
        (late) => {
          // Given up on: its grant may have reached the server. The next renewal (or the next
          // acquire of the name) deletes whatever lease of this name the session holds; a
          // grant whose reply comes after all is released (by its token) at once.
          this.#pending.push({ name: key, token: null });
          late
            .then((won) => (won.grant === null ? undefined : this.release(won.grant)))
            .catch(noop);
        },
      );
      if (outcome.grant !== null) return outcome.grant;
      if (!options.wait) return null;
      const pause = pauses.next(outcome.holderToken ?? undefined);
      await sleep(
        systemClock,
        outcome.remainingMs === null ? pause : Math.min(pause, outcome.remainingMs + 1),
        options.signal,
      );
      this.#assertLive();
    }
  }

  async release(grant: Grant): Promise<boolean> {
    const handle = grant.handle as LeaseGrantHandle | undefined;
    if (handle?.session !== this || this.#closing !== undefined) return false;
    const token = grant.token.toString();
    try {
      const rows = await this.#call(
        "release",
        grant.key,
        this.#rows(this.#context.statements.release, [
          this.#context.namespace,
          grant.key,
          this.#id,
          token,
        ]),
      );
      return rows.length > 0;
    } catch (error) {
      // The session still renews the lease: the next renewal deletes it, or it expires.
      this.#pending.push({ name: grant.key, token });
      throw error;
    }
  }

  async holder(key: string): Promise<Holder | null> {
    this.#assertLive();
    const rows = await this.#call(
      "holder",
      key,
      this.#rows(this.#context.statements.holder, [this.#context.namespace, key]),
    );
    return decodeHolder(rows);
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
    return this.#call("list", options.prefix, this.#inspection.listKeys(options), options.signal);
  }

  async inspectKey(space: "lock" | "permit", key: string): Promise<KeyState | null> {
    this.#assertLive();
    return this.#call("inspection", key, this.#inspection.inspectKey(space, key));
  }

  async forceRelease(
    space: "lock" | "permit",
    key: string,
    options: ForceReleaseOptions,
  ): Promise<boolean> {
    this.#assertLive();
    return this.#call(
      "forced release",
      key,
      this.#inspection.forceRelease(space, key, options),
      options.signal,
    );
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      try {
        // Bounded more tightly than other statements: closing must not wait on a server that
        // does not answer, and the row expires on its own anyway.
        await boundedCall(this.#rows(this.#context.statements.closeSession, [this.#id]), {
          timeoutMs: Math.min(this.#boundMs, CLOSE_BOUND_MS),
          what: "a PostgreSQL close",
          onAbandoned: (late) => late.catch(noop),
        });
      } catch {
        // Unreachable: the session row expires within one TTL and its leases with it.
      } finally {
        this.#onClose?.(this);
      }
    })();
    return this.#closing;
  }

  /**
   * Deletes the lease of `key` an acquire given up on may have left, before a new acquire of
   * that name: else the new one would wait for it, and a renewal deleting it later could take
   * the new grant. One statement, only after such an acquire.
   */
  async #dropUnknownGrant(key: string): Promise<void> {
    if (this.#renewal?.orphans.has(key)) await this.#renewal.done;
    const at = this.#pending.findIndex((p) => p.name === key && p.token === null);
    if (at === -1) return;
    this.#pending.splice(at, 1);
    try {
      await this.#call(
        "acquire",
        key,
        this.#rows(this.#context.statements.dropUnknown, [this.#context.namespace, key, this.#id]),
      );
    } catch (error) {
      this.#pending.push({ name: key, token: null });
      throw error;
    }
  }

  /**
   * One try: take the lease; when a row holds it, delete its session if that expired and, if
   * it did, take the lease again.
   */
  async #tryOnce(key: string, value: string | undefined): Promise<TryOutcome> {
    const { statements, namespace } = this.#context;
    const values = [namespace, key, this.#id, this.ownerId, value ?? null];
    let taken = decodeLeaseGrant(await this.#rows(statements.acquire, values));
    if (taken.token === null && taken.live) {
      const reap = decodeReap(await this.#rows(statements.reap, [namespace, key]));
      if (reap.reaped === 0) {
        return { grant: null, remainingMs: reap.remainingMs, holderToken: reap.holderToken };
      }
      taken = decodeLeaseGrant(await this.#rows(statements.acquire, values));
    }
    if (!taken.live) throw this.#expired();
    if (taken.token === null) return { grant: null, remainingMs: null, holderToken: null };
    const handle: LeaseGrantHandle = { session: this };
    return {
      grant: { key, ownerId: this.ownerId, token: taken.token, handle },
      remainingMs: null,
      holderToken: null,
    };
  }

  /**
   * Runs one statement on a pooled connection (one transaction): its rows, or pg's error. A
   * statement unanswered past the bound fails in pg as well, and its connection is dropped
   * from the pool (released with the error), so nothing waits on a dead link for ever.
   */
  async #rows(text: string, values: unknown[]): Promise<Record<string, unknown>[]> {
    const client = await this.#context.pool.connect();
    try {
      // pg honours query_timeout per query; its typings list it on the client's config only.
      const config = { text, values, query_timeout: this.#boundMs * 2 } as pg.QueryConfig;
      const result = await client.query(config);
      client.release();
      return result.rows;
    } catch (error) {
      client.release(error instanceof Error ? error : new Error(String(error)));
      throw error;
    }
  }

  /** Bounds `call` (a statement's promise) in time and by `signal`; maps its failure. */
  #call<T>(
    what: string,
    name: string | undefined,
    call: Promise<T>,
    signal?: AbortSignal,
    onAbandoned?: (late: Promise<T>) => void,
  ): Promise<T> {
    return boundedCall(call, {
      timeoutMs: this.#boundMs,
      signal,
      what: `a PostgreSQL ${what} at ${this.#context.where}`,
      name,
      mapError: (error) => this.#failure(error, `postgres ${what} at ${this.#context.where}`),
      onAbandoned: onAbandoned ?? ((late) => late.catch(noop)),
    });
  }

  #failure(error: unknown, context: string): unknown {
    // A lease inserted for a session that an acquirer reaped meanwhile.
    if (sqlState(error) === SQLSTATE.foreignKeyViolation) return this.#expired(error);
    return toBatonError(error, context);
  }

  #expired(cause?: unknown): SessionLostError {
    this.#lost ??= new SessionLostError(
      `the PostgreSQL session of "${this.ownerId}" was lost: its lease row expired before this statement reached the server`,
      cause === undefined ? undefined : { cause },
    );
    return this.#lost;
  }

  #assertLive(): void {
    if (this.#closing !== undefined) {
      throw new SessionLostError("this PostgreSQL session is closed");
    }
    if (this.#lost !== undefined) throw this.#lost;
  }
}

function noop(): void {}
