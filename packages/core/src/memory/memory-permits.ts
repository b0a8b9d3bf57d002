import type {
  InspectedHolder,
  KeyState as InspectedKey,
  PermitHolder,
  PermitMode,
  RevokedGrant,
} from "../contract/backend.js";
import { PermitLimitError, SessionLostError } from "../contract/errors.js";
import type { Clock, Timer } from "../helpers/clock.js";
import { addSharedAbort, removeSharedAbort } from "../helpers/once-aborted.js";

/** What the permit table needs of a memory session. @internal */
export interface PermitSession {
  readonly ownerId: string;
  readonly expiresAt: number;
  readonly closed: boolean;
  /** Grants force-released since the session's last renewal (see {@link revoke}). */
  revoked: RevokedGrant[] | undefined;
}

/** One holder or waiter of a permit key. */
interface Entry {
  readonly session: PermitSession;
  permits: number;
  mode: PermitMode;
  readonly value: string | undefined;
  token: bigint;
  granted: boolean;
  /** A waiter's callbacks. */
  grant?: (entry: Entry) => void;
  drop?: (error: unknown) => void;
}

/** A permit key's queue: granted entries first (the rule keeps them a prefix), then waiters. */
interface KeyQueue {
  readonly limit: number;
  readonly entries: Entry[];
  /** How many entries at the front are granted. */
  granted: number;
  /** Permits of the granted entries. */
  held: number;
  /** Permits of every entry. */
  total: number;
  /** Fires at the earliest lease end among the granted entries' sessions. */
  sweep?: Timer;
  sweepAt: number;
}

/**
 * Keeps `grant`'s revocation for `session`'s next renewal, which reports it (a closed session
 * has nobody to tell).
 */
export function revoke(
  session: { closed: boolean; revoked: RevokedGrant[] | undefined },
  grant: RevokedGrant,
): void {
  if (session.closed) return;
  if (session.revoked === undefined) session.revoked = [grant];
  else session.revoked.push(grant);
}

/** A grant of {@link MemoryPermits.acquire}: the entry itself, the release handle. */
export type PermitEntry = Entry;

/**
 * The semaphores and read-write locks of a {@link MemoryStore}: one queue per key in which a
 * request is granted when the permits of every entry ahead of it plus its own fit the limit.
 * Entries of a session whose lease ran out are dropped at the lease's end.
 *
 * @internal
 */
export class MemoryPermits {
  readonly #clock: Clock;
  readonly #nextToken: () => bigint;
  readonly #keys = new Map<string, KeyQueue>();
  /** The newest write token of each key: kept as long as the store lives. */
  readonly #lastWrite = new Map<string, bigint>();

  constructor(clock: Clock, nextToken: () => bigint) {
    this.#clock = clock;
    this.#nextToken = nextToken;
  }

  acquire(
    session: PermitSession,
    key: string,
    request: { limit: number; permits: number; mode: PermitMode; wait: boolean },
    value: string | undefined,
    signalOf: { readonly signal: AbortSignal },
  ): Promise<Entry | null> {
    let queue = this.#keys.get(key);
    if (queue !== undefined) {
      this.#sweepDead(key, queue);
      queue = this.#keys.get(key);
    }
    if (queue !== undefined && queue.limit !== request.limit) {
      return Promise.reject(new PermitLimitError(key, queue.limit, request.limit));
    }
    if (queue === undefined) {
      queue = {
        limit: request.limit,
        entries: [],
        granted: 0,
        held: 0,
        total: 0,
        sweepAt: Number.POSITIVE_INFINITY,
      };
      this.#keys.set(key, queue);
    }
    const entry: Entry = {
      session,
      permits: request.permits,
      mode: request.mode,
      value,
      token: 0n,
      granted: false,
    };
    // Behind every entry there is: granted when they and it fit the limit.
    if (queue.total + entry.permits <= queue.limit) {
      queue.entries.push(entry);
      queue.total += entry.permits;
      this.#grant(key, queue, entry);
      return Promise.resolve(entry);
    }
    if (!request.wait) {
      this.#forgetIfIdle(key, queue);
      return Promise.resolve(null);
    }
    const signal = signalOf.signal;
    if (signal.aborted) {
      this.#forgetIfIdle(key, queue);
      return Promise.reject(signal.reason);
    }
    const q = queue;
    return new Promise<Entry | null>((resolve, reject) => {
      const onAbort = () => {
        this.#remove(key, q, entry);
        reject(signal.reason);
      };
      entry.grant = (granted) => {
        removeSharedAbort(signal, onAbort);
        resolve(granted);
      };
      entry.drop = (error) => {
        removeSharedAbort(signal, onAbort);
        reject(error);
      };
      q.entries.push(entry);
      q.total += entry.permits;
      addSharedAbort(signal, onAbort);
    });
  }

