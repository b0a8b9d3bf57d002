import {
  type BackendAcquireOptions,
  type BackendPermitOptions,
  type BackendSession,
  BackendUnavailableError,
  backoffMs,
  type ForceReleaseOptions,
  type Grant,
  type Holder,
  type KeepAliveResult,
  type KeyPage,
  type KeyState,
  LeftoverCleanup,
  type ListKeysOptions,
  linkSignals,
  type PermitHolder,
  type RevokedGrant,
  SessionEnd,
  SessionLostError,
  type StoredRecord,
  sleep,
  systemClock,
} from "@baton/core";
import { decodeRevision, encodeHolderValue } from "./etcd-codec.js";
import { EtcdInspection } from "./etcd-inspection.js";
import { isQueueKey, lockPrefix, queueKeyOf } from "./etcd-keys.js";
import type { EtcdKv } from "./etcd-kv.js";
import { EtcdPermits, isPermitHandle } from "./etcd-permits.js";
import { EtcdRecords } from "./etcd-records.js";
import { LeaseKeeper } from "./lease-keeper.js";
import {
  claimReply,
  claimTxn,
  enqueueReply,
  enqueueTxn,
  guardedDelete,
  type HolderValues,
  pickQueueKey,
  tryReply,
  tryTxn,
  turnReply,
  turnTxn,
} from "./queue-requests.js";
import { readHolder } from "./read-holder.js";
import { waitForDelete } from "./wait-for-delete.js";
import { watchHolder } from "./watch-holder.js";

/**
 * What an etcd grant carries to release exactly itself: the lease (shared by the session)
 * and the key's create revision (not the token: a grant after a wait rewrote the key). The key
 * is rebuilt on release rather than kept.
 */
interface EtcdGrantHandle {
  readonly leaseHex: string;
  readonly revision: bigint;
}

/**
 * Everything an {@link EtcdSession} needs from its backend.
 *
 * @internal
 */
export interface EtcdSessionContext {
  readonly kv: EtcdKv;
  readonly prefix: string;
  readonly ownerId: string;
  readonly leaseId: string;
  readonly leaseHex: string;
  readonly ttlMs: number;
  readonly onClose: (session: EtcdSession) => void;
}

/** Our queue key was deleted by another call of this session while the lease lives on. */
class KeyVanishedError extends BackendUnavailableError {}

/** Backoff between looks at the queue after a failure: 25 to 50 ms first, up to 1 s. */
const TURN_BACKOFF = { minMs: 50, maxMs: 1_000 } as const;

/** Where a turn in the queue stands: the grant's token, or the key to wait for. */
type Turn =
  | { readonly token: bigint }
  | { readonly predecessor: Buffer; readonly fromRevision: bigint };

/**
 * One etcd lease and the locks that live on it. Every queue key of this session is
 * `<prefix><name>/<lease hex>` on this lease. The fencing token is the revision of the write
 * that took the grant: the key's creation when the lock was free, else the rewrite of the key
 * once no older key is left. That is at least the revision at which the grant took effect
 * (what `etcdctl lock` hands its child as `ETCD_LOCK_REV`), so the tokens of Baton and of
 * other clients of the same key layout rise together, and a grant is never handed an earlier
 * grant's token, not even one of this session whose release did not reach etcd.
 */
