import { BackendUnavailableError, boundedCall } from "@baton/core";
import type { RedisClient } from "./redis-client.js";
import { toBatonError } from "./redis-errors.js";

/** One waiter's view of a release channel. */
export interface ReleaseSubscription {
  /**
   * The next announcement on the channel since the last call (at once if one is pending), or
   * `undefined` after `ms` without one. `""` means "look again": the subscriber reconnected
   * (messages may have been missed) or closed. Rejects with `signal.reason` when `signal`
   * aborts.
   */
  next(ms: number, signal: AbortSignal): Promise<string | undefined>;
  /** Stops listening; the channel is unsubscribed when its last waiter leaves. */
  close(): void;
}

/** How long a channel stays subscribed after its last waiter left. */
const LINGER_MS = 2_000;

/** Announcements kept for a waiter that is not listening right now (the oldest go first). */
const MAX_PENDING = 16;

interface Waiter {
  /** Announcements not yet taken by `next()`, oldest first. */
  readonly pending: string[];
  wake: ((message: string) => void) | undefined;
}

/**
 * The one subscriber connection of a backend, shared by every waiter of every session:
 * channels are subscribed while at least one waiter listens, and each release message wakes
 * the waiters of that lock with its text. After a reconnect every waiter is woken with `""`,
 * since messages may have been missed while the connection was down.
 */
export class ReleaseListener {
  readonly #create: () => RedisClient;
  readonly #timeoutMs: number;
  readonly #where: string;
  #subscriber: RedisClient | undefined;
  readonly #channels = new Map<string, Set<Waiter>>();
  /** SUBSCRIBEs sent and not yet confirmed, by channel. */
  readonly #pending = new Map<string, Promise<void>>();
  /**
   * Channels whose last waiter left, by when it left. They stay subscribed a while
   * ({@link LINGER_MS}): a waiter that comes back meanwhile (a session that waits for the same
   * lock again and again) needs no SUBSCRIBE, and none is on the path of the grant that ended
   * the wait. One unref'd timer unsubscribes them in batches.
   */
  readonly #leaving = new Map<string, number>();
  #sweep: ReturnType<typeof setTimeout> | undefined;
  #closed = false;

  /**
   * `create` makes the subscriber connection on first use (e.g. `client.duplicate()`);
   * `where` names the store in messages (`redis 127.0.0.1:6379`).
   */
  constructor(create: () => RedisClient, timeoutMs: number, where = "redis") {
    this.#create = create;
    this.#timeoutMs = timeoutMs;
    this.#where = where;
  }

  /** Nobody listens and no channel lingers (then {@link listening} is always `undefined`). */
  get idle(): boolean {
    return this.#channels.size === 0 && this.#leaving.size === 0;
  }