  /** Owner-checked release: true when `entry` was still granted to `session`. */
  release(session: PermitSession, key: string, entry: Entry): boolean {
    const queue = this.#keys.get(key);
    if (queue === undefined || !entry.granted || entry.session !== session) return false;
    this.#sweepDead(key, queue);
    if (!entry.granted) return false; // its session's lease ran out meanwhile
    this.#remove(key, queue, entry);
    return true;
  }

  /** A granted write becomes a read of 1 permit with its token; readers behind may start. */
  downgrade(session: PermitSession, key: string, entry: Entry): Entry | null {
    const queue = this.#keys.get(key);
    if (queue === undefined || !entry.granted || entry.session !== session) return null;
    this.#sweepDead(key, queue);
    if (!entry.granted || entry.mode !== "write") return null;
    queue.held -= entry.permits - 1;
    queue.total -= entry.permits - 1;
    entry.permits = 1;
    entry.mode = "read";
    this.#admit(key, queue);
    return entry;
  }

  /** The granted entries of `key`, in grant order. */
  holders(key: string): PermitHolder[] {
    const queue = this.#keys.get(key);
    if (queue === undefined) return [];
    this.#sweepDead(key, queue);
    const out: PermitHolder[] = [];
    for (const e of queue.entries) {
      if (!e.granted) break;
      const holder = {
        ownerId: e.session.ownerId,
        token: e.token,
        permits: e.permits,
        mode: e.mode,
      };
      out.push(e.value === undefined ? holder : { ...holder, value: e.value });
    }
    return out;
  }