export class EtcdSession implements BackendSession {
  readonly ownerId: string;
  readonly ttlMs: number;
  /** Aborted with a `SessionLostError` when the session learns its lease is gone. */
  readonly lost: AbortSignal;
  /** The lease id, as etcd's API returns it (decimal). */
  readonly leaseId: string;
  readonly #context: EtcdSessionContext;
  readonly #kv: EtcdKv;
  readonly #keeper: LeaseKeeper;
  readonly #records: EtcdRecords;
  /** Semaphores and read-write locks: entries on the same lease (see etcd-permits.ts). */
  readonly #permits: EtcdPermits;
  /** Its signal aborts on loss or close: it ends every wait of this session. */
  readonly #end = new SessionEnd("the etcd session ended");
  /**
   * Queue keys a failed cleanup left behind, by lock name: the create revision, or null when
   * unknown. An acquire of the name deletes its leftover first; a keepalive retries the rest.
   */
  readonly #leftovers = new LeftoverCleanup<bigint | null>(
    (name, revision) =>
      this.#deleteQueueKey(
        name,
        queueKeyOf(this.#context.prefix, name, this.#context.leaseHex).key,
        revision,
      ).then(() => true),
    this.#end.signal,
  );
  /** Inspection and forced release, and the revocation entries addressed to this session. */
  readonly #inspection: EtcdInspection;
  /**
   * The grants this session holds, by `lock:<name>` or `permit:<name>:<entry>`: a renewal
   * reads the session's revocation entries only while one is held, and reports a revocation
   * only of a grant it still holds.
   */
  readonly #held = new Map<
    string,
    { readonly space: "lock" | "permit"; readonly key: string; readonly token: bigint }
  >();
  /** Releases in flight, by lock name: an acquire of the name waits for its outcome. */
  readonly #releasing = new Map<string, Promise<boolean>>();
  #closing: Promise<void> | undefined;
  /** The stored values of a grant that publishes nothing, built on first use. */
  #plainValues: HolderValues | undefined;

  /** @internal Sessions are opened by `EtcdBackend.openSession`. */
  constructor(context: EtcdSessionContext) {
    this.#context = context;
    this.#kv = context.kv;
    this.ownerId = context.ownerId;
    this.ttlMs = context.ttlMs;
    this.leaseId = context.leaseId;
    this.lost = this.#end.lost;
    // A keepalive is waited for up to a third of the TTL: core retries sooner after a failure.
    const timeoutMs = Math.min(
      context.kv.requestTimeoutMs,
      Math.max(500, Math.floor(context.ttlMs / 3)),
    );
    this.#keeper = new LeaseKeeper(context.kv, context.leaseId, timeoutMs);
    this.#records = new EtcdRecords(context.kv, context.prefix);
    this.#permits = new EtcdPermits({
      kv: context.kv,
      prefix: context.prefix,
      ownerId: context.ownerId,
      leaseId: context.leaseId,
      leaseHex: context.leaseHex,
      end: this.#end,
    });
    this.#inspection = new EtcdInspection({
      kv: context.kv,
      prefix: context.prefix,
      leaseHex: context.leaseHex,
      ended: this.#end.signal,
    });
  }

  /**
   * Renews the lease. While the session holds a grant, it also reports the grants an operator
   * force-released as `revoked`, with the reason: a watch of the session's revocation entries
   * tells when one was written, and only then (and at the first renewal holding a grant, or
   * after the watch ended) does the renewal read them, in one range sent alongside the
   * keepalive, not after it.
   */
  async keepAlive(): Promise<KeepAliveResult | undefined> {
    this.#end.assertLive();
    const reading = this.#held.size === 0 ? undefined : this.#inspection.revocations();
    // A failed read is not the renewal's failure: the next renewal reads again.
    reading?.catch(() => undefined);
    try {
      await this.#keeper.renew();
    } catch (error) {
      if (error instanceof SessionLostError) this.#end.markLost(error);
      throw error;
    }
    this.#leftovers.retry();
    this.#permits.retry();
    if (reading === undefined) return undefined;
    const entries = await reading.catch(() => []);
    if (entries.length === 0) return undefined;
    const revoked: RevokedGrant[] = [];
    for (const { grant } of entries) {
      if (grant === undefined) continue;
      for (const [id, held] of this.#held) {
        if (held.space !== grant.space || held.key !== grant.key || held.token !== grant.token)
          continue;
        this.#held.delete(id);
        revoked.push(grant);
        break;
      }
    }
    this.#inspection.forget(entries.map((e) => e.key));
    return revoked.length === 0 ? undefined : { revoked };
  }

  /** One page of a key space's names under the backend's prefix (see etcd-inspection.ts). */
  listKeys(options: ListKeysOptions): Promise<KeyPage> {
    this.#end.assertLive();
    return this.#inspection.listKeys(options);
  }

  /** A lock or permit key's holders and waiters, or `null` (see etcd-inspection.ts). */
  inspectKey(space: "lock" | "permit", key: string): Promise<KeyState | null> {
    this.#end.assertLive();
    return this.#inspection.inspectKey(space, key);
  }

  /** Frees the grant with `options.token`, held by any session (see etcd-inspection.ts). */
  forceRelease(
    space: "lock" | "permit",
    key: string,
    options: ForceReleaseOptions,
  ): Promise<boolean> {
    this.#end.assertLive();
    return this.#inspection.forceRelease(space, key, options);
  }

  async acquire(name: string, options: BackendAcquireOptions): Promise<Grant | null> {
    // The caller's signal is read only once the acquire waits: a single try may ignore it
    // (the coordinator checks it). Hot path: see docs/hot-path.md, "etcd".
    this.#end.assertLive();
    return await this.#leftovers.acquiring(name, async () => {
      try {
        // Hot path: see docs/hot-path.md, "etcd".
        if (this.#releasing.has(name) || this.#leftovers.has(name)) {
          await this.#cleanLeftover(name);
        }
        const { prefix, key } = queueKeyOf(this.#context.prefix, name, this.#context.leaseHex);
        return options.wait
          ? await this.#enqueue(name, prefix, key, this.#values(options.value), options)
          : await this.#tryOnce(name, prefix, key, options.value);
      } catch (error) {
        // e.g. "lease not found" on the put: the lease expired before core noticed.
        if (error instanceof SessionLostError) this.#end.markLost(error);
        throw error;
      }
    });
  }

  release(grant: Grant): Promise<boolean> {
    if (isPermitHandle(grant.handle)) {
      if (grant.handle.leaseHex !== this.#context.leaseHex) return Promise.resolve(false);
      this.#held.delete(`permit:${grant.key}:${grant.handle.entry}`);
      return this.#permits.release(grant, grant.handle);
    }
    const handle = grant.handle as EtcdGrantHandle | undefined;
    // Owner check by session: only this lease's queue key of that name is ours to delete.
    if (handle === undefined || handle.leaseHex !== this.#context.leaseHex) {
      return Promise.resolve(false);
    }
    const name = grant.key;
    const id = `lock:${name}`;
    if (this.#held.get(id)?.token === grant.token) this.#held.delete(id);
    const mine = queueKeyOf(this.#context.prefix, name, this.#context.leaseHex).key;
    const releasing: Promise<boolean> = this.#kv
      .txn(guardedDelete(mine, handle.revision), `could not release "${name}"`)
      .then(
        (response) => {
          if (this.#releasing.get(name) === releasing) this.#releasing.delete(name);
          return response.succeeded;
        },
        (error: unknown) => {
          if (this.#releasing.get(name) === releasing) this.#releasing.delete(name);
          // The key may still be there, and the lease lives on with the session's other
          // locks: delete it before the next acquire of the name, or after the next keepalive.
          this.#leftovers.remember(name, handle.revision);
          throw error;
        },
      );
    this.#releasing.set(name, releasing);
    return releasing;
  }

  async holder(name: string): Promise<Holder | null> {
    return (await readHolder(this.#kv, lockPrefix(this.#context.prefix, name), true)).holder;
  }

  watch(name: string, signal: AbortSignal): AsyncIterable<Holder | null> {
    return watchHolder(this.#kv, lockPrefix(this.#context.prefix, name), signal);
  }

  /**
   * Acquires permits of a semaphore or a read-write lock: an entry on this session's lease,
   * granted once the permits of every entry ahead and its own fit the limit (see
   * etcd-permits.ts). One round trip when granted at once.
   */
  async acquirePermits(name: string, options: BackendPermitOptions): Promise<Grant | null> {
    const grant = await this.#permits.acquire(name, options);
    if (grant !== null && isPermitHandle(grant.handle)) {
      const { token } = grant;
      this.#held.set(`permit:${name}:${grant.handle.entry}`, { space: "permit", key: name, token });
    }
    return grant;
  }

  /** The granted entries of permit key `name`, in grant order. */
  permitHolders(name: string): Promise<PermitHolder[]> {
    return this.#permits.holders(name);
  }

  /** Turns a write grant of this session into a read grant with the same token. */
  async downgrade(grant: Grant): Promise<Grant | null> {
    const { handle } = grant;
    if (!isPermitHandle(handle) || handle.leaseHex !== this.#context.leaseHex) return null;
    this.#end.assertLive();
    return await this.#permits.downgrade(grant, handle);
  }

  /** The durable record `key` (see etcd-records.ts), or `null`. */
  async readRecord(key: string): Promise<StoredRecord | null> {
    this.#end.assertLive();
    return await this.#records.read(key);
  }

  /** Writes record `key` if its version is `expected`; the new version, or `null`. */
  async writeRecord(key: string, value: string, expected: string | null): Promise<string | null> {
    this.#end.assertLive();
    return await this.#records.write(key, value, expected);
  }

  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#end.close(new SessionLostError("the etcd session was closed"));
    this.#keeper.close();
    this.#context.onClose(this);
    // Revoking deletes every key on the lease at once: locks held and places in queues.
    await this.#kv.revokeLease(this.leaseId);
  }

  /** Try once: one round trip whether the lock is free or held; nothing is left behind. */
  async #tryOnce(
    name: string,
    prefix: Buffer,
    key: Buffer,
    published: string | undefined,
  ): Promise<Grant | null> {
    const value =
      published === undefined
        ? this.#values(undefined).held
        : encodeHolderValue(this.ownerId, published);
    let reply: ReturnType<typeof tryReply>;
    try {
      reply = tryReply(
        await this.#kv.txn(tryTxn(prefix, key, value, this.leaseId), `could not acquire "${name}"`),
      );
    } catch (error) {
      // The answer was lost, not necessarily the request: our key may exist.
      await this.#cleanup(name, key, null);
      throw error;
    }
    if ("revision" in reply) return this.#grant(name, reply.revision, reply.revision);
    const { oldest } = reply;
    if (oldest?.key.equals(key)) {
      // A retried call whose first answer was lost: our key is the oldest, so the lock is ours.
      // The grant is a write of its own, so its token is after every earlier grant's.
      const revision = decodeRevision(oldest.create_revision);
      let token: bigint;
      try {
        token = await this.#claim(name, key, value, revision);
      } catch (error) {
        await this.#cleanup(name, key, revision);
        throw error;
      }
      return this.#grant(name, revision, token);
    }
    if (oldest === undefined || isQueueKey(prefix, oldest.key)) return null;
    // Only keys of nested lock names (`name/x/...`) are there: fall back to the queue.
    return await this.#tryBehindNested(name, prefix, key, this.#values(published));
  }

  /** A try when nested lock names share the prefix: join the queue, leave it unless first. */
  async #tryBehindNested(
    name: string,
    prefix: Buffer,
    key: Buffer,
    values: HolderValues,
  ): Promise<Grant | null> {
    const joined = await this.#join(name, prefix, key, values);
    if (joined.token !== undefined) return this.#grant(name, joined.revision, joined.token);
    let turn: Turn;
    try {
      turn = await this.#turn(name, prefix, key, values.held, joined.revision);
    } catch (error) {
      await this.#cleanup(name, key, joined.revision);
      throw error;
    }
    if ("token" in turn) return this.#grant(name, joined.revision, turn.token);
    await this.#cleanup(name, key, joined.revision);
    return null;
  }

  /** Waits in the queue: one round trip when free, then only the predecessor is watched. */
  async #enqueue(
    name: string,
    prefix: Buffer,
    key: Buffer,
    values: HolderValues,
    options: BackendAcquireOptions,
  ): Promise<Grant> {
    const joined = await this.#join(name, prefix, key, values);
    if (joined.token !== undefined) return this.#grant(name, joined.revision, joined.token);
    const { signal } = options;
    const waitSignal = linkSignals([signal, this.#end.signal]);
    let token: bigint;
    try {
      token = await this.#waitTurn(
        name,
        prefix,
        key,
        values.held,
        joined.revision,
        waitSignal.signal,
      );
    } catch (error) {
      // Leave nothing behind: a cancelled or failed waiter gives up its place in the queue.
      await this.#cleanup(name, key, joined.revision);
      if (signal.aborted) throw signal.reason;
      throw error;
    } finally {
      waitSignal.dispose();
    }
    return this.#finish(name, key, joined.revision, token, signal);
  }

  /**
   * Creates our queue key (or finds it, on a retried call) and resolves its create revision,
   * and the grant's token when the lock was free (the creation itself took the grant).
   */
  async #join(
    name: string,
    prefix: Buffer,
    key: Buffer,
    values: HolderValues,
  ): Promise<{ readonly revision: bigint; readonly token?: bigint }> {
    let response: Awaited<ReturnType<EtcdKv["txn"]>>;
    try {
      response = await this.#kv.txn(
        enqueueTxn(prefix, key, values, this.leaseId),
        `could not acquire "${name}"`,
      );
    } catch (error) {
      await this.#cleanup(name, key, null);
      throw error;
    }
    const joined = enqueueReply(response);
    if (joined === undefined) {
      throw this.#kv.unavailable(`etcd answered the queue of "${name}" inconsistently`);
    }
    return joined;
  }

  /**
   * Waits until no queue key is older than ours, watching only the newest older one for its
   * delete (no herd), and resolves the token of the write that then takes the grant.
   */
  async #waitTurn(
    name: string,
    prefix: Buffer,
    key: Buffer,
    value: Buffer,
    revision: bigint,
    signal: AbortSignal,
  ): Promise<bigint> {
    let attempt = 0;
    for (;;) {
      if (signal.aborted) throw signal.reason;
      try {
        const turn = await this.#turn(name, prefix, key, value, revision);
        if ("token" in turn) return turn.token;
        await waitForDelete(this.#kv, turn.predecessor, turn.fromRevision, signal);
        attempt = 0;
      } catch (error) {
        if (signal.aborted || error instanceof SessionLostError) throw error;
        // Our key is gone: waiting longer cannot help; the acquire starts again with a new key.
        if (!(error instanceof BackendUnavailableError) || error instanceof KeyVanishedError)
          throw error;
        // A member failed or a stream broke: keep our place, back off, look again.
        await sleep(systemClock, backoffMs(attempt++, TURN_BACKOFF), signal);
      }
    }
  }

  /**
   * One look at the queue, in one round trip: when no key is older than ours, the write that
   * takes the grant (its revision is the token); otherwise the key just before ours. Our own
   * key must still be there with our revision (a waiter whose lease ran out while it waited
   * must not be told it holds the lock).
   */
  async #turn(
    name: string,
    prefix: Buffer,
    key: Buffer,
    value: Buffer,
    revision: bigint,
  ): Promise<Turn> {
    const reply = turnReply(
      await this.#kv.txn(
        turnTxn(prefix, key, value, this.leaseId, revision),
        `could not wait in the queue of "${name}"`,
      ),
    );
    if ("token" in reply) return reply;
    if (reply.ownRevision !== revision) throw await this.#keyGone(name);
    const predecessor = await pickQueueKey(this.#kv, prefix, reply.before, {
      oldest: false,
      below: revision,
    });
    // Only keys of nested lock names are older than ours: the lock is ours.
    if (predecessor === undefined) return { token: await this.#claim(name, key, value, revision) };
    return { predecessor: predecessor.key, fromRevision: reply.revision + 1n };
  }

  /** Takes a grant known to be ours with a write of our key; resolves that write's revision. */
  async #claim(name: string, key: Buffer, value: Buffer, revision: bigint): Promise<bigint> {
    const token = claimReply(
      await this.#kv.txn(
        claimTxn(key, value, this.leaseId, revision),
        `could not acquire "${name}"`,
      ),
    );
    if (token === undefined) throw await this.#keyGone(name);
    return token;
  }

  /**
   * Our queue key vanished. When the lease is gone too, the session is lost (marked so). When
   * the lease lives on, something else deleted the key (the cleanup of an earlier attempt at
   * the name that was given up while etcd was slow, e.g. during a leader election): the
   * session and its other locks are fine, and this acquire fails with a
   * `KeyVanishedError` (a `BackendUnavailableError`: core tries again, with a new key).
   */
  async #keyGone(name: string): Promise<Error> {
    let ttl: number | undefined;
    try {
      ttl = await this.#kv.leaseTimeToLive(this.leaseId);
    } catch (error) {
      // Unknown: not lost on a guess; the next keepalive tells.
      return error as Error;
    }
    if (ttl !== undefined) {
      return new KeyVanishedError(
        `${this.#kv.context(`the queue key of "${name}" was deleted while its lease lives on`)}: the cleanup of an earlier attempt removed it; the acquire starts again`,
      );
    }
    const error = new SessionLostError(
      `the queue key of "${name}" is gone: the etcd lease expired while waiting`,
    );
    this.#end.markLost(error);
    return error;
  }

  /** The stored values of our queue key: once it holds the lock, and while it waits. */
  #values(published: string | undefined): HolderValues {
    // Hot path: see docs/hot-path.md, "etcd".
    if (published !== undefined) return this.#encodeValues(published);
    this.#plainValues ??= this.#encodeValues(undefined);
    return this.#plainValues;
  }

  #encodeValues(published: string | undefined): HolderValues {
    return {
      held: encodeHolderValue(this.ownerId, published),
      waiting: encodeHolderValue(this.ownerId, published, true),
    };
  }

  /** Hands out a waiter's grant, unless the caller gave up meanwhile (then our key is deleted). */
  #finish(
    name: string,
    key: Buffer,
    revision: bigint,
    token: bigint,
    signal: AbortSignal,
  ): Grant | Promise<never> {
    if (signal.aborted) return this.#abandon(name, key, revision, signal.reason);
    return this.#grant(name, revision, token);
  }

  /** The grant of our queue key, created at `revision`, with the fencing token `token`. */
  #grant(name: string, revision: bigint, token: bigint): Grant {
    // Hot path: see docs/hot-path.md, "etcd".
    const handle: EtcdGrantHandle = { leaseHex: this.#context.leaseHex, revision };
    this.#held.set(`lock:${name}`, { space: "lock", key: name, token });
    return { key: name, ownerId: this.ownerId, token, handle };
  }

  async #abandon(name: string, key: Buffer, revision: bigint, reason: unknown): Promise<never> {
    await this.#cleanup(name, key, revision);
    throw reason;
  }

  /**
   * Deletes our queue key (only ours: guarded by its create revision when known). If etcd
   * cannot be reached, the key is remembered and deleted before the next acquire of the
   * name, or after the next keepalive, so no stale place in a queue outlives a live session.
   */
  async #cleanup(name: string, key: Buffer, revision: bigint | null): Promise<void> {
    try {
      await this.#deleteQueueKey(name, key, revision);
      this.#leftovers.forget(name);
    } catch {
      this.#leftovers.remember(name, revision);
    }
  }

  async #deleteQueueKey(name: string, key: Buffer, revision: bigint | null): Promise<void> {
    const context = `could not leave the queue of "${name}"`;
    if (revision === null)
      await this.#kv.txn({ success: [{ request_delete_range: { key } }] }, context);
    else await this.#kv.txn(guardedDelete(key, revision), context);
  }

  /**
   * Before an acquire (once a background cleanup of the name is done): delete a leftover of
   * the name first, so no later cleanup can delete the new key.
   */
  async #cleanLeftover(name: string): Promise<void> {
    const releasing = this.#releasing.get(name);
    if (releasing !== undefined) await releasing.catch(() => undefined);
    if (!this.#leftovers.has(name)) return;
    const revision = this.#leftovers.get(name) ?? null;
    const key = queueKeyOf(this.#context.prefix, name, this.#context.leaseHex).key;
    await this.#deleteQueueKey(name, key, revision);
    this.#leftovers.forget(name);
  }
}
