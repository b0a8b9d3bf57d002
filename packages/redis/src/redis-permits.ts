import type { BackendPermitOptions, Grant, PermitHolder, RevokedGrant } from "@baton/core";
import { boundedCall, linkSignals, PermitLimitError } from "@baton/core";
import {
  ACQUIRE_PERMITS,
  DOWNGRADE_PERMITS,
  PERMIT_HOLDERS,
  RELEASE_PERMITS,
  RENEW_WITH_PERMITS,
} from "./permit-scripts.js";
import type { RedisClient } from "./redis-client.js";
import {
  decodeDowngradeReply,
  decodePermitAcquireReply,
  decodePermitHolders,
  decodeReleasedCount,
  decodeRenewals,
  decodeTurnMessage,
  type KeyRenewal,
  MODE_CODES,
  type PermitAcquireReply,
  payloadTail,
  waitId,
} from "./redis-codec.js";
import { toBatonError } from "./redis-errors.js";
import { type PermitKeys, permitKeys } from "./redis-keys.js";
import type { ReleaseListener, ReleaseSubscription } from "./release-listener.js";

/** What the permits of a session need from it. */
export interface RedisPermitContext {
  readonly client: RedisClient;
  /** The store in messages, e.g. `redis 127.0.0.1:6379`. */
  readonly where: string;
  readonly cluster: boolean;
  readonly keyPrefix: string;
  readonly commandTimeoutMs: number;
  readonly listener: ReleaseListener;
  readonly sessionId: string;
  readonly ownerId: string;
  readonly ttlMs: number;
  /** Bound of an acquire try (see the session's lease call timeout). */
  readonly leaseCallTimeoutMs: number;
  /** Whether the session is closed; `closedError()` is what a wait then rejects with. */
  readonly closed: () => boolean;
  readonly closedError: () => Error;
}

/**
 * The private part of a permit grant: the session and the entry it is in the key's queue. A
 * downgrade gives the read a new handle on the same entry, so the write's grant no longer
 * releases it.
 */
export class PermitHandle {
  readonly sessionId: string;
  /** The entry id, `<session id>.<n>`. */
  readonly entry: string;

  constructor(sessionId: string, entry: string) {
    this.sessionId = sessionId;
    this.entry = entry;
  }
}

/**
 * What this session has on one permit key: its grants (by entry id), its acquires in progress
 * and releases in flight (`active`), and entries whose release failed (`leftovers`, released
 * again with the next renewal). The key is renewed while it has grants or acquires, and
 * forgotten when it has nothing.
 */
interface PermitKeyState {
  readonly keys: PermitKeys;
  readonly grants: Map<string, Grant>;
  active: number;
  readonly leftovers: Set<string>;
}

/** One acquire's entry: its id and number, and whether a try that may queue it was sent. */
interface PermitRequestState {
  readonly name: string;
  readonly state: PermitKeyState;
  readonly entry: string;
  readonly number: string;
  readonly args: readonly (string | number)[];
  readonly limit: number;
  joined: boolean;
  lastTry: Promise<unknown> | undefined;
}

/** One permit key of a renewal: what was held when it was sent. */
export interface PermitRenewal {
  readonly name: string;
  readonly state: PermitKeyState;
  readonly sessionsKey: string;
  readonly held: readonly Grant[];
}

/**
 * The semaphores and read-write locks of one Redis session (see permit-scripts.ts for what
 * the store holds). Every permit key this session has entries on is renewed by raising the
 * session's lease deadline in the key's sessions set: one command per key in the session's
 * one renewal call, however many permits it holds there. Waits sleep on the session's turn
 * channel of the key (a release, downgrade or sweep that admits them tells them there, with
 * the token) or until the earliest lease deadline of the key, when a dead session's entries
 * may be dropped; then they look again.
 */
export class RedisPermits {
  readonly #ctx: RedisPermitContext;
  readonly #states = new Map<string, PermitKeyState>();
  /** Numbers this session's permit entries. */
  #count = 0;
  /** Waits in progress: a closing session aborts them. */
  readonly #waits = new Set<{ abort(reason: unknown): void }>();
  /** A permit key where an acquire found this session's grants gone from the store. */
  #lost: string | undefined;

  constructor(ctx: RedisPermitContext) {
    this.#ctx = ctx;
  }

  /**
   * The name of a permit key whose grants of this session an acquire found gone from the
   * store (see {@link lostAfter}), if any.
   */
  get lost(): string | undefined {
    return this.#lost;
  }

  /** Whether this session has anything on any permit key. */
  get empty(): boolean {
    return this.#states.size === 0;
  }

