import type {
  Holder,
  InspectedHolder,
  KeyState as InspectedKey,
  RevokedGrant,
  StoredRecord,
} from "../contract/backend.js";
import { SessionLostError } from "../contract/errors.js";
import { type Clock, systemClock, type Timer } from "../helpers/clock.js";
import { addSharedAbort, removeSharedAbort } from "../helpers/once-aborted.js";
import { MemoryPermits, revoke } from "./memory-permits.js";

interface SessionState {
  readonly id: number;
  readonly ownerId: string;
  readonly ttlMs: number;
  expiresAt: number;
  closed: boolean;
  readonly held: Set<string>;
  /** Grants force-released since the last renewal, which reports them (see forceRelease). */
  revoked: RevokedGrant[] | undefined;
}

interface Waiter {
  readonly session: SessionState;
  readonly value: string | undefined;
  readonly grant: (token: bigint) => void;
  readonly drop: (error: unknown) => void;
}

interface KeyState {
  holder?: {
    session: SessionState;
    token: bigint;
    value: string | undefined;
    /** When it was granted, on the store's clock. */
    since: number;
  };
  expiry?: Timer;
  readonly waiters: Waiter[];
  readonly watchers: Set<() => void>;
}

/** Grant details handed back by {@link MemoryStore.acquire}. */
export interface MemoryGrant {
  readonly token: bigint;
}

/**
 * The state of one in-process lock service: sessions with leases on a {@link Clock}, a FIFO
 * queue per key, one token counter (so tokens rise across all keys), and watchers.
 * Several `MemoryBackend`s built on one store share its locks.
 */
export class MemoryStore {
  /** The clock leases are measured on. */
  readonly clock: Clock;
  /** @internal Its semaphores and read-write locks (tokens from the same counter). */
  readonly permits: MemoryPermits;
  #nextSession = 1;
  #counter = 0n;
  readonly #keys = new Map<string, KeyState>();
  readonly #records = new Map<string, StoredRecord>();
  #recordVersion = 0;

  constructor(options?: { clock?: Clock }) {
    this.clock = options?.clock ?? systemClock;
    this.permits = new MemoryPermits(this.clock, () => {
      this.#counter += 1n;
      return this.#counter;
    });
  }

  /** The durable record `key`, or `null` (records live as long as the store). */
  readRecord(key: string): StoredRecord | null {
    return this.#records.get(key) ?? null;
  }

