import { randomBytes } from "node:crypto";
import type {
  BackendAcquireOptions,
  BackendPermitOptions,
  BackendSession,
  ForceReleaseOptions,
  Grant,
  Holder,
  KeepAliveResult,
  KeyPage,
  KeyState,
  ListKeysOptions,
  PermitHolder,
  RevokedGrant,
  StoredRecord,
} from "@baton/core";
import { boundedCall, linkSignals, NameTable, SessionLostError } from "@baton/core";
import { RENEW_WITH_PERMITS } from "./permit-scripts.js";
import type { RedisClient } from "./redis-client.js";
import {
  decodeAcquireReply,
  decodeHolderReply,
  decodePayload,
  decodeReleasedOne,
  decodeRenewals,
  decodeTurnMessage,
  grantPrefix,
  type KeyRenewal,
  lineEntry,
  ownerPrefix,
  payloadTail,
  waitId,
} from "./redis-codec.js";
import { toBatonError } from "./redis-errors.js";
import { RedisInspection } from "./redis-inspection.js";
import { type LockKeys, lockKeys } from "./redis-keys.js";
import { PermitHandle, type PermitRenewal, RedisPermits } from "./redis-permits.js";
import { RedisRecords } from "./redis-records.js";
import type { ReleaseListener, ReleaseSubscription } from "./release-listener.js";
import { ACQUIRE, READ_HOLDER, RELEASE, RENEW } from "./scripts.js";

/** What a {@link RedisSession} needs from its backend. */
export interface RedisSessionContext {
  readonly client: RedisClient;
  /** The store in messages: `redis <host:port>` (the startup nodes of a Cluster); never credentials. */
  readonly where: string;
  readonly cluster: boolean;
  readonly keyPrefix: string;
  readonly commandTimeoutMs: number;
  readonly listener: ReleaseListener;
  readonly onClose: (session: RedisSession) => void;
}

/**
 * One wait for a lock: its id `<session id>.<n>` (unique per session), the grant prefix of any
 * grant made to it (`<id>:`), its entry in the lock's line, and whether a failed try of this
 * wait put it in the line.
 */
interface Wait {
  readonly id: string;
  /** Its number `<n>` within the session, as turn messages name it. */
  readonly number: string;
  readonly prefix: string;
  readonly entry: string;
  /** Its lock key renewed while it waits (see #startWait). */
  readonly pending: OwnedKey;
  joined: boolean;
  /** Its last try, settled or not (leaving the line comes after it). */
  lastTry: Promise<unknown> | undefined;
}

/** A lock's keys and the owner prefix of a grant on it: what renewals and releases check. */
interface OwnedKey {
  readonly keys: LockKeys;
  readonly prefix: string;
}

interface HeldKey extends OwnedKey {
  readonly grant: Grant;
}

/** What one acquire try answers: the grant, or the holder's remaining lease. */
type TryResult = { grant: Grant; pttl?: undefined } | { grant: null; pttl: number };

/** The private part of a Redis grant: what release needs to find exactly this grant. */
interface RedisGrantHandle {
  readonly sessionId: string;
  /** The grant's owner id in the payload: the session id, or the id of the wait it was handed to. */
  readonly grantOwner: string;
}

/**
 * A session on one Redis node (or Cluster): a random session id stored in every lock it
 * takes, one renewal script call per interval for everything it holds, and waits that sleep
 * on the shared release channel or the holder's PTTL.
 */
export class RedisSession implements BackendSession {
  readonly ownerId: string;
  readonly ttlMs: number;
  /** Random id of this session, the first part of every payload it writes. */
  readonly sessionId: string;
  /** `<sessionId>:`, the owner-check prefix of any grant of this session. */
  readonly #sessionPrefix: string;
  readonly #ctx: RedisSessionContext;
  readonly #held = new NameTable<HeldKey>();
  /**
   * Keys with an acquire in flight, or a wait (a release may hand the lock to it before it
   * hears): renewed by grant prefix without the token, which is not known yet.
   */
  readonly #pending = new NameTable<OwnedKey>();
  /** Waits started by this session: numbers them. */
  #waitCount = 0;
  /** Waits in progress: a closing session aborts them. */
  readonly #waits = new Set<{ abort(reason: unknown): void }>();
  readonly #records: RedisRecords;
  /** Its semaphores and read-write locks. */
  readonly #permits: RedisPermits;
  /** Listing, inspection and forced release for operators. */
  readonly #inspection: RedisInspection;
  #closed = false;
  /** What an acquire try and a release are called in their timeout errors. */
  readonly #acquireWhat: string;
  readonly #releaseWhat: string;

