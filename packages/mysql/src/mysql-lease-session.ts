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
import {
  decodeDeleted,
  decodeHolder,
  decodeLeaseAcquire,
  decodeLeaseRenewal,
  lastRows,
} from "./mysql-codec.js";
import { toBatonError } from "./mysql-errors.js";
import { LeaseInspection } from "./mysql-inspection.js";
import {
  acquireValues,
  type LeaseStatements,
  type PendingDrop,
  type RecordStatements,
  renewValues,
} from "./mysql-lease-statements.js";
import { MysqlRecords } from "./mysql-records.js";

/** What a row-lease session needs from its backend. */
export interface MysqlLeaseSessionContext {
  /**
   * Runs one call (one round trip, one or more statements) on a pooled connection: mysql2's
   * result, or its error. `timeoutMs` bounds it at the client (the connection is then dropped).
   * An `urgent` call (a renewal) gets the next free connection before the calls waiting.
   */
  readonly run: (
    sql: string,
    values: unknown[],
    timeoutMs: number,
    urgent?: boolean,
  ) => Promise<unknown>;
  readonly namespace: string;
  readonly statements: LeaseStatements;
  readonly recordStatements: RecordStatements;
  /** Poll delays of a wait, ms: the first at most `minMs`, doubling up to `maxMs`. */
  readonly poll: { readonly minMs: number; readonly maxMs: number };
  /** The server, for messages: `db1:3306/app` (never credentials). */
  readonly where: string;
}

/** Private part of a grant: which session it belongs to. */
interface LeaseGrantHandle {
  readonly session: MysqlLeaseSession;
}

/** How long `close()` gives the deletion of the session's rows. */
const CLOSE_BOUND_MS = 1_000;

/** At most this long for one call: well inside the third of a TTL a renewal may take. */
function statementBoundMs(ttlMs: number): number {
  return Math.max(50, Math.floor(ttlMs / 3));
}

/**
 * One Baton session in the row-lease mode: a row in the lease sessions table whose expiry, on
 * the server's clock, one statement per interval pushes a TTL ahead; each held lock is a row in
 * the leases table naming the session. No connection is kept: every call is one round trip on
 * whatever pooled connection is free, and a transaction never outlives its call, so the
 * session works through poolers and proxies and on a Galera node. A lock whose session expired
 * is taken by the next acquirer, which deletes the expired lease first in its own transaction;
 * a renewal that commits first keeps it.
 */
export class MysqlLeaseSession implements BackendSession {
  readonly ownerId: string;
  readonly ttlMs: number;
  readonly #id: string;
  readonly #context: MysqlLeaseSessionContext;
  readonly #boundMs: number;
  readonly #records: MysqlRecords;
  readonly #inspection: LeaseInspection;
  readonly #onClose: ((session: MysqlLeaseSession) => void) | undefined;
  /** Leases the next renewal deletes. */
  #pending: PendingDrop[] = [];
  /** The renewal under way and the names of unknown grants it deletes. */
  #renewal: { readonly done: Promise<unknown>; readonly orphans: ReadonlySet<string> } | undefined;
  #closing: Promise<void> | undefined;
  #lost: SessionLostError | undefined;
  /** Tokens of revocations the last renewal read: the next one deletes them. */
  #acks: string[] = [];