  /** Writes record `key` if its version is `expected` (`null`: absent); the new version or `null`. */
  writeRecord(key: string, value: string, expected: string | null): string | null {
    if ((this.#records.get(key)?.version ?? null) !== expected) return null;
    const version = String(++this.#recordVersion);
    this.#records.set(key, { value, version });
    return version;
  }

  /** Opens a session whose lease runs `ttlMs` from now. */
  openSession(ownerId: string, ttlMs: number): SessionState {
    return {
      id: this.#nextSession++,
      ownerId,
      ttlMs,
      expiresAt: this.clock.now() + ttlMs,
      closed: false,
      held: new Set(),
      revoked: undefined,
    };
  }

  /** Renews `session`'s lease; throws `SessionLostError` when it already ran out. */
  keepAlive(session: SessionState): void {
    if (!this.#alive(session)) {
      this.closeSession(session);
      throw new SessionLostError(`memory session of "${session.ownerId}" expired`);
    }
    session.expiresAt = this.clock.now() + session.ttlMs;
  }

  /**
   * Grants `key` to `session` now, queues it (`wait`), or resolves `null` when held. `signalOf`
   * is a signal, or something whose `signal` is read only when the call is about to wait (the
   * coordinator builds it on first read; see BackendAcquireOptions.signal).
   */
  acquire(
    session: SessionState,
    key: string,
    wait: boolean,
    value: string | undefined,
    signalOf: AbortSignal | { readonly signal: AbortSignal },
  ): Promise<MemoryGrant | null> {
    const given = signalOf instanceof AbortSignal ? signalOf : undefined;
    if (given?.aborted) return Promise.reject(given.reason);
    if (!this.#alive(session)) {
      this.closeSession(session);
      return Promise.reject(new SessionLostError(`memory session of "${session.ownerId}" expired`));
    }
    // Expiring the old holder may drop the key's entry: look it up again after.
    this.#expireHolder(key, this.#state(key));
    const state = this.#state(key);
    if (state.holder?.session === session) {
      return Promise.reject(new Error(`session already holds "${key}" (core serialises this)`));
    }
    if (state.holder === undefined && state.waiters.length === 0) {
      return Promise.resolve({ token: this.#grant(key, state, session, value) });
    }
    if (!wait) return Promise.resolve(null);
    const signal = given ?? (signalOf as { readonly signal: AbortSignal }).signal;
    if (signal.aborted) return Promise.reject(signal.reason);
    return new Promise<MemoryGrant | null>((resolve, reject) => {
      const onAbort = () => {
        const at = state.waiters.indexOf(waiter);
        if (at >= 0) state.waiters.splice(at, 1);
        reject(signal.reason);
        // A waiter that left may have been the head of the queue behind a free key.
        this.#handOff(key, state);
      };
      const waiter: Waiter = {
        session,
        value,
        grant: (token) => {
          removeSharedAbort(signal, onAbort);
          resolve({ token });
        },
        drop: (error) => {
          removeSharedAbort(signal, onAbort);
          reject(error);
        },
      };
      state.waiters.push(waiter);
      addSharedAbort(signal, onAbort);
    });
  }

  /** Owner-checked release: true when `session` still held `key` with `token`. */
  release(session: SessionState, key: string, token: bigint): boolean {
    const state = this.#keys.get(key);
    if (state === undefined) return false;
    this.#expireHolder(key, state);
    if (state.holder?.session !== session || state.holder.token !== token) return false;
    this.#free(key, state);
    return true;
  }

  /** The live holder of `key`, or null. */
  holder(key: string): Holder | null {
    const state = this.#keys.get(key);
    if (state === undefined) return null;
    this.#expireHolder(key, state);
    const h = state.holder;
    if (h === undefined) return null;
    const remainingMs = Math.max(0, h.session.expiresAt - this.clock.now());
    return h.value === undefined
      ? { ownerId: h.session.ownerId, token: h.token, remainingMs }
      : { ownerId: h.session.ownerId, token: h.token, value: h.value, remainingMs };
  }

  /** @internal The lock keys that have a holder or waiters now. */
  lockKeys(): string[] {
    const keys: string[] = [];
    for (const [key, state] of this.#keys) {
      if (state.holder !== undefined || state.waiters.length > 0) keys.push(key);
    }
    return keys;
  }

  /** @internal The record keys. */
  recordKeys(): string[] {
    return [...this.#records.keys()];
  }

  /** @internal The holder and waiters of lock `key`, or `null` when it has neither. */
  inspectLock(key: string): InspectedKey | null {
    const state = this.#keys.get(key);
    if (state === undefined) return null;
    this.#expireHolder(key, state);
    const waiters = state.waiters.filter((w) => this.#alive(w.session));
    const h = state.holder;
    if (h === undefined && waiters.length === 0) return null;
    const holders: InspectedHolder[] = [];
    if (h !== undefined) {
      const now = this.clock.now();
      const holder = {
        ownerId: h.session.ownerId,
        token: h.token,
        remainingMs: Math.max(0, h.session.expiresAt - now),
        heldMs: Math.max(0, now - h.since),
      };
      holders.push(h.value === undefined ? holder : { ...holder, value: h.value });
    }
    return {
      holders,
      waiters: { count: waiters.length, ownerIds: waiters.map((w) => w.session.ownerId) },
    };
  }

  /**
   * @internal Frees lock `key` if the grant with `token` holds it, whoever's it is: the next
   * waiter gets it at once, and the holder's session learns it, with `reason`, at its next
   * renewal. False when no such grant holds it.
   */
  forceRelease(key: string, token: bigint, reason: string): boolean {
    const state = this.#keys.get(key);
    if (state === undefined) return false;
    this.#expireHolder(key, state);
    const h = state.holder;
    if (h === undefined || h.token !== token) return false;
    revoke(h.session, { space: "lock", key, token, reason });
    this.#free(key, state);
    return true;
  }

  /** Pushes the holder of `key` now and after each change until `signal` aborts. */
  async *watch(key: string, signal: AbortSignal): AsyncGenerator<Holder | null> {
    const state = this.#state(key);
    let changed = true;
    let wake: (() => void) | undefined;
    const onChange = () => {
      changed = true;
      wake?.();
    };
    const onAbort = () => wake?.();
    state.watchers.add(onChange);
    signal.addEventListener("abort", onAbort, { once: true });
    try {
      while (!signal.aborted) {
        if (!changed) {
          await new Promise<void>((resolve) => {
            wake = resolve;
          });
          wake = undefined;
          continue;
        }
        changed = false;
        yield this.holder(key);
      }
    } finally {
      state.watchers.delete(onChange);
      signal.removeEventListener("abort", onAbort);
    }
  }

  /** Ends `session`: frees what it holds and drops its waiters. Idempotent. */
  closeSession(session: SessionState): void {
    if (session.closed) return;
    session.closed = true;
    this.permits.closeSession(session);
    for (const key of [...session.held]) {
      const state = this.#keys.get(key);
      if (state?.holder?.session === session) this.#free(key, state);
    }
    for (const [key, state] of this.#keys) {
      const mine = state.waiters.filter((w) => w.session === session);
      if (mine.length === 0) continue;
      for (const w of mine) {
        state.waiters.splice(state.waiters.indexOf(w), 1);
        w.drop(new SessionLostError(`memory session of "${session.ownerId}" closed`));
      }
      this.#handOff(key, state);
    }
  }

  #alive(session: SessionState): boolean {
    return !session.closed && this.clock.now() < session.expiresAt;
  }

  #state(key: string): KeyState {
    let state = this.#keys.get(key);
    if (state === undefined) {
      state = { waiters: [], watchers: new Set() };
      this.#keys.set(key, state);
    }
    return state;
  }

  #grant(key: string, state: KeyState, session: SessionState, value: string | undefined): bigint {
    this.#counter += 1n;
    const token = this.#counter;
    const now = this.clock.now();
    state.holder = { session, token, value, since: now };
    session.held.add(key);
    this.#scheduleExpiry(key, state, now);
    this.#notify(state);
    return token;
  }

  #scheduleExpiry(key: string, state: KeyState, now = this.clock.now()): void {
    state.expiry?.cancel();
    const h = state.holder;
    if (h === undefined) return;
    state.expiry = this.clock.setTimer(() => {
      state.expiry = undefined;
      if (state.holder !== h) return;
      if (this.#alive(h.session)) this.#scheduleExpiry(key, state);
      else this.#free(key, state);
    }, h.session.expiresAt - now);
  }

  #expireHolder(key: string, state: KeyState): void {
    const h = state.holder;
    if (h !== undefined && !this.#alive(h.session)) this.#free(key, state);
  }

  #free(key: string, state: KeyState): void {
    const h = state.holder;
    if (h !== undefined) h.session.held.delete(key);
    state.holder = undefined;
    state.expiry?.cancel();
    state.expiry = undefined;
    this.#notify(state);
    this.#handOff(key, state);
  }

  #handOff(key: string, state: KeyState): void {
    while (state.holder === undefined && state.waiters.length > 0) {
      const next = state.waiters.shift() as Waiter;
      if (!this.#alive(next.session)) {
        next.drop(
          new SessionLostError(`memory session of "${next.session.ownerId}" expired while waiting`),
        );
        continue;
      }
      next.grant(this.#grant(key, state, next.session, next.value));
    }
    if (state.holder === undefined && state.waiters.length === 0 && state.watchers.size === 0) {
      this.#keys.delete(key);
    }
  }

  #notify(state: KeyState): void {
    for (const w of state.watchers) w();
  }
}

/** The per-session state of a {@link MemoryStore}; opaque to users. */
export type MemorySessionState = SessionState;

const named = new Map<string, MemoryStore>();

/**
 * The store called `name` in this process (in this copy of `@baton/core`), created on first
 * use on the system clock: what `memory://NAME` and `{ storeName }` share.
 */
export function namedStore(name: string): MemoryStore {
  let store = named.get(name);
  if (store === undefined) {
    store = new MemoryStore();
    named.set(name, store);
  }
  return store;
}