  constructor(ctx: RedisSessionContext, ownerId: string, ttlMs: number) {
    this.#ctx = ctx;
    this.ownerId = ownerId;
    this.ttlMs = ttlMs;
    this.sessionId = randomBytes(12).toString("hex");
    this.#sessionPrefix = ownerPrefix(this.sessionId);
    this.#acquireWhat = `${ctx.where}: acquire`;
    this.#releaseWhat = `${ctx.where}: release`;
    this.#records = new RedisRecords(ctx);
    this.#inspection = new RedisInspection({ ...ctx, ttlMs });
    this.#permits = new RedisPermits({
      client: ctx.client,
      where: ctx.where,
      cluster: ctx.cluster,
      keyPrefix: ctx.keyPrefix,
      commandTimeoutMs: ctx.commandTimeoutMs,
      listener: ctx.listener,
      sessionId: this.sessionId,
      ownerId,
      ttlMs,
      leaseCallTimeoutMs: this.#leaseCallTimeoutMs,
      closed: () => this.#closed,
      closedError: () => this.#closedError(),
    });
  }

  /**
   * Bound of a renewal or an acquire try: the command timeout, but at most half the TTL. A
   * renewal must fail before the local deadline comes near, and an acquire answered later
   * than that is not worth waiting for (its possible grant is deleted instead).
   */
  get #leaseCallTimeoutMs(): number {
    return Math.max(1, Math.min(this.#ctx.commandTimeoutMs, Math.floor(this.ttlMs / 2)));
  }

  async keepAlive(): Promise<KeepAliveResult | undefined> {
    this.#assertLive();
    const held = this.#held.entries();
    const items: OwnedKey[] = held.map(([, h]) => h);
    for (const p of this.#pending.values()) items.push(p);
    const permits = this.#permits.empty ? [] : this.#permits.renewals();
    if (items.length === 0 && permits.length === 0) return undefined;
    this.#permits.retryLeftovers();
    const renewed = await boundedCall(this.#renew(items, permits), {
      timeoutMs: this.#leaseCallTimeoutMs,
      what: `${this.#ctx.where}: renewal`,
      mapError: (e) => toBatonError(e, `${this.#ctx.where}: renewal failed`),
    });
    const permitRenewals = renewed.slice(items.length);
    // Grants an operator force-released end alone; the rest of the session lives on.
    const revoked: RevokedGrant[] = this.#permits.revokedAfter(permits, permitRenewals);
    const lostPermits = this.#permits.lost ?? this.#permits.lostAfter(permits, permitRenewals);
    if (lostPermits !== undefined) {
      // Permit keys have no way to be reported one grant at a time: the session ends.
      throw new SessionLostError(
        `the permits of "${lostPermits}" held by this redis session are gone from the store`,
      );
    }
    const lostKeys: string[] = [];
    held.forEach(([name, h], i) => {
      const renewal = renewed[i];
      if (renewal?.renewed === true) return;
      // Only the grant we renewed is lost: a release and re-acquire meanwhile is a new grant.
      if (this.#held.get(name) !== h) return;
      this.#held.delete(name);
      if (renewal?.reason === undefined) lostKeys.push(name);
      else revoked.push({ space: "lock", key: name, token: h.grant.token, reason: renewal.reason });
    });
    if (lostKeys.length === 0 && revoked.length === 0) return undefined;
    return {
      ...(lostKeys.length === 0 ? {} : { lostKeys }),
      ...(revoked.length === 0 ? {} : { revoked }),
    };
  }

  /**
   * Renews lock `items`, then permit keys `permits`: per key in order, whether it was renewed
   * (and what an operator force-released there). On one node, one script call for all of them.
   */
  async #renew(
    items: readonly OwnedKey[],
    permits: readonly PermitRenewal[],
  ): Promise<KeyRenewal[]> {
    const client = this.#ctx.client;
    if (!this.#ctx.cluster) {
      const locks = items.map((i) => i.keys.lock);
      const prefixes = items.map((i) => i.prefix);
      const out =
        permits.length === 0
          ? await RENEW.run(client, locks, [this.ttlMs, ...prefixes])
          : await RENEW_WITH_PERMITS.run(
              client,
              [...locks, ...permits.map((p) => p.sessionsKey)],
              [this.ttlMs, this.sessionId, ...prefixes],
            );
      return decodeRenewals(out);
    }
    // Keys of different locks live in different slots: one call per key, sent together.
    const [locks, permitKeys] = await Promise.all([
      Promise.all(items.map((i) => RENEW.run(client, [i.keys.lock], [this.ttlMs, i.prefix]))),
      permits.length === 0 ? [] : this.#permits.renewEach(permits),
    ]);
    return [...locks.map((r) => decodeRenewals(r)[0] as KeyRenewal), ...permitKeys];
  }

  acquire(name: string, options: BackendAcquireOptions): Promise<Grant | null> {
    let keys: LockKeys;
    let tail: string;
    let subscription: ReleaseSubscription | undefined;
    try {
      this.#assertLive();
      keys = lockKeys(this.#ctx.keyPrefix, name);
      tail = payloadTail(this.ownerId, options.value);
      // A waiter whose turn channel is still subscribed (it waited for this lock a moment ago)
      // listens from before its first try, so that try may join the line and it needs no
      // second one. Otherwise the first try is the plain one (the uncontended path), and the
      // try after subscribing joins the line.
      const listener = this.#ctx.listener;
      subscription =
        options.wait && !listener.idle ? listener.listening(keys.turn(this.sessionId)) : undefined;
    } catch (error) {
      return Promise.reject(error);
    }
    if (subscription !== undefined) {
      return this.#acquireWaiting(name, options, keys, tail, subscription, undefined);
    }
    // Hot path: see docs/hot-path.md, "Redis". The uncontended path is this one script call,
    // waiting or not, as one promise chain. It leaves the signal alone (see
    // BackendAcquireOptions.signal): reading it may build it.
    return this.#try(name, keys, tail, undefined, undefined).then((got) =>
      got.grant !== null || !options.wait
        ? got.grant
        : this.#acquireWaiting(name, options, keys, tail, undefined, got),
    );
  }

  /**
   * The rest of an acquire that waits: from its first try (`first`, when it was the plain one
   * and found the lock held), or, with `subscription` (its turn channel still subscribed),
   * from a first try that may join the line. A waiting try that fails joins the lock's line.
   */
  async #acquireWaiting(
    name: string,
    options: BackendAcquireOptions,
    keys: LockKeys,
    tail: string,
    listening: ReleaseSubscription | undefined,
    first: { grant: null; pttl: number } | undefined,
  ): Promise<Grant | null> {
    const listener = this.#ctx.listener;
    let subscription = listening;
    let wait = subscription === undefined ? undefined : this.#startWait(name, keys, tail);
    let granted = false;
    let link: ReturnType<typeof linkSignals> | undefined;
    try {
      let got = first ?? (await this.#try(name, keys, tail, undefined, wait));
      if (got.grant !== null || !options.wait) {
        granted = got.grant !== null;
        return got.grant;
      }
      const { signal } = options;
      if (signal.aborted) throw signal.reason;
      link = linkSignals([signal]);
      this.#waits.add(link);
      const abort = link.signal;
      if (subscription === undefined || wait === undefined) {
        // Subscribed before the next try, so a grant made after that try cannot go unheard.
        subscription = await listener.subscribe(keys.turn(this.sessionId), abort);
        wait = this.#startWait(name, keys, tail);
        got = await this.#try(name, keys, tail, abort, wait);
      }
      while (got.grant === null) {
        // At most its own TTL: a release tells the waiter behind the new holder only when
        // that holder's TTL is shorter than this (see RELEASE), so it never sleeps past a
        // frozen holder's lease.
        const ms = got.pttl >= 0 ? Math.min(got.pttl + 1, this.ttlMs) : this.ttlMs;
        const token = await this.#awaitTurn(subscription, ms, wait, abort);
        got =
          token === undefined
            ? await this.#try(name, keys, tail, abort, wait)
            : { grant: this.#hold(name, keys, wait.id, token) };
      }
      granted = true;
      return got.grant;
    } finally {
      if (wait !== undefined) {
        this.#unpend(name, wait.pending);
        if (!granted) this.#leaveLine(keys, wait);
      }
      subscription?.close();
      if (link !== undefined) {
        link.dispose();
        this.#waits.delete(link);
      }
    }
  }

  /**
   * A new wait for `name`. From now until it ends its lock key is renewed by the wait's prefix,
   * so a grant a release hands to it is covered before the waiter has heard of it.
   */
  #startWait(name: string, keys: LockKeys, tail: string): Wait {
    const number = ++this.#waitCount;
    const id = waitId(this.sessionId, number);
    const prefix = ownerPrefix(id);
    const wait: Wait = {
      id,
      number: String(number),
      prefix,
      entry: lineEntry(id, this.ttlMs, tail),
      pending: { keys, prefix },
      joined: false,
      lastTry: undefined,
    };
    this.#pending.set(name, wait.pending);
    return wait;
  }

  /**
   * Stops renewing `pending` for `name`, unless a newer acquire of the name replaced it (core
   * may start the next acquire of a name while an aborted one is still settling here).
   */
  #unpend(name: string, pending: OwnedKey): void {
    if (this.#pending.get(name) === pending) this.#pending.delete(name);
  }

  /**
   * Sleeps until this waiter should act: a release handed the lock to this wait (resolves the
   * token), the holder's lease could have run out (`ms`), or the waiter ahead was handed the
   * lock (then until its lease runs out, should that one have frozen). Resolves `undefined`
   * when it should try. The turn messages: see `decodeTurnMessage`.
   */
  async #awaitTurn(
    subscription: ReleaseSubscription,
    ms: number,
    wait: Wait,
    abort: AbortSignal,
  ): Promise<bigint | undefined> {
    let until = performance.now() + ms;
    for (;;) {
      const message = await subscription.next(until - performance.now(), abort);
      if (message === undefined) return undefined;
      const turn = decodeTurnMessage(message);
      if (turn.kind === "granted") {
        // Grants to an earlier wait of this session (it gave them back) are not this one's.
        if (turn.wait !== wait.number) continue;
        return turn.token;
      }
      // Anything else ("" after a reconnect: messages may be lost) means look now.
      if (turn.kind === "look") return undefined;
      until = performance.now() + turn.leaseMs + 1;
    }
  }

  /**
   * A wait that ends without taking the lock leaves the line, and gives back a grant a
   * release handed to it meanwhile (to the next in line): two commands in one round trip,
   * best effort (line entries expire, and so does a grant nobody renews).
   */
  #leaveLine(keys: LockKeys, wait: Wait): void {
    // Also after close(): the client is the backend's, and a closed session's waits leave too.
    if (!wait.joined) return;
    wait.joined = false;
    const leave = () => {
      this.#ctx.client.zrem(keys.waiters, wait.entry).catch(() => undefined);
      void this.#releaseQuietly(keys, wait.prefix);
    };
    // After its last try has settled: a try given up in flight may still join the line (a
    // script the server did not know yet is sent again after the NOSCRIPT reply, after a ZREM
    // sent now). Commands fail fast on a broken connection, so this never waits for long.
    const last = wait.lastTry;
    if (last === undefined) leave();
    else last.then(leave, leave);
  }

  /** One acquire script call: the grant, or the holder's remaining lease. */
  #try(
    name: string,
    keys: LockKeys,
    tail: string,
    signal: AbortSignal | undefined,
    wait: Wait | undefined,
  ): Promise<TryResult> {
    const owner = wait === undefined ? this.sessionId : wait.id;
    const prefix = wait === undefined ? this.#sessionPrefix : wait.prefix;
    // A wait's key is pending for the whole wait (see #startWait).
    const pending = wait === undefined ? { keys, prefix } : undefined;
    if (pending !== undefined) this.#pending.set(name, pending);
    let bounded: Promise<unknown>;
    try {
      // Hot path: see docs/hot-path.md, "Redis" (no channel names, no line key unless waiting).
      const call =
        wait === undefined
          ? ACQUIRE.run(this.#ctx.client, [keys.lock, keys.token], [prefix, this.ttlMs, tail])
          : ACQUIRE.run(
              this.#ctx.client,
              [keys.lock, keys.token, keys.waiters],
              [prefix, this.ttlMs, tail, wait.entry, wait.joined ? "1" : ""],
            );
      // Sent: from now on it may be in the line, whatever becomes of the reply (given up,
      // or arriving after close), so the wait's end takes it out (see #leaveLine).
      if (wait !== undefined) {
        wait.joined = true;
        wait.lastTry = call;
      }
      bounded = boundedCall(call, {
        timeoutMs: this.#leaseCallTimeoutMs,
        what: this.#acquireWhat,
        name,
        signal,
        mapError: (e) => toBatonError(e, `${this.#ctx.where}: acquire of "${name}" failed`),
        // Given up while in flight: the server may have granted it and only the reply be
        // lost. Delete any grant of this try on the key now (the next command on this
        // connection, so never a later grant), and a late grant again when it arrives.
        onAbandoned: (late) => {
          if (!this.#held.has(name)) void this.#releaseQuietly(keys, prefix);
          late.then(
            (r) => {
              const got = decodeAcquireReply(r);
              if ("token" in got) {
                void this.#releaseQuietly(keys, grantPrefix(owner, got.token));
              }
            },
            () => undefined,
          );
        },
      });
    } catch (error) {
      if (pending !== undefined) this.#unpend(name, pending);
      return Promise.reject(error);
    }
    // One promise chain, no async frame (hot path: see docs/hot-path.md, "Redis").
    return bounded.then(
      (r) => {
        if (pending !== undefined) this.#unpend(name, pending);
        const reply = decodeAcquireReply(r);
        if (signal?.aborted === true || this.#closed) {
          return this.#giveBack(keys, owner, reply, signal);
        }
        if (!("token" in reply)) return { grant: null, pttl: reply.pttl };
        return { grant: this.#hold(name, keys, owner, reply.token) };
      },
      (error: unknown) => {
        if (pending !== undefined) this.#unpend(name, pending);
        throw error;
      },
    );
  }

  /**
   * The grant arrived, but the caller left (or the session closed) at the same moment: it is
   * released, and the try rejects with the caller's reason (or the session's end).
   */
  async #giveBack(
    keys: LockKeys,
    owner: string,
    reply: { token: bigint } | { pttl: number },
    signal: AbortSignal | undefined,
  ): Promise<never> {
    if ("token" in reply) await this.#releaseQuietly(keys, grantPrefix(owner, reply.token));
    throw signal?.aborted === true ? signal.reason : this.#closedError();
  }

  /** Records grant `token` of `owner` (this session, or one of its waits) on `name` as held. */
  #hold(name: string, keys: LockKeys, owner: string, token: bigint): Grant {
    const handle: RedisGrantHandle = { sessionId: this.sessionId, grantOwner: owner };
    const grant: Grant = { key: name, ownerId: this.ownerId, token, handle };
    this.#held.set(name, { keys, prefix: grantPrefix(owner, token), grant });
    return grant;
  }

  /**
   * Owner-checked release of `grant` (to the first waiter in line, if any). One promise chain,
   * no async frame: see docs/hot-path.md, "Redis".
   */
  release(grant: Grant): Promise<boolean> {
    try {
      const handle = grant.handle;
      if (handle instanceof PermitHandle) return this.#permits.release(grant, handle);
      const held = this.#held.get(grant.key);
      const mine = held?.grant === grant ? held : undefined;
      // Forget it first: once release settles, even by throwing, it is never renewed again.
      if (mine !== undefined) this.#held.delete(grant.key);
      const own = handle as RedisGrantHandle | undefined;
      if (own?.sessionId !== this.sessionId) return Promise.resolve(false);
      const keys = mine?.keys ?? lockKeys(this.#ctx.keyPrefix, grant.key);
      const prefix = mine?.prefix ?? grantPrefix(own.grantOwner, grant.token);
      const call = RELEASE.run(
        this.#ctx.client,
        [keys.lock, keys.waiters, keys.token],
        [this.#ctx.cluster ? "" : "1", prefix],
      );
      return boundedCall(call, {
        timeoutMs: this.#ctx.commandTimeoutMs,
        what: this.#releaseWhat,
        name: grant.key,
        mapError: (e) => toBatonError(e, `${this.#ctx.where}: release of "${grant.key}" failed`),
      }).then(decodeReleasedOne);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * One {@link RELEASE} call for grants (by owner prefix): each lock goes to the first waiter
   * in its line, if any. On a Cluster the keys of different locks live in different slots, so
   * pass one grant per call there.
   */
  #releaseToNext(grants: readonly OwnedKey[]): Promise<unknown> {
    const skipUnheard = this.#ctx.cluster ? "" : "1";
    const [one] = grants;
    if (grants.length === 1 && one !== undefined) {
      // Hot path: see docs/hot-path.md, "Redis".
      const k = one.keys;
      return RELEASE.run(this.#ctx.client, [k.lock, k.waiters, k.token], [skipUnheard, one.prefix]);
    }
    return RELEASE.run(
      this.#ctx.client,
      [
        ...grants.map((g) => g.keys.lock),
        ...grants.map((g) => g.keys.waiters),
        ...grants.map((g) => g.keys.token),
      ],
      [skipUnheard, ...grants.map((g) => g.prefix)],
    );
  }

  /** The holder with its remaining lease: GET and PTTL of the lock key in one script call. */
  async holder(name: string): Promise<Holder | null> {
    const keys = lockKeys(this.#ctx.keyPrefix, name);
    const { payload, pttl } = decodeHolderReply(
      await boundedCall(READ_HOLDER.run(this.#ctx.client, [keys.lock], []), {
        timeoutMs: this.#ctx.commandTimeoutMs,
        what: `${this.#ctx.where}: holder of "${name}"`,
        mapError: (e) => toBatonError(e, `${this.#ctx.where}: holder of "${name}" failed`),
      }),
    );
    return payload === null ? null : withRemaining(decodePayload(payload, true), pttl);
  }

  /**
   * Pushes the holder of `name` now and after every change: woken by the grant and release
   * announcements on the lock's channel, and at the holder's PTTL (an expiry announces
   * nothing). Ends when `signal` aborts; a lost connection ends it with an error.
   */
  async *watch(name: string, signal: AbortSignal): AsyncGenerator<Holder | null> {
    this.#assertLive();
    if (signal.aborted) return;
    const keys = lockKeys(this.#ctx.keyPrefix, name);
    let subscription: ReleaseSubscription;
    try {
      subscription = await this.#ctx.listener.subscribe(keys.channel, signal);
    } catch (error) {
      if (signal.aborted) return;
      throw error;
    }
    try {
      let last: string | null | undefined;
      while (!signal.aborted) {
        const { payload: current, pttl } = decodeHolderReply(
          await boundedCall(READ_HOLDER.run(this.#ctx.client, [keys.lock], []), {
            timeoutMs: this.#ctx.commandTimeoutMs,
            what: `${this.#ctx.where}: watch of "${name}"`,
            signal,
            mapError: (e) => toBatonError(e, `${this.#ctx.where}: watch of "${name}" failed`),
          }),
        );
        if (current !== last) {
          last = current;
          yield current === null ? null : withRemaining(decodePayload(current, true), pttl);
        }
        // Until the next announcement, or until this holder's lease runs out.
        const sleepMs = current !== null && pttl >= 0 ? pttl + 1 : this.ttlMs;
        await subscription.next(sleepMs, signal);
      }
    } catch (error) {
      if (!signal.aborted) throw error;
    } finally {
      subscription.close();
    }
  }

  /** The durable record `key` (see redis-records.ts), or `null`. */
  async readRecord(key: string): Promise<StoredRecord | null> {
    this.#assertLive();
    return await this.#records.read(key);
  }

  /** Writes record `key` if its version is `expected`; the new version, or `null`. */
  async writeRecord(key: string, value: string, expected: string | null): Promise<string | null> {
    this.#assertLive();
    return await this.#records.write(key, value, expected);
  }

  /** Acquires permits of permit key `name` (see redis-permits.ts). */
  async acquirePermits(name: string, options: BackendPermitOptions): Promise<Grant | null> {
    this.#assertLive();
    return await this.#permits.acquire(name, options);
  }

  /** The granted entries of permit key `name`, in grant order. */
  async permitHolders(name: string): Promise<PermitHolder[]> {
    return await this.#permits.holders(name);
  }

  /** Turns a write grant into a read grant with the same token, or `null`. */
  async downgrade(grant: Grant): Promise<Grant | null> {
    this.#assertLive();
    const handle = grant.handle;
    if (!(handle instanceof PermitHandle)) return null;
    return await this.#permits.downgrade(grant, handle);
  }

  /** Lists lock, permit or record keys under the backend's prefix (see redis-inspection.ts). */
  async listKeys(options: ListKeysOptions): Promise<KeyPage> {
    this.#assertLive();
    return await this.#inspection.listKeys(options);
  }

  /** The holders and waiters of a lock or permit key, or `null` when it has neither. */
  async inspectKey(space: "lock" | "permit", key: string): Promise<KeyState | null> {
    this.#assertLive();
    return await this.#inspection.inspectKey(space, key);
  }

  /** Frees the grant of `key` with `options.token`, whoever holds it; `false` when none. */
  async forceRelease(
    space: "lock" | "permit",
    key: string,
    options: ForceReleaseOptions,
  ): Promise<boolean> {
    this.#assertLive();
    return await this.#inspection.forceRelease(space, key, options);
  }

  /** Throws `SessionLostError` once the session is closed. */
  #assertLive(): void {
    if (this.#closed) throw new SessionLostError("this redis session is closed");
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const wait of this.#waits) wait.abort(this.#closedError());
    this.#waits.clear();
    const permits = this.#permits.close(this.#closedError());
    const held = this.#held.values();
    this.#held.clear();
    this.#ctx.onClose(this);
    if (held.length === 0 && permits === undefined) return;
    // Keys of different locks live in different Cluster slots: there, one call per lock.
    const locks =
      held.length === 0
        ? undefined
        : this.#ctx.cluster
          ? Promise.all(held.map((h) => this.#releaseToNext([h])))
          : this.#releaseToNext(held);
    const call = Promise.all([locks, permits]);
    await boundedCall(call, {
      timeoutMs: this.#ctx.commandTimeoutMs,
      what: `${this.#ctx.where}: release of a closing session's locks`,
      mapError: (e) =>
        toBatonError(e, `${this.#ctx.where}: release of a closing session's locks failed`),
    });
  }

  #closedError(): SessionLostError {
    return new SessionLostError("this redis session was closed");
  }

  async #releaseQuietly(keys: LockKeys, prefix: string): Promise<void> {
    await this.#releaseToNext([{ keys, prefix }]).catch(() => undefined);
  }
}

/** `holder` with the lease's remaining time from the key's PTTL (none when it has no expiry). */
function withRemaining(holder: Holder | null, pttl: number): Holder | null {
  return holder === null || pttl < 0 ? holder : { ...holder, remainingMs: pttl };
}
