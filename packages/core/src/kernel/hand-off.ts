import type { Guarantees } from "../contract/guarantees.js";
import type { Clock } from "../helpers/clock.js";
import type { TurnListener } from "../helpers/keyed-mutex.js";

/** Names remembered at most; past this, entries older than a few windows are dropped. */
const MAX_NAMES = 1_000;
/**
 * A name taken again right after each release, and never found held, is handed off anyway (a
 * waiter of another process may be polling unseen): the second such hand-off comes this many ms
 * after the first, and each that nobody else took doubles the time to the next, up to
 * {@link PROBE_MAX_MS}.
 */
export const PROBE_EVERY_MS = 2_000;
/**
 * The longest time between two such hand-offs of a name taken again at once: a waiter of
 * another process that polls gets a turn within this and one hand-off window.
 */
export const PROBE_MAX_MS = 8_000;
/**
 * The hand-off window on a backend whose waiters the store wakes at a release (its guarantees
 * say `waiters: "woken"`): such a waiter asks again within a round trip, not a poll.
 */
export const WOKEN_WINDOW_MS = 5;
/**
 * The first such hand-off comes this many ms into a run of taking the name again at once:
 * processes that asked at the same moment as this one wait unseen from the start.
 */
export const FIRST_PROBE_AFTER_MS = 500;
/**
 * The longest pause between two looks of a waiter that polls, once it saw the lock change
 * hands: it then looks again within 25 to 50 ms (and backs off only while the lock stays
 * with one holder).
 */
export const FAST_LOOK_MS = 50;
/** Added to a probe's window for timers that fire late on a busy host. */
export const PROBE_SLACK_MS = 20;

/** A name taken again at once after each release, nobody else seen wanting it. */
interface Streak {
  /** When its next hand-off is due (monotonic ms). */
  probeAt: number;
  /** The time from the next hand-off to the one after it, in ms (doubled by a quiet one). */
  everyMs: number;
  /** Whether the latest hand-off was given: its grant tells whether anyone else took the name. */
  probing: boolean;
}

/** How a lock of a name held here ended. */
interface Ended {
  /** When (monotonic ms). */
  readonly at: number;
  /** Whether an acquire here had found the name held shortly before. */
  readonly contended: boolean;
}

/** The last grant of a name here. */
interface LastGrant {
  readonly token: bigint;
  /** {@link HandOffs.grantsHere} after it. */
  readonly grantsHere: number;
  /** When (monotonic ms). */
  readonly at: number;
}

/**
 * Gives the waiters of a backend without a queue (its guarantees say `fifo: false`: waiters
 * poll) a turn at a lock this coordinator keeps taking.
 *
 * On such a backend, a process that releases a lock and asks for it again at once finds it
 * free before a waiter of another process looks again, so it would win the next grant nearly
 * every time while the others wait out their `waitMs`. So a waiting acquire of a name whose
 * lock ended here less than a hand-off window ago first waits out the rest of the window, long
 * enough for a waiter that saw the lock change hands to look again: an eighth of the lock's
 * TTL, between 50 and 250 ms (such a waiter looks again within 25 to 50 ms, then backs off);
 * {@link WOKEN_WINDOW_MS} when the store wakes its waiters at a release (`waiters: "woken"`).
 * It does so when an acquire here found the name held within the last four windows (others
 * want it), and, while it keeps taking the name at once (others may be waiting unseen), once
 * {@link FIRST_PROBE_AFTER_MS} into that run, then {@link PROBE_EVERY_MS} later, then twice as
 * long after each hand-off nobody else took, up to {@link PROBE_MAX_MS}; otherwise it asks at
 * once, so a lock nobody else wants costs no wait. Where waiters look again soon after they
 * see the lock change hands (the guarantees' `waiters: "poll-resets"`), such a speculative
 * hand-off (a probe) waits only as long as a waiter needs to see the lock free and take it:
 * it looks again within {@link FAST_LOOK_MS}, and its pause grows only while one grant lasts,
 * so the probe's window is {@link FAST_LOOK_MS} plus twice the time the lock was held, four of
 * the store's round trips (as this coordinator's recent acquires took) and
 * {@link PROBE_SLACK_MS}, never more than the full window. A hand-off that another process
 * took (the grant after it skipped tokens, or found the name held) starts the hand-offs of
 * every release again. So a waiter of another process that polls gets a turn within
 * {@link PROBE_MAX_MS} and one window (a run of taking the name again costs it at most one
 * window per that time), and within {@link FIRST_PROBE_AFTER_MS} and one window when it asked
 * as the run began. Tries (`tryAcquire`, `waitMs: 0`) never hold off.
 *
 * The first hand-off of such a run comes early because processes that asked at the same moment
 * as this one (replicas starting together) are never seen: the acquire here found the name
 * free, and theirs wait in their poll. The window stays short even when the store answers
 * slowly: a coordinator sitting out its window does not ask, so a long window leaves fewer
 * waiters to take the lock, and more windows end with nobody else asking.
 *
 * @internal
 */