  /**
   * A subscription to `channel` if it is subscribed and confirmed already (other waiters, or
   * a recent one lingering), at no cost; otherwise `undefined` (use {@link subscribe}).
   */
  listening(channel: string): ReleaseSubscription | undefined {
    if (this.idle || this.#closed || this.#pending.has(channel)) return undefined;
    let waiters = this.#channels.get(channel);
    if (waiters === undefined) {
      if (!this.#leaving.delete(channel)) return undefined;
      waiters = new Set();
      this.#channels.set(channel, waiters);
    }
    return this.#join(channel, waiters);
  }

  #join(channel: string, waiters: Set<Waiter>): ReleaseSubscription {
    const waiter: Waiter = { pending: [], wake: undefined };
    waiters.add(waiter);
    return {
      next: (ms, abort) => this.#next(waiter, ms, abort),
      close: () => this.#leave(channel, waiter),
    };
  }

  /** Subscribes to `channel`; resolves once the server confirmed the subscription. */
  async subscribe(channel: string, signal: AbortSignal): Promise<ReleaseSubscription> {
    if (this.#closed) throw new BackendUnavailableError(`${this.#where}: the backend is closed`);
    const subscriber = this.#connection();
    let waiters = this.#channels.get(channel);
    // A channel about to be unsubscribed is still subscribed: keep it.
    const first = waiters === undefined && !this.#leaving.delete(channel);
    if (waiters === undefined) {
      waiters = new Set();
      this.#channels.set(channel, waiters);
    }
    const subscription = this.#join(channel, waiters);
    if (!first && this.#pending.get(channel) === undefined) return subscription;
    try {
      let confirming = this.#pending.get(channel);
      if (confirming === undefined) {
        confirming = subscriber.subscribe(channel).then(() => undefined);
        this.#pending.set(channel, confirming);
        const mine = confirming;
        const forget = () => {
          if (this.#pending.get(channel) === mine) this.#pending.delete(channel);
        };
        mine.then(forget, forget);
      }
      await boundedCall(confirming, {
        timeoutMs: this.#timeoutMs,
        what: `${this.#where}: subscribing to ${channel}`,
        signal,
        mapError: (e) => toBatonError(e, `${this.#where}: subscribing to ${channel} failed`),
      });
      return subscription;
    } catch (error) {
      // A SUBSCRIBE that never answered must not block every later waiter of this channel.
      if (!signal.aborted) this.#pending.delete(channel);
      subscription.close();
      throw signal.aborted
        ? signal.reason
        : toBatonError(error, `${this.#where}: subscribing to ${channel} failed`);
    }
  }

  /** Closes the subscriber connection; pending waits keep their own timers. */
  close(): void {
    this.#closed = true;
    const subscriber = this.#subscriber;
    this.#subscriber = undefined;
    for (const waiters of this.#channels.values()) for (const w of waiters) this.#wakeOne(w, "");
    this.#channels.clear();
    this.#leaving.clear();
    if (this.#sweep !== undefined) clearTimeout(this.#sweep);
    this.#sweep = undefined;
    subscriber?.disconnect();
  }

  #connection(): RedisClient {
    if (this.#subscriber !== undefined) return this.#subscriber;
    const subscriber = this.#create();
    subscriber.on("message", (channel: string, message: string) => {
      const waiters = this.#channels.get(channel);
      if (waiters !== undefined) for (const w of waiters) this.#wakeOne(w, message);
    });
    // Messages may have been missed while disconnected: let every waiter look again.
    subscriber.on("ready", () => {
      for (const waiters of this.#channels.values()) for (const w of waiters) this.#wakeOne(w, "");
    });
    // Connection errors are retried by ioredis; waiters fall back to the holder's PTTL.
    subscriber.on("error", () => undefined);
    this.#subscriber = subscriber;
    return subscriber;
  }

  #wakeOne(waiter: Waiter, message: string): void {
    const wake = waiter.wake;
    if (wake !== undefined) {
      wake(message);
      return;
    }
    if (waiter.pending.length >= MAX_PENDING) waiter.pending.shift();
    waiter.pending.push(message);
  }

  #next(waiter: Waiter, ms: number, signal: AbortSignal): Promise<string | undefined> {
    return new Promise<string | undefined>((resolve, reject) => {
      if (signal.aborted) {
        reject(signal.reason);
        return;
      }
      if (waiter.pending.length > 0) {
        resolve(waiter.pending.shift());
        return;
      }
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
        waiter.wake = undefined;
      };
      const onAbort = () => {
        done();
        reject(signal.reason);
      };
      const timer = setTimeout(
        () => {
          done();
          resolve(undefined);
        },
        Math.max(0, ms),
      );
      waiter.wake = (message) => {
        done();
        resolve(message);
      };
      signal.addEventListener("abort", onAbort, { once: true });
    });
  }

  #leave(channel: string, waiter: Waiter): void {
    const waiters = this.#channels.get(channel);
    if (waiters === undefined || !waiters.delete(waiter)) return;
    if (waiters.size > 0) return;
    this.#channels.delete(channel);
    this.#leaving.set(channel, performance.now());
    this.#scheduleSweep();
  }

  #scheduleSweep(): void {
    if (this.#sweep !== undefined || this.#closed) return;
    this.#sweep = setTimeout(() => {
      this.#sweep = undefined;
      const now = performance.now();
      const channels: string[] = [];
      for (const [channel, leftAt] of this.#leaving) {
        if (now - leftAt < LINGER_MS) continue;
        this.#leaving.delete(channel);
        channels.push(channel);
      }
      if (channels.length > 0) this.#subscriber?.unsubscribe(...channels).catch(() => undefined);
      if (this.#leaving.size > 0) this.#scheduleSweep();
    }, LINGER_MS);
    this.#sweep.unref();
  }
}
