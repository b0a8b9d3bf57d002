import type { LockBackend } from "../contract/backend.js";
import { asUnavailable, ConfigError } from "../contract/errors.js";
import type { Abortable } from "../helpers/abort-scope.js";
import { raceAbortable } from "../helpers/bounded-call.js";
import type { Clock } from "../helpers/clock.js";
import { safeLog } from "../observability/logger.js";
import type { BackendLoader } from "./backend-loader.js";
import type { CoordinatorEventHub } from "./events.js";
import { closedError, type Lifecycle } from "./lifecycle.js";
import { ManagedSession, type SessionLock } from "./managed-session.js";
import type { ResolvedOptions } from "./options.js";

/** TTLs, besides the coordinator's, that locks of one coordinator may use (a session each). */
const MAX_LOCK_TTLS = 8;

/**
 * A coordinator's sessions: one managed session (and keepalive) for its own TTL, opened on
 * first use and again after a loss, and one more for each other TTL that `acquire`'s `ttlMs`
 * asks for (stores lease per session).
 */
export class SessionPool {
  readonly #options: ResolvedOptions;
  readonly #clock: Clock;
  readonly #events: CoordinatorEventHub;
  readonly #backend: BackendLoader;
  readonly #lifecycle: Lifecycle;
  /** Called with the backend before each session opens (the acquire pipeline reads it). */
  readonly #onBackend: (backend: LockBackend) => void;
  #session: ManagedSession | undefined;
  #opening: Promise<ManagedSession> | undefined;
  /** Sessions for locks acquired with a `ttlMs` other than the coordinator's, by TTL. */
  readonly #ttlSessions = new Map<number, ManagedSession>();
  readonly #ttlOpenings = new Map<number, Promise<ManagedSession>>();

  constructor(
    options: ResolvedOptions,
    clock: Clock,
    events: CoordinatorEventHub,
    backend: BackendLoader,
    lifecycle: Lifecycle,
    onBackend: (backend: LockBackend) => void,
  ) {
    this.#options = options;
    this.#clock = clock;
    this.#events = events;
    this.#backend = backend;
    this.#lifecycle = lifecycle;
    this.#onBackend = onBackend;
  }

  /** The live session, opening one when there is none or the last one was lost. */
  async current(signal: Abortable | undefined): Promise<ManagedSession> {
    const current = this.#session;
    if (current?.isValid()) return current;
    this.#opening ??= this.#open(this.#options.ttlMs).finally(() => {
      this.#opening = undefined;
    });
    return await raceAbortable(this.#opening, signal);
  }

  /** The live session for locks of `ttlMs` (undefined: the coordinator's), if there is one. */
  live(ttlMs: number | undefined): ManagedSession | undefined {
    const session =
      ttlMs === undefined || ttlMs === this.#options.ttlMs
        ? this.#session
        : this.#ttlSessions.get(ttlMs);
    return session?.isValid() ? session : undefined;
  }

  /**
   * The session for locks of `ttlMs`, opening one when there is none or the last one was
   * lost: stores lease per session, so each TTL in use has a session (and a keepalive) of
   * its own.
   */
  async sessionFor(
    ttlMs: number | undefined,
    signal: Abortable | undefined,
  ): Promise<ManagedSession> {
    const ownTtlMs = this.#options.ttlMs;
    if (ttlMs === undefined || ttlMs === ownTtlMs) return await this.current(signal);
    const live = this.live(ttlMs);
    if (live !== undefined) return live;
    let opening = this.#ttlOpenings.get(ttlMs);
    if (opening === undefined) {
      if (!this.#ttlSessions.has(ttlMs) && this.#ttlSessions.size >= MAX_LOCK_TTLS) {
        throw new ConfigError(
          "ttlMs",
          `this coordinator already keeps sessions for ${MAX_LOCK_TTLS} TTLs besides its own ${ownTtlMs} ms (${[...this.#ttlSessions.keys()].join(", ")} ms), and each TTL is a session of its own with the store: use a few fixed TTLs, or another coordinator`,
        );
      }
      opening = this.#open(ttlMs).finally(() => {
        this.#ttlOpenings.delete(ttlMs);
      });
      this.#ttlOpenings.set(ttlMs, opening);
    }
    return await raceAbortable(opening, signal);
  }

  /** Resolves once every session being opened has opened or failed (for `close()`). */
  async settleOpenings(): Promise<void> {
    const opening = this.#opening;
    if (opening) await opening.catch(() => undefined);
    await Promise.allSettled(this.#ttlOpenings.values());
  }

  /** Every lock held on these sessions. */
  heldLocks(): SessionLock[] {
    const sessions = [this.#session, ...this.#ttlSessions.values()];
    return sessions.flatMap((session) => session?.locks() ?? []);
  }

  /** Closes every session and forgets it; rejects with the first failure. */
  async closeAll(): Promise<void> {
    const session = this.#session;
    this.#session = undefined;
    const ttlSessions = [...this.#ttlSessions.values()];
    this.#ttlSessions.clear();
    const closed = await Promise.allSettled([
      session?.close(),
      ...ttlSessions.map((s) => s.close()),
    ]);
    const failed = closed.find((c) => c.status === "rejected");
    if (failed !== undefined) throw failed.reason;
  }

  async #open(ttlMs: number): Promise<ManagedSession> {
    const backend = await this.#backend.get();
    this.#onBackend(backend);
    const { ownerId, logger } = this.#options;
    let session: ManagedSession;
    try {
      session = await ManagedSession.open(backend, ttlMs, ownerId, {
        clock: this.#clock,
        renewEveryMs: this.#options.renewEveryMs,
        events: this.#events,
        logger,
      });
    } catch (error) {
      throw asUnavailable(error, `could not open a ${backend.kind} session`);
    }
    if (this.#lifecycle.closed) {
      await session.close();
      throw closedError();
    }
    if (ttlMs === this.#options.ttlMs) this.#session = session;
    else this.#ttlSessions.set(ttlMs, session);
    if (session.ttlMs !== ttlMs) {
      safeLog(
        logger,
        "warn",
        `baton: the ${backend.kind} server granted a ${session.ttlMs} ms session instead of the ${ttlMs} ms asked for; deadlines use ${session.ttlMs} ms`,
      );
    }
    this.#events.emit("sessionOpened", { ownerId, ttlMs: session.ttlMs });
    return session;
  }
}
