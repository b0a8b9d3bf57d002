import { randomBytes } from "node:crypto";
import {
  type BackendPermitOptions,
  BackendUnavailableError,
  ConfigError,
  type Grant,
  type PermitHolder,
  PermitLimitError,
  type PermitMode,
  systemClock,
} from "@baton/core";
import {
  decodePermitAcquire,
  decodePermitCheck,
  decodePermitDowngrade,
  decodePermitHolders,
  decodePermitNotice,
  decodeUnlocked,
} from "./postgres-codec.js";
import { SQLSTATE, sqlState } from "./postgres-errors.js";
import type { Statement, Statements } from "./statements.js";

/** What the permits of a session need from it. */
export interface PermitCalls {
  readonly namespace: string;
  readonly ownerId: string;
  readonly ttlMs: number;
  readonly statements: Statements;
  /** The session's loss. */
  readonly lost: AbortSignal;
  /**
   * Runs `statement` in the connection's turn as a PreparedCall: its one column, or the error
   * to throw (the session's loss when the connection ended; its cause is pg's error).
   */
  column(statement: Statement, values: readonly (string | null)[]): Promise<string | null>;
  /** Runs `statement` in the connection's turn: its rows, or the error to throw. */
  rows(statement: Statement, values: unknown[]): Promise<Record<string, unknown>[]>;
  /** Runs `text` (no parameters) in the connection's turn, or throws the error to throw. */
  simple(text: string): Promise<void>;
  /** Throws when the session is closed or lost. */
  assertLive(): void;
}

/** A permit grant's handle: which session's permits and entry it is. */
export class PermitHandle {
  /** The permits of the session that holds it. */
  readonly owner: PostgresPermits;
  /** The entry's id. */
  readonly id: bigint;

  constructor(owner: PostgresPermits, id: bigint) {
    this.owner = owner;
    this.id = id;
  }
}

/** An entry of this session: held, or whose release failed (see {@link PostgresPermits}). */
interface Entry {
  readonly name: string;
  readonly id: bigint;
  /** The liveness key it was queued under. */
  readonly session: string;
}

/** A grant this session holds. */
interface HeldPermit extends Entry {
  readonly mode: PermitMode;
  readonly token: bigint;
  /** The grant's handle: only this one releases it (a downgrade makes a new one). */
  readonly handle: PermitHandle;
}

/** Entries whose release failed at most that are kept to be released by the next renewal. */
const MAX_LEFTOVERS = 10_000;

/**
 * How long a waiter waits for a grant announcement before it looks itself (and drops what
 * dead sessions left on its key): between a quarter and a half of the TTL, at random, so the
 * waiters of a key do not look all at once. A holder whose connection ended is so freed
 * within about half a TTL of the end, a frozen one's within 1.5 TTL of its last renewal.
 */
function pollMs(ttlMs: number): number {
  return Math.max(20, Math.floor(ttlMs / 4 + (Math.random() * ttlMs) / 4));
}

/** A random liveness key (see permit-functions.ts), as a decimal bigint. */
function randomSessionKey(): string {
  return randomBytes(8).readBigInt64BE(0).toString();
}

/**
 * The permits (semaphores and read-write locks) of one advisory-mode session. Every change
 * is one call of a function in the server (permit-functions.ts). A waiting request's entry
 * stays queued in the server; it wakes when a grant announcement (`NOTIFY` on the schema's
 * channel, which the session's connection listens to from its first wait on) names it, and
 * looks on its own now and then (see {@link pollMs}). Entries live as long as the session's
 * connection (its liveness key), so the session's one renewal keeps them all.
 */
export class PostgresPermits {
  readonly #calls: PermitCalls;
  /** The liveness key of this session's entries. */
  #session = randomSessionKey();
  /** Whether the connection holds {@link #session} (taken with the first permit). */
  #live = false;
  /** The LISTEN, once sent. */
  #listening: Promise<void> | undefined;
  #listened = false;
  readonly #held = new Map<bigint, HeldPermit>();
  readonly #waiters = new Map<bigint, PermitWaiter>();
  /** Entries whose release failed while the session lived: the next renewal releases them. */
  #leftovers: Entry[] = [];

  constructor(calls: PermitCalls) {
    this.#calls = calls;
  }

