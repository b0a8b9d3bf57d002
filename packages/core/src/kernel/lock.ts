import { ConfigError, LockLostError, type LockLostReason } from "../contract/errors.js";
import type { Guarantees } from "../contract/guarantees.js";
import type { AbortScope } from "../helpers/abort-scope.js";

/** @internal What the coordinator gives a {@link Lock}. */
export interface LockInit {
  readonly name: string;
  readonly token: bigint;
  /** What the backend declares of its tokens; with `none` the lock has no token to give. */
  readonly fencing: Guarantees["fencing"] | undefined;
  readonly value: string | undefined;
  /** Ends (with a `LockLostError` reason) when the lock is lost or released. */
  readonly ended: AbortScope;
  /** Owner-checked release through the backend; true when it was still ours. */
  readonly release: () => Promise<boolean>;
  /** Monotonic deadline of the lock right now. */
  readonly deadline: () => number;
  /** The TTL the store granted the lock's session. */
  readonly ttlMs: number;
  /** Renews now unless `ms` are already left; resolves with the ms left. */
  readonly extend: (ms: number | undefined) => Promise<number>;
  /** Checks the deadline now (unless ended), aborting the signal at once if it has passed. */
  readonly check: () => void;
  readonly now: () => number;
}

/** What `JSON.stringify` writes for a {@link Lock}. */
export interface LockJson {
  readonly name: string;
  /**
   * The fencing token in decimal (`BigInt(json.token)` reads it back); absent when the
   * backend's grants carry no ordered token (fencing `none`).
   */
  readonly token?: string;
  readonly value?: string;
  /** Whether the lock was still held when it was written. */
  readonly held: boolean;
}

/** Reads a lock's grant token whatever the backend declares (see {@link grantToken}). */
let grantTokenOf: (lock: Lock) => bigint;

/**
 * @internal The token of `lock`'s grant, also on a backend whose fencing is `none` (where it
 * orders nothing and `lock.token` throws): for core's own records (events, election terms).
 */
export function grantToken(lock: Lock): bigint {
  return grantTokenOf(lock);
}

/**
 * A held lock. Use `signal` to stop work the moment the lock can no longer be trusted, pass
 * `token` to a fence with every write, and `release()` (or `await using`) when done.
 *
 * @example
 * await using lock = await coordinator.acquire("invoices");
 * await billEveryone({ token: lock.token, signal: lock.signal });
 */
export class Lock implements AsyncDisposable {
  /** The lock name. */
  readonly name: string;
  /** The value published with this grant, if any. */
  readonly value: string | undefined;
  readonly #init: LockInit;
  #releasing: Promise<boolean> | undefined;

  /** @internal Built by the coordinator. */
  constructor(init: LockInit) {
    this.name = init.name;
    this.value = init.value;
    this.#init = init;
  }

  static {
    grantTokenOf = (lock) => lock.#init.token;
  }

  /**
   * Fencing token: strictly greater for every later grant of this name (per the backend's
   * guarantees). Pass it to a fence with every write.
   *
   * A backend whose guarantees declare fencing `none` (Redlock) has no token: its grants carry
   * no order, and a fence fed one would accept every stale write. Reading `token` on such a
   * lock throws a `ConfigError` (field `token`) instead. Locks that only save duplicate work
   * (efficiency mode) never need to read it.
   */
  get token(): bigint {
    if (this.#init.fencing === "none") {
      throw new ConfigError(
        "token",
        `lock "${this.name}" has no fencing token: its backend declares fencing "none", so its grants carry no order a fence could check. Use such locks without a token, or a backend with ordered tokens (etcd, ZooKeeper, PostgreSQL) where writes must be fenced`,
      );
    }
    return this.#init.token;
  }

  /**
   * Aborted, with a `LockLostError` reason, the moment the lock can no longer be trusted
   * (local deadline passed, session lost, key lost), and when `release()` is called (reason
   * `released`: before the release is sent, so no other holder starts while it is not aborted).
   * Its `aborted`, `reason` and `throwIfAborted()` check the local deadline before they
   * answer, like {@link Lock.held}: code that resumes after a pause sees the loss at its first
   * check, before the deadline timer has run. It is a real `AbortSignal`: pass it to `fetch`,
   * database drivers and anything else that takes one ("abort" listeners run when the loss is
   * noticed: at such a check, or when the deadline timer runs).
   * Built on first access; asked for after the end, it is already aborted with the reason.
   */
  get signal(): AbortSignal {
    return this.#init.ended.signal;
  }