export class HandOffs implements TurnListener {
  readonly #clock: Clock;
  /** When an acquire here last found the name held (monotonic ms). */
  readonly #contended = new Map<string, number>();
  /** How the last lock of the name held here ended. */
  readonly #ended = new Map<string, Ended>();
  /** While the name is taken again at once after each release, uncontended: its hand-offs. */
  readonly #streak = new Map<string, Streak>();
  /** The last grant of the name here. */
  readonly #tokens = new Map<string, LastGrant>();
  /** Grants of any name here so far: with a shared counter, tokens this process took itself. */
  #grantsHere = 0;
  /** The maps' size in all past which {@link #prune} looks (see there). */
  #pruneAt = MAX_NAMES;
  /** An average of the recent acquires that were granted at once, in ms: a store round trip. */
  #roundTripMs: number | undefined;

  /** Whether a key's tokens are consecutive per key (else one counter serves every key). */
  readonly #perKeyTokens: boolean;
  /** Whether the store wakes waiters at a release (else they poll). */
  readonly #woken: boolean;
  /** Whether a waiter looks again soon once it saw the lock change hands: probes are short. */
  readonly #shortProbes: boolean;

  /**
   * @param perKeyTokens - the backend's tokens come from a counter per key (its guarantees'
   *   `tokenCounter` is `"per-key"`). With one counter for every key, the tokens this process
   *   took for other names meanwhile are not counted as grants elsewhere.
   * @param waiters - how waiters of other processes learn of a release (the guarantees'
   *   `waiters`): with `"woken"` the window is {@link WOKEN_WINDOW_MS}, not a poll's; with
   *   `"poll-resets"` a probe waits only as long as such a waiter needs.
   */
  constructor(
    clock: Clock,
    perKeyTokens: boolean,
    waiters: NonNullable<Guarantees["waiters"]> = "poll",
  ) {
    this.#clock = clock;
    this.#perKeyTokens = perKeyTokens;
    this.#woken = waiters === "woken";
    this.#shortProbes = waiters === "poll-resets";
  }