  /** The permit keys that have holders or waiters now. */
  keys(): string[] {
    return [...this.#keys.keys()];
  }

  /** The holders (in grant order), waiters and limit of `key`, or `null` when it has none. */
  inspect(key: string): InspectedKey | null {
    const queue = this.#keys.get(key);
    if (queue === undefined) return null;
    this.#sweepDead(key, queue);
    if (this.#keys.get(key) !== queue) return null;
    const holders: InspectedHolder[] = [];
    const waiting: string[] = [];
    const now = this.#clock.now();
    for (const e of queue.entries) {
      if (!e.granted) {
        waiting.push(e.session.ownerId);
        continue;
      }
      const holder = {
        ownerId: e.session.ownerId,
        token: e.token,
        permits: e.permits,
        mode: e.mode,
        remainingMs: Math.max(0, e.session.expiresAt - now),
      };
      holders.push(e.value === undefined ? holder : { ...holder, value: e.value });
    }
    return {
      holders,
      waiters: { count: waiting.length, ownerIds: waiting },
      limit: queue.limit,
    };
  }

  /**
   * Frees the oldest granted entry of `key` with `token`, whoever's it is, and admits who may
   * go next; its session learns it, with `reason`, at its next renewal. (Reads share the
   * token of the write before them: one read is freed per call.) False when none holds it.
   */
  forceRelease(key: string, token: bigint, reason: string): boolean {
    const queue = this.#keys.get(key);
    if (queue === undefined) return false;
    this.#sweepDead(key, queue);
    const entry = queue.entries.find((e) => e.granted && e.token === token);
    if (entry === undefined) return false;
    revoke(entry.session, { space: "permit", key, token, reason });
    this.#remove(key, queue, entry);
    return true;
  }

  /** Drops every entry of `session` (closed or expired) and admits who may go next. */
  closeSession(session: PermitSession): void {
    for (const [key, queue] of [...this.#keys]) {
      const mine = queue.entries.filter((e) => e.session === session);
      if (mine.length === 0) continue;
      for (const e of mine) {
        this.#unlink(queue, e);
        e.drop?.(new SessionLostError(`memory session of "${session.ownerId}" closed`));
      }
      this.#admit(key, queue);
    }
  }

  #alive(session: PermitSession): boolean {
    return !session.closed && this.#clock.now() < session.expiresAt;
  }

  #grant(key: string, queue: KeyQueue, entry: Entry): void {
    entry.granted = true;
    queue.granted += 1;
    queue.held += entry.permits;
    if (entry.mode === "read") {
      entry.token = this.#lastWrite.get(key) ?? 0n;
    } else {
      entry.token = this.#nextToken();
      if (entry.mode === "write") this.#lastWrite.set(key, entry.token);
    }
    if (entry.session.expiresAt < queue.sweepAt)
      this.#armSweep(key, queue, entry.session.expiresAt);
  }

  #armSweep(key: string, queue: KeyQueue, at: number): void {
    queue.sweep?.cancel();
    queue.sweepAt = at;
    queue.sweep = this.#clock.setTimer(
      () => {
        queue.sweep = undefined;
        queue.sweepAt = Number.POSITIVE_INFINITY;
        if (this.#keys.get(key) === queue) this.#sweepDead(key, queue);
      },
      Math.max(0, at - this.#clock.now()),
    );
  }

  /** Drops the entries of sessions whose lease ran out, admits who may go, re-arms the sweep. */
  #sweepDead(key: string, queue: KeyQueue): void {
    const entries = queue.entries;
    let dropped = false;
    for (let i = entries.length - 1; i >= 0; i--) {
      const e = entries[i] as Entry;
      if (this.#alive(e.session)) continue;
      this.#unlink(queue, e, i);
      dropped = true;
      e.drop?.(new SessionLostError(`memory session of "${e.session.ownerId}" expired`));
    }
    if (dropped) this.#admit(key, queue);
    else this.#forgetIfIdle(key, queue);
    if (this.#keys.get(key) !== queue) return;
    let earliest = Number.POSITIVE_INFINITY;
    for (const e of entries) {
      if (!e.granted) break;
      if (e.session.expiresAt < earliest) earliest = e.session.expiresAt;
    }
    if (
      earliest < Number.POSITIVE_INFINITY &&
      (queue.sweep === undefined || earliest !== queue.sweepAt)
    ) {
      this.#armSweep(key, queue, earliest);
    }
  }

  #remove(key: string, queue: KeyQueue, entry: Entry): void {
    this.#unlink(queue, entry);
    this.#admit(key, queue);
  }

  /** Takes `entry` (at `at`, when known) out of the queue and its sums. */
  #unlink(queue: KeyQueue, entry: Entry, at = queue.entries.indexOf(entry)): void {
    if (at < 0) return;
    queue.entries.splice(at, 1);
    queue.total -= entry.permits;
    if (entry.granted) {
      queue.granted -= 1;
      queue.held -= entry.permits;
      entry.granted = false;
    }
  }

  /** Grants every waiter the rule now admits, in queue order, from the first waiter on. */
  #admit(key: string, queue: KeyQueue): void {
    const entries = queue.entries;
    while (queue.granted < entries.length) {
      const e = entries[queue.granted] as Entry;
      if (queue.held + e.permits > queue.limit) break;
      this.#grant(key, queue, e);
      const grant = e.grant;
      e.grant = undefined;
      e.drop = undefined;
      grant?.(e);
    }
    this.#forgetIfIdle(key, queue);
  }

  /** A key nobody holds or waits for forgets its limit. */
  #forgetIfIdle(key: string, queue: KeyQueue): void {
    if (queue.entries.length > 0) return;
    queue.sweep?.cancel();
    this.#keys.delete(key);
  }
}