  /**
   * True until the lock is lost or released. Reading it checks the local deadline on the spot,
   * so code that resumes after a pause (GC, SIGSTOP) sees `false` even before the deadline
   * timer has had a chance to run, and the signal is aborted right then.
   */
  get held(): boolean {
    this.#init.check();
    return !this.#init.ended.aborted;
  }

  /**
   * Throws the `LockLostError` if the lock is lost or released, checking the local deadline
   * on the spot (see {@link Lock.held}). Call it right before a write. It narrows the window;
   * only a fence closes it (a pause can still strike between this check and the write).
   */
  throwIfLost(): void {
    if (!this.held) throw this.#init.ended.reason;
  }

  /** Why the lock ended, once it has (checking the local deadline first, like `held`). */
  get lostReason(): LockLostReason | undefined {
    this.#init.check();
    const reason: unknown = this.#init.ended.reason;
    return reason instanceof LockLostError ? reason.reason : undefined;
  }

  /**
   * The lease length in ms: the TTL the store granted this lock's session (the `ttlMs` the
   * lock was acquired with, or the coordinator's; ZooKeeper may grant another).
   */
  get ttlMs(): number {
    return this.#init.ttlMs;
  }

  /**
   * Renews the lock's lease now, for when a caller needs more time than is left: before a
   * step that must not be interrupted, or after a long stretch of synchronous work kept the
   * keepalive from running. Without `ms` it always renews; with `ms` only when fewer than
   * `ms` are left. Resolves with the milliseconds now left before the local deadline: after
   * a renewal, the TTL less the drift allowance and the time the store took to confirm.
   *
   * A renewal restarts the lease at its TTL, so a lock is extended by at most its TTL at a
   * time, the same on every store: the store's lease is per session (a Redis key's expiry
   * renewed with the session's others, an etcd lease, a ZooKeeper session, a PostgreSQL
   * connection's idle timeout), and the renewal is the session's, one request for every lock
   * on it. For a longer lease, acquire with a larger `ttlMs`.
   *
   * Rejects with `ConfigError` when `ms` is not an integer from 1 to the TTL less the drift
   * allowance, with the `LockLostError` when the lock is lost or released (before or during
   * the renewal), and with `BackendUnavailableError` when the store did not confirm in time
   * (the lock stays held until its deadline and the keepalive keeps trying).
   *
   * @example
   * await lock.extend(30_000); // at least 30 s left, or it throws
   * await chargeCard({ token: lock.token, signal: lock.signal });
   */
  extend(ms?: number): Promise<number> {
    return this.#init.extend(ms);
  }

  /** Milliseconds left before the local deadline (0 once lost or released). */
  remainingMs(): number {
    if (!this.held) return 0;
    return Math.max(0, this.#init.deadline() - this.#init.now());
  }

  /**
   * Releases the lock if it is still ours (owner-checked) and resolves whether it was.
   * Idempotent: every call returns the same promise. A release that fails on the way with an
   * error `isTransient` calls transient (a connection reset or refused) is sent once more;
   * when the first one had reached the store before its connection failed, the second finds
   * the lock already freed and resolves `false`. If the store cannot be reached (both
   * attempts failed, or no answer within one TTL) it rejects with `BackendUnavailableError`;
   * the lock is no longer renewed and expires by itself within one TTL.
   */
  release(): Promise<boolean> {
    this.#releasing ??= this.#init.release();
    return this.#releasing;
  }

  /**
   * What `JSON.stringify(lock)` writes: the name, the token as a decimal string (JSON has no
   * bigint; no token on a backend without ordered tokens), the value when there is one, and
   * whether the lock is still held (checked on the spot, like {@link Lock.held}). Log lines
   * and error reports can include a lock as is; it never throws.
   */
  toJSON(): LockJson {
    let token: string | undefined;
    try {
      token = this.token.toString();
    } catch {
      // A backend whose grants carry no ordered token has none to write.
    }
    return {
      name: this.name,
      ...(token === undefined ? {} : { token }),
      ...(this.value === undefined ? {} : { value: this.value }),
      held: this.held,
    };
  }

  /** Releases on scope exit (`await using`). */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }
}