  /** Acquires permits of `name` (see BackendSession.acquirePermits). */
  async acquire(name: string, options: BackendPermitOptions): Promise<Grant | null> {
    const calls = this.#calls;
    for (let attempt = 0; ; attempt++) {
      calls.assertLive();
      const session = this.#session;
      const live = !this.#live;
      let column: string | null;
      try {
        column = await calls.column(calls.statements.permitAcquire, [
          calls.namespace,
          name,
          String(options.limit),
          String(options.permits),
          options.mode,
          session,
          calls.ownerId,
          options.value ?? null,
          options.wait ? "t" : "f",
          live ? "t" : "f",
        ]);
      } catch (error) {
        throw missingObjects(error) ?? error;
      }
      const outcome = decodePermitAcquire(column);
      if (outcome.kind === "session-key-taken") {
        // Another connection holds this random key (odds as of two lock names hashing alike).
        if (attempt >= 3) {
          throw new BackendUnavailableError(
            "could not take a liveness key for this PostgreSQL session's permits",
          );
        }
        if (this.#session === session) this.#session = randomSessionKey();
        continue;
      }
      if (live) this.#live = true;
      switch (outcome.kind) {
        case "granted":
          return this.#granted(name, outcome.id, session, options.mode, outcome.token);
        case "refused":
          return null;
        case "limit":
          throw new PermitLimitError(name, outcome.stored, options.limit);
        case "waiting":
          return this.#wait(name, { name, id: outcome.id, session }, options);
      }
    }
  }

  /**
   * Waits until entry `entry` is granted; when the wait ends otherwise (aborted, the session
   * lost, a statement failed), it leaves nothing behind (or has the next renewal delete it).
   */
  async #wait(name: string, entry: Entry, options: BackendPermitOptions): Promise<Grant> {
    const calls = this.#calls;
    const { signal } = options;
    const waiter = new PermitWaiter();
    this.#waiters.set(entry.id, waiter);
    try {
      if (!this.#listened) {
        await this.#listen();
        // A grant announced before the LISTEN took effect was not heard: look now.
        waiter.woken = true;
      }
      for (;;) {
        const woken = await waiter.next(pollMs(calls.ttlMs), signal, calls.lost);
        const outcome = decodePermitCheck(
          await calls.column(calls.statements.permitCheck, [
            calls.namespace,
            name,
            entry.id.toString(),
            entry.session,
            woken ? "f" : "t",
          ]),
        );
        if (outcome === "gone") {
          throw new BackendUnavailableError(
            `the queued permit request of "${name}" is no longer in the store`,
          );
        }
        if (outcome === "waiting") continue;
        // A grant that came after an abort is given back (in the catch below).
        if (signal.aborted) throw signal.reason;
        this.#waiters.delete(entry.id);
        return this.#granted(name, entry.id, entry.session, options.mode, outcome);
      }
    } catch (error) {
      this.#waiters.delete(entry.id);
      await this.#drop(entry).catch(() => undefined);
      throw error;
    }
  }

