import {
  type BackendAcquireOptions,
  type BackendSession,
  BackendUnavailableError,
  ConfigError,
  type Grant,
  type Holder,
  type KeepAliveResult,
  linkSignals,
  SessionLostError,
} from "@baton/core";
import pg from "pg";
import { advisoryKey } from "./advisory-key.js";
import type { KeyWaits, WaitTicket } from "./key-waits.js";
import { asBatonError, describeTarget, sqlState } from "./pg-errors.js";
import { StatementQueue } from "./statement-queue.js";
import type { Statement, Statements } from "./statements.js";
import { MAX_TOKEN_LOCKS, type TokenTag } from "./token-locks.js";
import type { WaiterPool } from "./waiter-pool.js";

/** Holder rows awaiting deletion at most (beyond, they stay until their key is taken again). */
const MAX_RELEASED = 10_000;

/** How long `close()` gives the tidying of holder rows before ending the connection. */
const CLOSE_TIDY_MS = 1_000;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/** Resolves after `ms`, or rejects with the reason when `signal` aborts first. */
function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * How long one wait on the session's connection lasts at most before it is sent again: a
 * bound in case a cancel is lost, well within the renewal's (TTL / 2).
 */
function waitSliceMs(ttlMs: number): number {
  return Math.max(50, Math.floor(ttlMs / 4));
}

/** How long a cancel of a wait may take to land before it is sent again. */
const CANCEL_AGAIN_MS = 25;

/** What a session needs from its backend. */
export interface SessionContext {
  readonly connection: pg.ClientConfig;
  readonly namespace: string;
  readonly statements: Statements;
  readonly waits: KeyWaits;
  readonly waiters: WaiterPool;
  /** Cancels the running statement of backend `pid` (`pg_cancel_backend`, another connection). */
  readonly cancel: (pid: number) => Promise<void>;
  /** The token-lock tag of a key (`tokenTag`; a test may make keys share one). */
  readonly tag: (key: bigint) => TokenTag;
}

/** The wait running on (or about to run on) the session's connection. */
interface ConnectionWait {
  /** Ends it soon: another statement needs the connection, or the wait was aborted. */
  interrupt(): void;
}

/** A key's use of its token-lock tag (counted in `#tagUses` until it ends, once). */
interface TagUse {
  readonly tag: TokenTag;
  ended: boolean;
}

/** A key this connection may still hold after a failed statement. */
interface Orphan {
  readonly key: bigint;
  /** It may hold the token lock of the key too (unlocked by tag). */
  readonly fenced: boolean;
  readonly use: TagUse;
}

interface Held extends Orphan {
  readonly name: string;
  readonly token: bigint;
  /** True: the token is in a token lock (no holder row); false: in the holder row. */
  readonly fenced: boolean;
}

/** Values of {@link Statements.unlockHeld} for `orphans`. */
function unlockValues(orphans: readonly Orphan[]): [string[], string[]] {
  const tags: string[] = [];
  for (const o of orphans) if (o.fenced) tags.push(String(o.use.tag));
  return [orphans.map((o) => o.key.toString()), tags];
}