  private constructor(
    context: MysqlLeaseSessionContext,
    id: string,
    ownerId: string,
    ttlMs: number,
    onClose: ((session: MysqlLeaseSession) => void) | undefined,
  ) {
    this.#context = context;
    this.#id = id;
    this.ownerId = ownerId;
    this.ttlMs = ttlMs;
    this.#boundMs = statementBoundMs(ttlMs);
    this.#onClose = onClose;
    const run = (sql: string, values: unknown[]) => this.#run(sql, values);
    this.#records = new MysqlRecords({
      statements: context.recordStatements,
      namespace: context.namespace,
      timeoutMs: this.#boundMs,
      run,
      failure: (error, what) => toBatonError(error, `${what} at ${context.where}`),
    });
    this.#inspection = new LeaseInspection(
      { namespace: context.namespace, run },
      context.statements,
      context.recordStatements,
    );
  }

  /** Inserts the session row. */
  static async open(
    context: MysqlLeaseSessionContext,
    ownerId: string,
    ttlMs: number,
    signal: AbortSignal | undefined,
    onClose?: (session: MysqlLeaseSession) => void,
  ): Promise<MysqlLeaseSession> {
    const session = new MysqlLeaseSession(context, randomUUID(), ownerId, ttlMs, onClose);
    await session.#call(
      "open",
      undefined,
      session.#run(context.statements.openSession, [session.#id, ownerId, ttlMs, ttlMs]),
      signal,
    );
    return session;
  }

  async keepAlive(): Promise<KeepAliveResult | undefined> {
    this.#assertLive();
    const pending = this.#pending;
    this.#pending = [];
    const acks = this.#acks;
    this.#acks = [];
    const call = this.#call(
      "renewal",
      undefined,
      this.#run(
        this.#context.statements.renew(pending, acks.length),
        renewValues(this.#id, this.#context.namespace, pending, acks),
        true,
      ),
    );
    const orphans = new Set(pending.filter((p) => p.token === null).map((p) => p.name));
    const renewal = { done: call.catch(noop), orphans };
    this.#renewal = renewal;
    let reply: unknown;
    try {
      reply = await call;
    } catch (error) {
      this.#pending.push(...pending);
      this.#acks = acks.concat(this.#acks);
      throw error;
    } finally {
      if (this.#renewal === renewal) this.#renewal = undefined;
    }
    const renewed = decodeLeaseRenewal(reply);
    if (!renewed.live) {
      this.#lost = new SessionLostError(
        `the MySQL session of "${this.ownerId}" was lost: its lease row expired (no renewal reached the server within the TTL) or was removed`,
      );
      throw this.#lost;
    }
    if (renewed.revoked.length === 0) return undefined;
    for (const r of renewed.revoked) this.#acks.push(r.token.toString());
    return {
      revoked: renewed.revoked.map((r) => ({
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
    try {
      const reply = await this.#call(
        "release",
        grant.key,
        this.#run(this.#context.statements.release, [
          this.#context.namespace,
          grant.key,
          this.#id,
          grant.token,
        ]),
      );
      return decodeDeleted(reply);
    } catch (error) {
      // The session still renews the lease: the next renewal deletes it, or it expires.
      this.#pending.push({ name: grant.key, token: grant.token.toString() });
      throw error;
    }
  }

  async holder(key: string): Promise<Holder | null> {
    this.#assertLive();
    const reply = await this.#call(
      "holder",
      key,
      this.#run(this.#context.statements.holder, [this.#context.namespace, key]),
    );
    return decodeHolder(lastRows(reply));
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
        await boundedCall(
          this.#context.run(
            this.#context.statements.closeSession,
            [this.#id, this.#id, this.#id],
            Math.min(this.#boundMs, CLOSE_BOUND_MS) * 2,
          ),
          {
            timeoutMs: Math.min(this.#boundMs, CLOSE_BOUND_MS),
            what: "a MySQL close",
            onAbandoned: (late) => late.catch(noop),
          },
        );
      } catch {
        // Unreachable: the session row expires within one TTL, and its leases with it.
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
        this.#run(this.#context.statements.dropUnknown, [this.#context.namespace, key, this.#id]),
      );
    } catch (error) {
      this.#pending.push({ name: key, token: null });
      throw error;
    }
  }

  /** One try (one round trip): the grant, or the holder's time left when it is held. */
  async #tryOnce(
    key: string,
    value: string | undefined,
  ): Promise<{ grant: Grant | null; remainingMs: number | null; holderToken: string | null }> {
    const { statements, namespace } = this.#context;
    const reply = await this.#run(
      statements.acquire,
      acquireValues(namespace, key, this.#id, this.ownerId, value ?? null),
    );
    const outcome = decodeLeaseAcquire(reply);
    if (!outcome.live) throw this.#expired();
    if (outcome.token === null) {
      return { grant: null, remainingMs: outcome.remainingMs, holderToken: outcome.holderToken };
    }
    const handle: LeaseGrantHandle = { session: this };
    return {
      grant: { key, ownerId: this.ownerId, token: outcome.token, handle },
      remainingMs: null,
      holderToken: null,
    };
  }

  /** One round trip, bounded at the client at twice the statement bound. */
  #run(sql: string, values: unknown[], urgent = false): Promise<unknown> {
    return this.#context.run(sql, values, this.#boundMs * 2, urgent);
  }

  /** Bounds `call` (a round trip's promise) in time and by `signal`; maps its failure. */
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
      what: `a MySQL ${what} at ${this.#context.where}`,
      name,
      mapError: (error) => toBatonError(error, `mysql ${what} at ${this.#context.where}`),
      onAbandoned: onAbandoned ?? ((late) => late.catch(noop)),
    });
  }

  #expired(): SessionLostError {
    this.#lost ??= new SessionLostError(
      `the MySQL session of "${this.ownerId}" was lost: its lease row expired before this statement reached the server`,
    );
    return this.#lost;
  }

  #assertLive(): void {
    if (this.#closing !== undefined) {
      throw new SessionLostError("this MySQL session is closed");
    }
    if (this.#lost !== undefined) throw this.#lost;
  }
}

function noop(): void {}
