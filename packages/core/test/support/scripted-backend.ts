import type {
  BackendAcquireOptions,
  BackendSession,
  Clock,
  Grant,
  Guarantees,
  Holder,
  KeepAliveResult,
  LockBackend,
  OpenSessionOptions,
} from "../../src/index.js";
import { MemoryBackend, type MemoryStore } from "../../src/index.js";

/** Calls the real (memory) implementation of the step being scripted. */
export type Next<T> = () => Promise<T>;

/**
 * Overrides of a {@link ScriptedBackend}'s steps. Each hook gets `next`, the memory backend's
 * own step, so it can fail, delay, hang or pass through. Hooks may be swapped mid-test.
 */
export interface Hooks {
  openSession?: (
    options: OpenSessionOptions,
    next: Next<BackendSession>,
  ) => Promise<BackendSession>;
  keepAlive?: (
    session: ScriptedSession,
    next: Next<KeepAliveResult | undefined>,
  ) => Promise<KeepAliveResult | undefined>;
  acquire?: (
    key: string,
    options: BackendAcquireOptions,
    next: Next<Grant | null>,
    session: ScriptedSession,
  ) => Promise<Grant | null>;
  release?: (grant: Grant, next: Next<boolean>, session: ScriptedSession) => Promise<boolean>;
  closeSession?: (session: ScriptedSession, next: Next<void>) => Promise<void>;
}

/** How many times each step was called. */
export interface CallCounts {
  openSession: number;
  keepAlive: number;
  acquire: number;
  release: number;
  holder: number;
  closeSession: number;
}

/** One keepAlive call: when it started (on the clock) and how it ended. */
export interface KeepAliveRecord {
  readonly session: number;
  readonly startedAt: number;
  outcome: "pending" | "ok" | "failed";
}

export interface ScriptedBackendOptions {
  readonly clock?: Clock;
  readonly store?: MemoryStore;
  readonly kind?: string;
  readonly fencing?: Guarantees["fencing"];
}

/**
 * A `LockBackend` over a real `MemoryBackend` whose every step can be scripted to fail, hang
 * or lie, and which counts calls and checks the contract core must keep with a backend.
 */
export class ScriptedBackend implements LockBackend {
  readonly kind: string;
  readonly guarantees: Guarantees;
  readonly inner: MemoryBackend;
  readonly clock: Clock | undefined;
  hooks: Hooks = {};
  readonly calls: CallCounts = {
    openSession: 0,
    keepAlive: 0,
    acquire: 0,
    release: 0,
    holder: 0,
    closeSession: 0,
  };
  readonly sessions: ScriptedSession[] = [];
  readonly keepAlives: KeepAliveRecord[] = [];
  /** Breaches of the backend contract by core (e.g. acquiring a key its session still holds). */
  readonly violations: string[] = [];
  keepAliveInFlight = 0;
  maxKeepAliveInFlight = 0;
  closed = false;

  constructor(options: ScriptedBackendOptions = {}) {
    this.clock = options.clock;
    this.inner = new MemoryBackend(
      options.store !== undefined ? { store: options.store } : { clock: options.clock },
    );
    this.kind = options.kind ?? "scripted";
    this.guarantees = {
      fencing: options.fencing ?? "monotonic",
      fifo: true,
      consensus: false,
      crossProcess: false,
      records: false,
      semaphores: false,
    };
  }

  async openSession(options: OpenSessionOptions): Promise<BackendSession> {
    this.calls.openSession++;
    const next = async () => {
      const inner = await this.inner.openSession(options);
      const session = new ScriptedSession(this, inner, this.sessions.length);
      this.sessions.push(session);
      return session;
    };
    return this.hooks.openSession ? this.hooks.openSession(options, next) : next();
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.inner.close();
  }

  /** The newest session opened. */
  get lastSession(): ScriptedSession {
    const session = this.sessions.at(-1);
    if (session === undefined) throw new Error("no session was opened");
    return session;
  }
}

/** A session of a {@link ScriptedBackend}. */
export class ScriptedSession implements BackendSession {
  readonly ownerId: string;
  readonly ttlMs: number;
  readonly index: number;
  readonly inner: BackendSession;
  readonly #backend: ScriptedBackend;
  readonly #lost = new AbortController();
  /** Keys this session holds as far as its grants and releases tell. */
  readonly held = new Set<string>();
  closed = false;

  constructor(backend: ScriptedBackend, inner: BackendSession, index: number) {
    this.#backend = backend;
    this.inner = inner;
    this.index = index;
    this.ownerId = inner.ownerId;
    this.ttlMs = inner.ttlMs;
  }

  get lost(): AbortSignal {
    return this.#lost.signal;
  }

  /** The backend learns on its own that the session is gone (e.g. connection closed). */
  loseNow(reason: unknown): void {
    this.#lost.abort(reason);
  }

  async keepAlive(): Promise<KeepAliveResult | undefined> {
    const b = this.#backend;
    b.calls.keepAlive++;
    const record: KeepAliveRecord = {
      session: this.index,
      startedAt: b.clock?.now() ?? performance.now(),
      outcome: "pending",
    };
    b.keepAlives.push(record);
    b.keepAliveInFlight++;
    b.maxKeepAliveInFlight = Math.max(b.maxKeepAliveInFlight, b.keepAliveInFlight);
    const next = () => this.inner.keepAlive();
    try {
      const result = await (b.hooks.keepAlive ? b.hooks.keepAlive(this, next) : next());
      record.outcome = "ok";
      for (const key of result?.lostKeys ?? []) this.held.delete(key);
      return result;
    } catch (error) {
      record.outcome = "failed";
      throw error;
    } finally {
      b.keepAliveInFlight--;
    }
  }

  async acquire(key: string, options: BackendAcquireOptions): Promise<Grant | null> {
    const b = this.#backend;
    b.calls.acquire++;
    if (this.held.has(key)) {
      b.violations.push(`acquire("${key}") on session ${this.index} that still holds it`);
    }
    const next = () => this.inner.acquire(key, options);
    const grant = await (b.hooks.acquire ? b.hooks.acquire(key, options, next, this) : next());
    if (grant !== null) this.held.add(key);
    return grant;
  }

  async release(grant: Grant): Promise<boolean> {
    const b = this.#backend;
    b.calls.release++;
    // The store frees the key when the inner release runs, even if a hook runs it late.
    const next = async () => {
      const released = await this.inner.release(grant);
      this.held.delete(grant.key);
      return released;
    };
    const released = await (b.hooks.release ? b.hooks.release(grant, next, this) : next());
    this.held.delete(grant.key);
    return released;
  }

  async holder(key: string): Promise<Holder | null> {
    this.#backend.calls.holder++;
    return await this.inner.holder(key);
  }

  watch(key: string, signal: AbortSignal): AsyncIterable<Holder | null> {
    const inner = this.inner.watch;
    if (inner === undefined) throw new Error("inner session has no watch");
    return inner.call(this.inner, key, signal);
  }

  async close(): Promise<void> {
    const b = this.#backend;
    b.calls.closeSession++;
    this.closed = true;
    const next = () => this.inner.close();
    await (b.hooks.closeSession ? b.hooks.closeSession(this, next) : next());
  }
}