/** Private part of a grant: which session and key it belongs to. */
interface GrantHandle {
  readonly session: PostgresSession;
  readonly key: bigint;
}

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
  readonly #context: SessionContext;
  readonly #lost = new AbortController();
  /** Held grants by lock name. */
  readonly #held = new Map<string, Held>();
  /** Lock names by advisory key, to catch two names of one session hashing alike. */
  readonly #names = new Map<bigint, string>();
  /** Released grants whose holder rows are deleted by the next renewal (off the hot path). */
  #released: Held[] = [];
  /**
   * Keys whose release (or acquire) failed while the connection lived: unlocked, with their
   * token locks, by the next renewal or before the key is taken again.
   */
  readonly #orphans = new Map<bigint, Orphan>();
  /**
   * How many keys use each token-lock tag: held, being acquired, or orphans. A key takes a token
   * lock only when its tag is unused (and fewer than MAX_TOKEN_LOCKS tags are in use), so this
   * connection's token lock of a tag belongs to one key, and a key recorded in a row is never
   * followed by a later token-lock grant that shares its tag (holder() takes the newer token
   * of the two; see statements.holder).
   */
  readonly #tagUses = new Map<number, number>();
  readonly #onClose: ((session: PostgresSession) => void) | undefined;
  #renewal: Promise<KeepAliveResult | undefined> | undefined;
  #closing: Promise<void> | undefined;
  /** The connection's statements, one at a time (see #send). */
  readonly #statements: StatementQueue;
  /** The wait for a lock that occupies the connection, if any (see #waitAcquire). */
  #waiting: ConnectionWait | undefined;
  /** The server process of the connection (to cancel a wait). */
  #pid = 0;

  private constructor(
    client: pg.Client,
    context: SessionContext,
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
  }

  /** Aborted with `SessionLostError` when the connection ends or fails. */
  get lost(): AbortSignal {
    return this.#lost.signal;
  }

  /** Connects a dedicated client, sets `idle_session_timeout` = `ttlMs`. */
  static async open(
    context: SessionContext,
    ownerId: string,
    ttlMs: number,
    signal: AbortSignal | undefined,
    onClose?: (session: PostgresSession) => void,
  ): Promise<PostgresSession> {
    if (signal?.aborted) throw signal.reason;
    const client = new pg.Client({ fallback_application_name: "baton", ...context.connection });
    const session = new PostgresSession(client, context, ownerId, ttlMs, onClose);
    // Attached before connecting: an error event without a listener would crash the process.
    client.on("error", (error) => session.#markLost(error));
    client.on("end", () => session.#markLost(undefined));
    const onAbort = () => {
      void client.end().catch(() => undefined);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      await client.connect();
      const { rows } = await client.query({
        ...context.statements.register,
        values: [String(ttlMs), ownerId],
      });
      session.#pid = (rows[0] as { pid: number }).pid;
    } catch (error) {
      void client.end().catch(() => undefined);
      if (signal?.aborted) throw signal.reason;
      throw asBatonError(
        error,
        "could not open a PostgreSQL session",
        describeTarget(context.connection),
      );
    } finally {
      signal?.removeEventListener("abort", onAbort);
    }
    return session;
  }

  async keepAlive(): Promise<KeepAliveResult | undefined> {
    this.#assertAlive();
    // One renewal in flight at a time: a slow one is joined, never piled on.
    this.#renewal ??= this.#renew().finally(() => {
      this.#renewal = undefined;
    });
    const bound = Math.max(50, Math.floor(this.ttlMs / 2));
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new BackendUnavailableError(`PostgreSQL did not answer a renewal within ${bound} ms`),
          ),
        bound,
      );
    });
    try {
      return await Promise.race([this.#renewal, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  async #renew(): Promise<KeepAliveResult | undefined> {
    if (this.#orphans.size > 0) {
      const orphans = [...this.#orphans.values()];
      await this.#query(this.#context.statements.unlockHeld, unlockValues(orphans));
      for (const orphan of orphans) this.#unorphan(orphan);
    }
    const held = [...this.#held.values()];
    const released = this.#released;
    if (held.length === 0 && released.length === 0) {
      await this.#query({ name: "baton_ping", text: "SELECT 1" }, []);
      return undefined;
    }
    this.#released = [];
    const rows = await this.#query(this.#context.statements.renew, [
      held.map((h) => h.key.toString()),
      released.map((r) => r.key.toString()),
      released.map((r) => r.token.toString()),
    ]);
    if (rows.length === 0) return undefined;
    const lostKeys: string[] = [];
    for (const row of rows) {
      const key = BigInt(row.key as string);
      const name = this.#names.get(key);
      if (name === undefined) continue;
      const lost = this.#held.get(name);
      lostKeys.push(name);
      this.#forget(name);
      // Whatever of it may be left (its token locks) is unlocked with the orphans.
      if (lost !== undefined) this.#orphan(lost);
    }
    return { lostKeys };
  }

  async acquire(name: string, options: BackendAcquireOptions): Promise<Grant | null> {
    this.#assertAlive();
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
    try {
      let grant = await this.#tryAcquire(name, key, options.value);
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
        this.#assertAlive();
        waited = true;
        if (this.#waiting === undefined) {
          // Wait in PostgreSQL's own queue of the key, on this connection: a release hands the
          // lock straight to the first waiter, and wakes nobody else.
          ticket?.leave();
          ticket = undefined;
          grant = await this.#waitAcquire(name, key, options.value, signal);
          continue;
        }
        // The connection already waits for another lock: wake when this one is free (released,
        // or its holder's connection ended), then race.
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
        this.#assertAlive();
        grant = await this.#tryAcquire(name, key, options.value);
      }
    } finally {
      ticket?.leave();
    }
  }

  /**
   * Waits for `key` in the server on the session's own connection ({@link
   * Statements.waitAcquire}) and takes it. Resolves `null` when the wait ended without it: a
   * slice ran out, `signal` aborted, or another statement needed the connection (the wait is
   * cancelled for it, and the caller waits again after it). Nothing is left held then.
   */
  async #waitAcquire(
    name: string,
    key: bigint,
    value: string | undefined,
    signal: AbortSignal,
  ): Promise<Grant | null> {
    let interrupted = false;
    let running = false;
    let finished = false;
    const cancels: Promise<void>[] = [];
    const cancel = () => {
      cancels.push(
        this.#context.cancel(this.#pid).then(
          // A cancel that reaches the server before the statement is lost: send it again.
          () => void setTimeout(() => !finished && cancel(), CANCEL_AGAIN_MS).unref(),
          () => undefined,
        ),
      );
    };
    const wait: ConnectionWait = {
      interrupt: () => {
        if (interrupted) return;
        interrupted = true;
        if (running) cancel();
      },
    };
    this.#waiting = wait;
    signal.addEventListener("abort", wait.interrupt, { once: true });
    // Chosen in the order the statements run (a token lock only when no other key uses the
    // tag): as the turn is taken.
    const tag = this.#context.tag(key);
    const fenced = value === undefined && this.#unused(tag);
    const use = this.#use(tag);
    /** Whether `use` went to a grant or an orphan (else it ends here). */
    let handed = false;
    // Take the connection's turn (statements sent from now on come after, and interrupt).
    const turn = this.#statements.hold();
    let done = noop;
    try {
      done = await turn;
      if (interrupted || this.#statements.queued > 0 || signal.aborted) return null;
      this.#assertAlive();
      await this.#unlockOrphan(key, this.#direct);
      running = true;
      let token: string | null | undefined;
      let failure: unknown;
      try {
        const slice = String(waitSliceMs(this.ttlMs));
        const { statements } = this.#context;
        const result = await this.#client.query(
          fenced
            ? { ...statements.waitAcquireFenced, values: [key.toString(), tag, slice] }
            : {
                ...statements.waitAcquire,
                values: [key.toString(), name, this.ownerId, value ?? null, slice],
              },
        );
        token = (result.rows[0] as { token: string | null } | undefined)?.token;
      } catch (error) {
        failure = error;
      }
      running = false;
      finished = true;
      const alive = () => !this.#lost.signal.aborted && this.#closing === undefined;
      if (cancels.length > 0 && alive()) {
        // Bounded: a cancel that cannot reach the server (its connection cannot be opened)
        // must not hold up the session's statements.
        await Promise.race([Promise.all(cancels), sleep(waitSliceMs(this.ttlMs))]);
        await this.#absorbCancel();
      }
      if (failure !== undefined) {
        // The lock may have been granted before the statement failed (cancelled, or a later
        // step timed out): session advisory locks outlive it. Give it back, or have the next
        // renewal (or try) do it.
        handed = true;
        await this.#giveBack(key, fenced, use, this.#direct);
        const state = sqlState(failure);
        // Cancelled (interrupted or aborted), a slice ran out, or PostgreSQL broke a cycle of
        // sessions waiting for each other's locks (which Baton, like any lock, lets callers
        // build: their waits then run out as they would anyway).
        if (state === "57014" || state === "55P03" || state === "40P01") return null;
        throw this.#failure(failure);
      }
      if (token === null || token === undefined) return null;
      handed = true;
      return await this.#settle(name, key, value, token, fenced, use, this.#direct);
    } finally {
      if (!handed) this.#endUse(use);
      finished = true;
      signal.removeEventListener("abort", wait.interrupt);
      if (this.#waiting === wait) this.#waiting = undefined;
      done();
    }
  }

  /**
   * After a cancel of a wait: a cancel that arrived after the wait ended may still be pending
   * in the server, and would fail the next statement. A statement that runs to its end shows
   * that none is left.
   */
  async #absorbCancel(): Promise<void> {
    for (let i = 0; i < 3 && !this.#lost.signal.aborted; i++) {
      try {
        await this.#client.query({ name: "baton_ping", text: "SELECT 1" });
        return;
      } catch (error) {
        if (sqlState(error) !== "57014") return;
      }
    }
  }

  async #tryAcquire(name: string, key: bigint, value: string | undefined): Promise<Grant | null> {
    // Checked here first: awaiting a call that has nothing to do costs a turn of the queue.
    if (this.#orphans.has(key)) await this.#unlockOrphan(key, this.#inTurn);
    // Chosen as the statement is sent, so in the order the statements run.
    const tag = this.#context.tag(key);
    const fenced = value === undefined && this.#unused(tag);
    const use = this.#use(tag);
    const { statements } = this.#context;
    let token: string | null | undefined;
    try {
      const [row] = fenced
        ? await this.#query(statements.acquireFenced, [key.toString(), tag])
        : await this.#query(statements.acquire, [
            key.toString(),
            name,
            this.ownerId,
            value ?? null,
          ]);
      token = row?.token as string | null | undefined;
    } catch (error) {
      // A session advisory lock outlives a failed statement: give it back if we got it.
      await this.#giveBack(key, fenced, use, this.#inTurn);
      throw error;
    }
    if (token === null || token === undefined) {
      this.#endUse(use);
      return null;
    }
    return this.#settle(name, key, value, token, fenced, use, this.#inTurn);
  }

  /**
   * The grant of an acquire statement's `token` (of a granted lock): at once in the usual case
   * (no promise, no extra turn). When a fenced acquire's token lock was not taken (`r<token>`:
   * another connection holds that pair exclusively, or the token does not fit in an int4), the
   * holder row is recorded first, by a second statement; if that fails the lock is given back.
   * `use` is the grant's (or the orphan's) from here on.
   */
  #settle(
    name: string,
    key: bigint,
    value: string | undefined,
    token: string,
    fenced: boolean,
    use: TagUse,
    run: (config: pg.QueryConfig) => Promise<unknown>,
  ): Grant | Promise<Grant> {
    // 114: "r", a fenced acquire whose token lock was not taken.
    if (!fenced || token.charCodeAt(0) !== 114) {
      return this.#granted(name, key, BigInt(token), fenced, use);
    }
    return this.#recordThenGrant(name, key, value, BigInt(token.slice(1)), use, run);
  }

  async #recordThenGrant(
    name: string,
    key: bigint,
    value: string | undefined,
    token: bigint,
    use: TagUse,
    run: (config: pg.QueryConfig) => Promise<unknown>,
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
  readonly #direct = (config: pg.QueryConfig): Promise<unknown> => this.#client.query(config);
  /** Runs a statement in the connection's turn (see #send). */
  readonly #inTurn = (config: pg.QueryConfig): Promise<unknown> => this.#send(config);

  /**
   * A lock this connection may still hold from a failed statement ({@link #orphans}) is
   * unlocked before `key` is taken again, so it is not mistaken for the new grant.
   */
  async #unlockOrphan(key: bigint, run: (config: pg.QueryConfig) => Promise<unknown>) {
    const orphan = this.#orphans.get(key);
    if (orphan === undefined) return;
    try {
      await run({ ...this.#context.statements.unlockHeld, values: unlockValues([orphan]) });
    } catch (error) {
      throw this.#failure(error);
    }
    this.#unorphan(orphan);
  }

  /**
   * After a statement that may have taken `key` (and, when `fenced`, its token locks) failed
   * (session advisory locks outlive it): unlock what is held; if that fails too, it is an
   * orphan the next renewal (or try) unlocks. Takes over `use`.
   */
  async #giveBack(
    key: bigint,
    fenced: boolean,
    use: TagUse,
    run: (config: pg.QueryConfig) => Promise<unknown>,
  ) {
    const alive = () => !this.#lost.signal.aborted && this.#closing === undefined;
    if (!alive()) return;
    const orphan: Orphan = { key, fenced, use };
    try {
      await run({ ...this.#context.statements.unlockHeld, values: unlockValues([orphan]) });
      this.#endUse(use);
    } catch {
      if (alive()) this.#orphan(orphan);
    }
  }

  /** Keeps `orphan` (and its use of its tag) until it is unlocked. */
  #orphan(orphan: Orphan): void {
    const known = this.#orphans.get(orphan.key);
    if (known === undefined) {
      this.#orphans.set(orphan.key, { key: orphan.key, fenced: orphan.fenced, use: orphan.use });
      return;
    }
    // The same key twice: one entry, one use.
    this.#endUse(orphan.use);
    if (orphan.fenced && !known.fenced) {
      this.#orphans.set(orphan.key, { key: orphan.key, fenced: true, use: known.use });
    }
  }

  /** `orphan` was unlocked: forget it, unless it was replaced since (then it is unlocked again). */
  #unorphan(orphan: Orphan): void {
    if (this.#orphans.get(orphan.key) !== orphan) return;
    this.#orphans.delete(orphan.key);
    this.#endUse(orphan.use);
  }

  /**
   * Whether a key with `tag` may take a token lock: no key of this session uses the tag, and
   * fewer than MAX_TOKEN_LOCKS tags are in use.
   */
  #unused(tag: TokenTag): boolean {
    return !this.#tagUses.has(tag) && this.#tagUses.size < MAX_TOKEN_LOCKS;
  }

  #use(tag: TokenTag): TagUse {
    this.#tagUses.set(tag, (this.#tagUses.get(tag) ?? 0) + 1);
    return { tag, ended: false };
  }

  #endUse(use: TagUse): void {
    if (use.ended) return;
    use.ended = true;
    const n = (this.#tagUses.get(use.tag) ?? 0) - 1;
    if (n > 0) this.#tagUses.set(use.tag, n);
    else this.#tagUses.delete(use.tag);
  }

  #granted(name: string, key: bigint, token: bigint, fenced: boolean, use: TagUse): Grant {
    this.#held.set(name, { name, key, token, fenced, use });
    this.#names.set(key, name);
    const handle: GrantHandle = { session: this, key };
    return { key: name, ownerId: this.ownerId, token, handle };
  }

  async release(grant: Grant): Promise<boolean> {
    const handle = grant.handle as GrantHandle | undefined;
    const held = this.#held.get(grant.key);
    if (handle?.session !== this || held === undefined || held.token !== grant.token) return false;
    this.#forget(grant.key);
    // A dead connection has already freed everything it held.
    if (this.#lost.signal.aborted) return false;
    const { statements } = this.#context;
    const key = held.key.toString();
    try {
      const [row] = held.fenced
        ? await this.#query(statements.releaseFenced, [key, held.token.toString(), held.use.tag])
        : await this.#query(statements.release, [key]);
      if (!held.fenced && this.#released.length < MAX_RELEASED) this.#released.push(held);
      this.#endUse(held.use);
      return row?.unlocked === true;
    } catch (error) {
      // Never renewed again; the next renewal unlocks it if the connection lives on.
      if (!this.#lost.signal.aborted) this.#orphan(held);
      throw error;
    }
  }

  async holder(name: string): Promise<Holder | null> {
    this.#assertAlive();
    const key = advisoryKey(this.#context.namespace, name);
    const [row] = await this.#query(this.#context.statements.holder, [
      key.toString(),
      this.#context.tag(key),
    ]);
    if (row === undefined) return null;
    const holder: Holder = { ownerId: row.owner as string, token: BigInt(row.token as string) };
    return row.value === null ? holder : { ...holder, value: row.value as string };
  }

  /**
   * Pushes the holder of `name` now and after every change until `signal` aborts. A release,
   * or the end of the holder's connection, is seen at once (a server-side wait on a waiter
   * connection); a new grant on a free lock, or a handoff to a waiting session, within a third
   * of the TTL (at most 1 s; polled).
   */
  async *watch(name: string, signal: AbortSignal): AsyncGenerator<Holder | null> {
    const key = advisoryKey(this.#context.namespace, name);
    const pollMs = Math.min(1_000, Math.max(20, Math.floor(this.ttlMs / 3)));
    let last: string | undefined;
    while (!signal.aborted) {
      const holder = await this.holder(name);
      const id = holder === null ? "" : `${holder.ownerId}\u0000${holder.token}`;
      if (id !== last) {
        last = id;
        yield holder;
        if (signal.aborted) return;
      }
      const waiting = linkSignals([signal, this.#lost.signal]);
      try {
        // Bounded: a lock handed straight to a waiting session does not end the wait.
        if (holder !== null) await this.#context.waiters.waitUntilFree(key, pollMs, waiting.signal);
        else await abortableSleep(pollMs, waiting.signal);
      } catch (error) {
        if (signal.aborted) return;
        throw error;
      } finally {
        waiting.dispose();
      }
    }
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#onClose?.(this);
      const rows = [...this.#held.values(), ...this.#released].filter((h) => !h.fenced);
      this.#held.clear();
      this.#names.clear();
      this.#released = [];
      if (!this.#lost.signal.aborted) {
        // Tidy this session's holder rows and registration; bounded, since the connection ends
        // either way (and a later connection with its pid replaces the registration).
        const tidy = this.#send({
          ...this.#context.statements.unregister,
          values: [rows.map((r) => r.key.toString()), rows.map((r) => r.token.toString())],
        });
        await Promise.race([tidy.catch(() => undefined), sleep(CLOSE_TIDY_MS)]);
      }
      // Ending the connection frees every advisory lock it holds.
      await this.#client.end().catch(() => undefined);
    })();
    return this.#closing;
  }

  #forget(name: string): void {
    const held = this.#held.get(name);
    if (held === undefined) return;
    this.#held.delete(name);
    this.#names.delete(held.key);
  }

  #assertAlive(): void {
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
    this.#lost.abort(
      new SessionLostError(`the PostgreSQL session of "${this.ownerId}" was lost: ${why}`, {
        cause: error,
      }),
    );
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
   * {@link #send} and {@link #query}: the result (its rows when `rows`) and the error as is
   * (as {@link #failure} maps it when `rows`). One promise between the caller and pg's callback.
   */
  #submit(config: pg.QueryConfig, rows: false): Promise<pg.QueryResult>;
  #submit(config: pg.QueryConfig, rows: true): Promise<Record<string, unknown>[]>;
  #submit(config: pg.QueryConfig, rows: boolean): Promise<unknown> {
    // A wait for a lock occupies the connection: cancel it, it is sent again after this.
    this.#waiting?.interrupt();
    return new Promise((resolve, reject) => {
      this.#statements.submit(config, (error, result) => {
        if (error !== null) reject(rows ? this.#failure(error) : error);
        else resolve(rows ? (result as pg.QueryResult).rows : result);
      });
    });
  }

  /** The error to throw for a failed statement. */
  #failure(error: unknown): unknown {
    if (this.#lost.signal.aborted || this.#closing !== undefined) {
      return new SessionLostError(
        `the PostgreSQL session of "${this.ownerId}" was lost: ${(error as Error).message}`,
        { cause: error },
      );
    }
    const state = sqlState(error);
    // The server ended this connection (admin command, idle timeout, crash, shutdown).
    if (state?.startsWith("57P") === true || state === "08006" || state === "08003") {
      this.#markLost(error as Error);
      return this.#lost.signal.reason;
    }
    return asBatonError(error, "PostgreSQL query failed");
  }
}

function noop(): void {}