  #stateOf(name: string): PermitKeyState {
    let state = this.#states.get(name);
    if (state === undefined) {
      state = {
        keys: permitKeys(this.#ctx.keyPrefix, name),
        grants: new Map(),
        active: 0,
        leftovers: new Set(),
      };
      this.#states.set(name, state);
    }
    return state;
  }

  /** Forgets `name` once the session has nothing there (unless a newer state replaced it). */
  #forgetIfIdle(name: string, state: PermitKeyState): void {
    if (state.grants.size > 0 || state.active > 0 || state.leftovers.size > 0) return;
    if (this.#states.get(name) === state) this.#states.delete(name);
  }

  async acquire(name: string, options: BackendPermitOptions): Promise<Grant | null> {
    const ctx = this.#ctx;
    const state = this.#stateOf(name);
    state.active++;
    const n = ++this.#count;
    const entry = waitId(ctx.sessionId, n);
    const request: PermitRequestState = {
      name,
      state,
      entry,
      number: String(n),
      args: [
        entry,
        ctx.sessionId,
        ctx.ttlMs,
        options.limit,
        options.permits,
        MODE_CODES[options.mode],
        payloadTail(ctx.ownerId, options.value),
      ],
      limit: options.limit,
      joined: false,
      lastTry: undefined,
    };
    const channel = state.keys.turn(ctx.sessionId);
    const listener = ctx.listener;
    // As for locks: a waiter whose turn channel is still subscribed may queue on its first try;
    // otherwise the first try is the plain one, and the one after subscribing queues.
    let subscription = options.wait && !listener.idle ? listener.listening(channel) : undefined;
    let granted = false;
    let link: ReturnType<typeof linkSignals> | undefined;
    try {
      // The uncontended path: this one script call, leaving the signal alone.
      let got = await this.#try(request, subscription !== undefined, undefined);
      if (got.kind === "granted" || !options.wait) {
        granted = got.kind === "granted";
        return got.kind === "granted" ? this.#hold(request, got.token) : null;
      }
      const { signal } = options;
      if (signal.aborted) throw signal.reason;
      link = linkSignals([signal]);
      this.#waits.add(link);
      const abort = link.signal;
      if (subscription === undefined) {
        subscription = await listener.subscribe(channel, abort);
        got = await this.#try(request, true, abort);
      }
      while (got.kind !== "granted") {
        const ms = got.nextDeadlineMs >= 0 ? got.nextDeadlineMs + 1 : ctx.ttlMs;
        const token = await this.#awaitTurn(subscription, ms, request.number, abort);
        got =
          token === undefined
            ? await this.#try(request, true, abort)
            : { kind: "granted", token, lost: false };
      }
      granted = true;
      return this.#hold(request, got.token);
    } finally {
      if (!granted && request.joined) this.#leave(request);
      state.active--;
      this.#forgetIfIdle(name, state);
      subscription?.close();
      if (link !== undefined) {
        link.dispose();
        this.#waits.delete(link);
      }
    }
  }