  /** Listens on the schema's permit channel (once per session). */
  #listen(): Promise<void> {
    this.#listening ??= this.#calls.simple(this.#calls.statements.permitListen).then(
      () => {
        this.#listened = true;
      },
      (error: unknown) => {
        this.#listening = undefined;
        throw error;
      },
    );
    return this.#listening;
  }

  /** A notification on the session's connection: wakes the waiters whose grant it announces. */
  notified(payload: string | undefined): void {
    if (this.#waiters.size === 0) return;
    const range = decodePermitNotice(payload);
    if (range === null) return;
    const [first, last] = range;
    for (const [id, waiter] of this.#waiters) if (id >= first && id <= last) waiter.wake();
  }

  #granted(name: string, id: bigint, session: string, mode: PermitMode, token: bigint): Grant {
    const handle = new PermitHandle(this, id);
    this.#held.set(id, { name, id, session, mode, token, handle });
    return { key: name, ownerId: this.#calls.ownerId, token, handle };
  }

  /** Deletes `entry` (granted or queued); on failure, the next renewal does. */
  async #drop(entry: Entry): Promise<boolean> {
    const calls = this.#calls;
    // A dead connection's entries are dead: the next change of the key deletes them.
    if (calls.lost.aborted) return false;
    try {
      const column = await calls.column(calls.statements.permitRelease, [
        calls.namespace,
        entry.name,
        entry.id.toString(),
        entry.session,
      ]);
      return decodeUnlocked(column);
    } catch (error) {
      if (!calls.lost.aborted && this.#leftovers.length < MAX_LEFTOVERS) {
        this.#leftovers.push(entry);
      }
      throw error;
    }
  }

  /** Owner-checked release of a permit grant (see BackendSession.release). */
  async release(grant: Grant): Promise<boolean> {
    const handle = grant.handle as PermitHandle;
    const held = this.#held.get(handle.id);
    if (held?.handle !== handle) return false;
    this.#held.delete(handle.id);
    return this.#drop(held);
  }

  /** Turns a write grant into a read grant of 1 permit (see BackendSession.downgrade). */
  async downgrade(grant: Grant): Promise<Grant | null> {
    const calls = this.#calls;
    const handle = grant.handle as PermitHandle | undefined;
    if (!(handle instanceof PermitHandle) || handle.owner !== this) return null;
    const held = this.#held.get(handle.id);
    if (held?.handle !== handle || held.mode !== "write") return null;
    calls.assertLive();
    const token = decodePermitDowngrade(
      await calls.column(calls.statements.permitDowngrade, [
        calls.namespace,
        held.name,
        held.id.toString(),
        held.session,
      ]),
    );
    if (this.#held.get(handle.id) !== held) return null;
    if (token === null) {
      this.#held.delete(handle.id);
      return null;
    }
    return this.#granted(held.name, held.id, held.session, "read", token);
  }

  /** Whether this session holds any permit (its renewal then reads revocations). */
  get holding(): boolean {
    return this.#held.size > 0;
  }

  /**
   * A grant of `name` with `token` was force-released (its entry is gone at the server):
   * forgets it, so its release resolves `false`. Whether this session held it.
   */
  revoked(name: string, token: bigint): boolean {
    for (const [id, held] of this.#held) {
      if (held.name !== name || held.token !== token) continue;
      this.#held.delete(id);
      return true;
    }
    return false;
  }

  /** The liveness key of this session's entries (decimal). */
  get sessionKey(): string {
    return this.#session;
  }

  /** The granted entries of `name` whose sessions live, in grant order. */
  async holders(name: string): Promise<PermitHolder[]> {
    const calls = this.#calls;
    calls.assertLive();
    try {
      return decodePermitHolders(
        await calls.rows(calls.statements.permitHolders, [calls.namespace, name, this.#session]),
      );
    } catch (error) {
      throw missingObjects(error) ?? error;
    }
  }

  /** Whether entries whose release failed wait for the renewal. */
  get leftovers(): boolean {
    return this.#leftovers.length > 0;
  }

  /** Releases the entries whose release failed (the renewal, before its own statement). */
  async releaseLeftovers(): Promise<void> {
    const entries = this.#leftovers;
    this.#leftovers = [];
    try {
      await this.#releaseMany(entries);
    } catch (error) {
      this.#leftovers.push(...entries.slice(0, MAX_LEFTOVERS - this.#leftovers.length));
      throw error;
    }
  }

  /** Releases every entry of the session (its close); nothing when it has none. */
  async releaseAll(): Promise<void> {
    const entries: Entry[] = [...this.#held.values(), ...this.#leftovers];
    this.#held.clear();
    this.#leftovers = [];
    await this.#releaseMany(entries);
  }

  async #releaseMany(entries: readonly Entry[]): Promise<void> {
    if (entries.length === 0) return;
    const calls = this.#calls;
    await calls.rows(calls.statements.permitReleaseMany, [
      entries.map(() => calls.namespace),
      entries.map((e) => e.name),
      entries.map((e) => e.id.toString()),
      // One session key per call: entries of another key (a retried liveness key) are rare.
      entries[0]?.session,
    ]);
    const rest = entries.filter((e) => e.session !== entries[0]?.session);
    if (rest.length > 0) await this.#releaseMany(rest);
  }

  /** The connection ended: its entries are dead, and nothing is left to release. */
  lost(): void {
    this.#held.clear();
    this.#leftovers = [];
  }
}

/** A `ConfigError` saying to run `migrate()` when `error` is about missing permit objects. */
function missingObjects(error: unknown): ConfigError | undefined {
  const cause = (error as { cause?: unknown } | null)?.cause ?? error;
  const state = sqlState(cause);
  if (state !== SQLSTATE.undefinedTable && state !== SQLSTATE.undefinedFunction) return undefined;
  return new ConfigError(
    "schema",
    `the permit tables or functions are missing in Baton's schema (${(cause as Error).message}); run migrate() once (as a role that may create them) to add them`,
    { cause },
  );
}

/** A waiting request: woken by a grant announcement, or by its poll timer. */
class PermitWaiter {
  /** Woken while not waiting: the next {@link next} returns at once. */
  woken = false;
  #wake: (() => void) | undefined;

  wake(): void {
    this.woken = true;
    this.#wake?.();
  }

  /**
   * Resolves `true` when woken (now or before), `false` after `ms`; rejects with the reason of
   * `signal` or `lost` when either aborts.
   */
  next(ms: number, signal: AbortSignal, lost: AbortSignal): Promise<boolean> {
    if (signal.aborted) return Promise.reject(signal.reason);
    if (lost.aborted) return Promise.reject(lost.reason);
    if (this.woken) {
      this.woken = false;
      return Promise.resolve(true);
    }
    return new Promise<boolean>((resolve, reject) => {
      const done = () => {
        this.#wake = undefined;
        timer.cancel();
        signal.removeEventListener("abort", onAbort);
        lost.removeEventListener("abort", onLost);
      };
      const onAbort = () => {
        done();
        reject(signal.reason);
      };
      const onLost = () => {
        done();
        reject(lost.reason);
      };
      const timer = systemClock.setTimer(() => {
        done();
        resolve(false);
      }, ms);
      this.#wake = () => {
        done();
        this.woken = false;
        resolve(true);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      lost.addEventListener("abort", onLost, { once: true });
    });
  }
}