  /** This backend's hand-off window for a lock of `ttlMs`, in ms. */
  #windowMs(ttlMs: number): number {
    return this.#woken ? WOKEN_WINDOW_MS : HandOffs.windowMs(ttlMs);
  }

  /** The hand-off window of a lock of `ttlMs`, in ms. */
  static windowMs(ttlMs: number): number {
    return Math.max(50, Math.min(250, Math.floor(ttlMs / 8)));
  }

  /**
   * A lock of `name` was granted here with `token`. `foundHeld`: its acquire found the name
   * held (the backend was about to wait); `heldOff`: it held off first, and then a token that
   * skipped more tokens than this process took meanwhile (none with a counter per key, its
   * grants of other names with a shared one) shows that another process took tokens: the
   * name was granted elsewhere (with a shared counter: another process is granting names of
   * the store, perhaps this one). Either way other processes may want it too.
   */
  granted(
    name: string,
    token: bigint,
    foundHeld: boolean,
    heldOff: boolean,
    /**
     * When it was asked for (monotonic ms), when the store granted it at that first ask: the
     * time since is a round trip of the store.
     */
    askedAt?: number,
  ): void {
    this.#grantsHere++;
    const now = this.#clock.now();
    const last = this.#tokens.get(name);
    this.#tokens.set(name, { token, grantsHere: this.#grantsHere, at: now });
    if (askedAt !== undefined && !foundHeld) {
      const tookMs = now - askedAt;
      const average = this.#roundTripMs;
      this.#roundTripMs = average === undefined ? tookMs : 0.8 * average + 0.2 * tookMs;
    }
    const ownBetween =
      this.#perKeyTokens || last === undefined ? 0 : this.#grantsHere - last.grantsHere - 1;
    const elsewhere =
      heldOff && (last === undefined || token > last.token + 1n + BigInt(ownBetween));
    if (!foundHeld && !elsewhere) {
      const streak = this.#streak.get(name);
      if (heldOff && streak?.probing) {
        // Nobody else took the name in a whole window: the next hand-off can wait longer.
        streak.probing = false;
        streak.everyMs = Math.min(PROBE_MAX_MS, 2 * streak.everyMs);
      }
      return;
    }
    this.#contended.set(name, now);
    this.#streak.delete(name);
    this.#prune();
  }

  /**
   * A lock of `name` held here ended (released or lost), its turn of the name with it; `ttlMs`
   * is its TTL.
   */
  turnEnded(name: string, ttlMs: number): void {
    const at = this.#clock.now();
    const seen = this.#contended.get(name);
    const contended = seen !== undefined && at - seen <= 4 * this.#windowMs(ttlMs);
    if (!contended) this.#contended.delete(name);
    this.#ended.set(name, { at, contended });
    this.#prune();
  }

  /** How long a waiting acquire of `name` (locks of `ttlMs`) holds off before it asks, in ms. */
  holdOffMs(name: string, ttlMs: number): number {
    const ended = this.#ended.get(name);
    if (ended === undefined) return 0;
    const now = this.#clock.now();
    const leftMs = ended.at + this.#windowMs(ttlMs) - now;
    if (leftMs <= 0) {
      // Not taken again at once: nothing to hand off.
      this.#ended.delete(name);
      this.#streak.delete(name);
      return 0;
    }
    if (ended.contended) return leftMs;
    const streak = this.#streak.get(name);
    if (streak === undefined) {
      const probeAt = now + FIRST_PROBE_AFTER_MS;
      this.#streak.set(name, { probeAt, everyMs: PROBE_EVERY_MS, probing: false });
      return 0;
    }
    if (now < streak.probeAt) return 0;
    streak.probeAt = now + streak.everyMs;
    streak.probing = true;
    // At least 1 ms, so the grant after it counts as the probe's (see `granted`).
    return Math.max(1, Math.min(leftMs, ended.at + this.#probeWindowMs(name, ended) - now));
  }

  /**
   * The window of a probe after the lock `ended`: what a waiter that polls needs to see the
   * lock free and take it (see the class's description), at most the full window; the full
   * window where waiters may still be backing off after the lock changed hands.
   */
  #probeWindowMs(name: string, ended: Ended): number {
    // The name's last grant here is kept while its end is (see `#prune`): it began that lock.
    const grantedAt = this.#tokens.get(name)?.at;
    if (!this.#shortProbes || grantedAt === undefined || this.#roundTripMs === undefined)
      return Number.POSITIVE_INFINITY;
    const heldMs = ended.at - grantedAt;
    return FAST_LOOK_MS + 2 * heldMs + 4 * this.#roundTripMs + PROBE_SLACK_MS;
  }

  /**
   * Keeps the maps small: past {@link MAX_NAMES} names, drops entries of a few seconds ago.
   * When most names are recent (many names in use), the next look comes only once the maps
   * have doubled, so each grant and release costs no scan of every name.
   */
  #prune(): void {
    if (this.#tokens.size + this.#contended.size + this.#streak.size <= this.#pruneAt) return;
    const before = this.#clock.now() - 2 * PROBE_EVERY_MS;
    for (const [name, at] of this.#contended) if (at < before) this.#contended.delete(name);
    for (const [name, ended] of this.#ended) if (ended.at < before) this.#ended.delete(name);
    for (const [name, streak] of this.#streak) {
      if (streak.probeAt < before) this.#streak.delete(name);
    }
    // A name held now has no end yet: its token is kept for the grant after its release.
    for (const name of this.#tokens.keys()) if (!this.#ended.has(name)) this.#tokens.delete(name);
    this.#pruneAt = Math.max(
      MAX_NAMES,
      2 * (this.#tokens.size + this.#contended.size + this.#streak.size),
    );
  }
}