  /**
   * One acquire script call. `join`: queue the entry when it is not granted. Throws the
   * `PermitLimitError` when the store holds another limit.
   */
  async #try(
    request: PermitRequestState,
    join: boolean,
    signal: AbortSignal | undefined,
  ): Promise<Exclude<PermitAcquireReply, { kind: "other-limit" }>> {
    const ctx = this.#ctx;
    const { name, state } = request;
    // Hot path: see docs/hot-path.md, "Redis".
    const call = ACQUIRE_PERMITS.run(ctx.client, state.keys.all, [
      ...request.args,
      join ? "1" : "",
      state.grants.size > 0 ? "1" : "",
    ]);
    // Sent: from now on the entry may be queued, whatever becomes of the reply, so the
    // acquire's end takes it out unless granted (after this try settled; see #leave).
    if (join) request.joined = true;
    request.lastTry = call;
    const reply = decodePermitAcquireReply(
      await boundedCall(call, {
        timeoutMs: ctx.leaseCallTimeoutMs,
        what: `${ctx.where}: permit acquire`,
        name,
        signal,
        mapError: (e) => toBatonError(e, `${ctx.where}: permit acquire of "${name}" failed`),
        // Given up in flight: the server may have granted the entry. Take it out once the
        // call settled (a script the server did not know yet is sent again meanwhile).
        onAbandoned: () => {
          if (!request.joined) this.#leave(request); // else the acquire's end takes it out
        },
      }),
    );
    // Grants held here are gone from the store: the next renewal ends the session.
    if (reply.lost) this.#lost ??= name;
    if (reply.kind === "other-limit") throw new PermitLimitError(name, reply.stored, request.limit);
    if (signal?.aborted === true || ctx.closed()) {
      // Granted, but the caller left (or the session closed) at the same moment.
      if (reply.kind === "granted" && !request.joined) this.#leave(request);
      throw signal?.aborted === true ? signal.reason : ctx.closedError();
    }
    return reply;
  }

  /**
   * Sleeps until the store granted this wait (resolves the token, from the turn message) or
   * it should look again (`undefined`): after `ms`, the earliest lease deadline of the key,
   * or at once after a reconnect.
   */
  async #awaitTurn(
    subscription: ReleaseSubscription,
    ms: number,
    number: string,
    abort: AbortSignal,
  ): Promise<bigint | undefined> {
    const until = performance.now() + ms;
    for (;;) {
      const message = await subscription.next(until - performance.now(), abort);
      if (message === undefined) return undefined;
      const turn = decodeTurnMessage(message);
      if (turn.kind !== "granted") return undefined;
      // Another wait of this session on this key.
      if (turn.wait === number) return turn.token;
    }
  }

  /**
   * Takes an entry out of its key's queue, granted or not, and grants the waiters that then
   * fit, after the acquire's last try settled. Best effort: an entry it could not take out is
   * released again with the next renewal (until then the session's renewal keeps it).
   */
  #leave(request: PermitRequestState): void {
    const { state, entry } = request;
    state.active++;
    const leave = () => {
      RELEASE_PERMITS.run(this.#ctx.client, state.keys.all, [this.#ctx.sessionId, entry]).then(
        () => this.#settled(request.name, state),
        () => {
          state.leftovers.add(entry);
          this.#settled(request.name, state);
        },
      );
    };
    const last = request.lastTry;
    if (last === undefined) leave();
    else last.then(leave, leave);
  }

  #settled(name: string, state: PermitKeyState): void {
    state.active--;
    this.#forgetIfIdle(name, state);
  }

  #hold(request: PermitRequestState, token: bigint): Grant {
    const ctx = this.#ctx;
    const grant: Grant = {
      key: request.name,
      ownerId: ctx.ownerId,
      token,
      handle: new PermitHandle(ctx.sessionId, request.entry),
    };
    request.state.grants.set(request.entry, grant);
    return grant;
  }

  /** Releases a permit grant; `false` when it was no longer this session's. */
  async release(grant: Grant, handle: PermitHandle): Promise<boolean> {
    const ctx = this.#ctx;
    if (handle.sessionId !== ctx.sessionId) return false;
    const name = grant.key;
    const known = this.#states.get(name);
    const current = known?.grants.get(handle.entry);
    // A write downgraded since: its entry is the read's now.
    if (current !== undefined && current.handle !== handle) return false;
    const state = known ?? this.#stateOf(name);
    // Forget it first: once release settles, even by throwing, it is never renewed again.
    state.grants.delete(handle.entry);
    state.active++;
    try {
      // Hot path: see docs/hot-path.md, "Redis".
      const reply = await boundedCall(
        RELEASE_PERMITS.run(ctx.client, state.keys.all, [ctx.sessionId, handle.entry]),
        {
          timeoutMs: ctx.commandTimeoutMs,
          what: `${this.#ctx.where}: permit release`,
          name,
          mapError: (e) =>
            toBatonError(e, `${this.#ctx.where}: permit release of "${name}" failed`),
        },
      );
      return decodeReleasedCount(reply) === 1;
    } catch (error) {
      state.leftovers.add(handle.entry);
      throw error;
    } finally {
      this.#settled(name, state);
    }
  }

  /** Turns a write grant into a read grant with the same token; `null` if no longer held. */
  async downgrade(grant: Grant, handle: PermitHandle): Promise<Grant | null> {
    const ctx = this.#ctx;
    const name = grant.key;
    const state = this.#states.get(name);
    if (handle.sessionId !== ctx.sessionId || state?.grants.get(handle.entry) !== grant) {
      return null;
    }
    const reply = await boundedCall(
      DOWNGRADE_PERMITS.run(ctx.client, state.keys.all, [ctx.sessionId, handle.entry]),
      {
        timeoutMs: ctx.commandTimeoutMs,
        what: `${this.#ctx.where}: downgrade`,
        name,
        mapError: (e) => toBatonError(e, `${this.#ctx.where}: downgrade of "${name}" failed`),
      },
    );
    const token = decodeDowngradeReply(reply);
    if (state.grants.get(handle.entry) !== grant) return null; // released meanwhile
    if (token === null) {
      state.grants.delete(handle.entry);
      this.#forgetIfIdle(name, state);
      return null;
    }
    const read: Grant = {
      key: name,
      ownerId: ctx.ownerId,
      token,
      handle: new PermitHandle(ctx.sessionId, handle.entry),
    };
    state.grants.set(handle.entry, read);
    return read;
  }

  /** The granted entries of `name`, in grant order. */
  async holders(name: string): Promise<PermitHolder[]> {
    const ctx = this.#ctx;
    const keys = permitKeys(ctx.keyPrefix, name);
    const reply = await boundedCall(PERMIT_HOLDERS.run(ctx.client, keys.all, []), {
      timeoutMs: ctx.commandTimeoutMs,
      what: `${this.#ctx.where}: permit holders of "${name}"`,
      mapError: (e) => toBatonError(e, `${this.#ctx.where}: permit holders of "${name}" failed`),
    });
    return decodePermitHolders(reply);
  }

  /** The permit keys a renewal sent now covers: those with grants or acquires in progress. */
  renewals(): PermitRenewal[] {
    const out: PermitRenewal[] = [];
    for (const [name, state] of this.#states) {
      if (state.grants.size === 0 && state.active === 0) continue;
      out.push({ name, state, sessionsKey: state.keys.sessions, held: [...state.grants.values()] });
    }
    return out;
  }

  /**
   * Renews `items` on a Cluster: one call per permit key (each lives in its own slot), sent
   * together. Resolves, per item, whether it was renewed.
   */
  async renewEach(items: readonly PermitRenewal[]): Promise<KeyRenewal[]> {
    const { client, ttlMs, sessionId } = this.#ctx;
    const out = await Promise.all(
      items.map((i) => RENEW_WITH_PERMITS.run(client, [i.sessionsKey], [ttlMs, sessionId])),
    );
    return out.map((r) => decodeRenewals(r)[0] as KeyRenewal);
  }

  /**
   * The grants of this session an operator force-released, as a renewal of `items` reported
   * them (`renewed`, per item): each is forgotten here (never renewed nor released again) and
   * returned with its reason, once.
   */
  revokedAfter(items: readonly PermitRenewal[], renewed: readonly KeyRenewal[]): RevokedGrant[] {
    const out: RevokedGrant[] = [];
    for (const [i, item] of items.entries()) {
      const revoked = renewed[i]?.revoked;
      if (revoked === undefined) continue;
      const state = this.#states.get(item.name);
      if (state !== item.state) continue;
      for (const [entry, reason] of revoked) {
        const grant = state.grants.get(entry);
        if (grant === undefined) continue;
        state.grants.delete(entry);
        out.push({ space: "permit", key: item.name, token: grant.token, reason });
      }
      // An acquire that found this session's entries gone there saw the revocation: the
      // grants still held are judged by this renewal's answer for the key (see lostAfter).
      if (this.#lost === item.name) this.#lost = undefined;
      this.#forgetIfIdle(item.name, state);
    }
    return out;
  }

  /**
   * The name of a permit key whose entries of this session are gone from the store while it
   * still holds grants there that it held when the renewal was sent, if any.
   */
  lostAfter(items: readonly PermitRenewal[], renewed: readonly KeyRenewal[]): string | undefined {
    for (const [i, item] of items.entries()) {
      if (renewed[i]?.renewed === true) continue;
      const state = this.#states.get(item.name);
      if (state !== item.state) continue;
      if (item.held.some((g) => state.grants.get((g.handle as PermitHandle).entry) === g)) {
        return item.name;
      }
    }
    return undefined;
  }

  /**
   * Releases again, best effort and without waiting, the entries whose release failed
   * (sent with the renewal, so in the same round trip).
   */
  retryLeftovers(): void {
    const ctx = this.#ctx;
    for (const [name, state] of this.#states) {
      if (state.leftovers.size === 0) continue;
      const entries = [...state.leftovers];
      state.active++;
      RELEASE_PERMITS.run(ctx.client, state.keys.all, [ctx.sessionId, ...entries]).then(
        () => {
          for (const e of entries) state.leftovers.delete(e);
          this.#settled(name, state);
        },
        () => this.#settled(name, state),
      );
    }
  }

  /**
   * A closing session: aborts its waits and releases every entry it has on every permit key
   * (one call per key, sent together).
   */
  close(reason: unknown): Promise<unknown> | undefined {
    for (const wait of this.#waits) wait.abort(reason);
    this.#waits.clear();
    const states = [...this.#states.values()];
    this.#states.clear();
    if (states.length === 0) return undefined;
    const ctx = this.#ctx;
    return Promise.all(
      states.map((s) => RELEASE_PERMITS.run(ctx.client, s.keys.all, [ctx.sessionId])),
    );
  }
}
