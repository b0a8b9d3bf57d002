import {
  type BackendAcquireOptions,
  type BackendSession,
  BackendUnavailableError,
  type Grant,
  type Holder,
  type KeepAliveResult,
  linkSignals,
  SessionLostError,
  sleep,
  systemClock,
} from "@baton/core";
import type { IKeyValue } from "etcd3";
import type { EtcdKv } from "./etcd-kv.js";
import { encodeHolderValue } from "./holder-value.js";
import { LeaseKeeper } from "./lease-keeper.js";
import { isQueueKey, lockPrefix, queueKey } from "./lock-keys.js";
import { enqueueTxn, guardedDelete, pickQueueKey, tryTxn, turnTxn } from "./queue-requests.js";
import { readHolder } from "./read-holder.js";
import { waitForDelete } from "./wait-for-delete.js";
import { watchHolder } from "./watch-holder.js";

/**
 * What an etcd grant carries to release exactly itself: the lease (shared by the session)
 * and the key's create revision. The key is rebuilt on release: a small Buffer kept per lock
 * would pin a whole 8 KB pool block for every few locks held.
 */
interface GrantHandle {
  readonly leaseHex: string;
  readonly revision: bigint;
}

/** Everything an {@link EtcdSession} needs from its backend. */
export interface EtcdSessionInit {
  readonly kv: EtcdKv;
  readonly prefix: string;
  readonly ownerId: string;
  readonly leaseId: string;
  readonly leaseHex: string;
  readonly ttlMs: number;
  readonly onClose: (session: EtcdSession) => void;
}

const BACKOFF_MIN_MS = 25;
const BACKOFF_MAX_MS = 1_000;

/**
 * One etcd lease and the locks that live on it. Every queue key of this session is
 * `<prefix><name>/<lease hex>` on this lease; the fencing token is that key's create revision.
 */
export class EtcdSession implements BackendSession {
  readonly ownerId: string;
  readonly ttlMs: number;
  /** Aborted with a `SessionLostError` when the session learns its lease is gone. */
  readonly lost: AbortSignal;
  /** The lease id, as etcd's API returns it (decimal). */
  readonly leaseId: string;
  readonly #init: EtcdSessionInit;
  readonly #kv: EtcdKv;
  readonly #keeper: LeaseKeeper;
  readonly #lostController = new AbortController();
  /** Aborted on loss or close: ends every wait of this session. */
  readonly #ended = new AbortController();
  /** Queue keys a failed cleanup left behind, by lock name: the create revision, or null when unknown. */
  readonly #leftovers = new Map<string, bigint | null>();
  /** Lock names with an acquire in flight (their leftovers are cleaned by that acquire). */
  readonly #acquiring = new Set<string>();
  /** Cleanups running in the background, by lock name. */
  readonly #cleaning = new Map<string, Promise<void>>();
  #closing: Promise<void> | undefined;

  constructor(init: EtcdSessionInit) {
    this.#init = init;
    this.#kv = init.kv;
    this.ownerId = init.ownerId;
    this.ttlMs = init.ttlMs;
    this.leaseId = init.leaseId;
    this.lost = this.#lostController.signal;
    // A keepalive is waited for up to a third of the TTL: core retries sooner after a failure.
    const timeoutMs = Math.min(init.kv.requestTimeoutMs, Math.max(500, Math.floor(init.ttlMs / 3)));
    this.#keeper = new LeaseKeeper(init.kv.client, init.leaseId, timeoutMs);
  }

  async keepAlive(): Promise<KeepAliveResult | undefined> {
    this.#assertLive();
    try {
      await this.#keeper.renew();
    } catch (error) {
      if (error instanceof SessionLostError) this.#markLost(error);
      throw error;
    }
    this.#retryLeftovers();
    return undefined;
  }

  async acquire(name: string, options: BackendAcquireOptions): Promise<Grant | null> {
    const { signal } = options;
    if (signal.aborted) throw signal.reason;
    this.#assertLive();
    this.#acquiring.add(name);
    try {
      await this.#cleanLeftover(name);
      const prefix = lockPrefix(this.#init.prefix, name);
      const key = queueKey(prefix, this.#init.leaseHex);
      const value = encodeHolderValue(this.ownerId, options.value);
      return options.wait
        ? await this.#enqueue(name, prefix, key, value, signal)
        : await this.#tryOnce(name, prefix, key, value, signal);
    } catch (error) {
      // e.g. "lease not found" on the put: the lease expired before core noticed.
      if (error instanceof SessionLostError) this.#markLost(error);
      throw error;
    } finally {
      this.#acquiring.delete(name);
    }
  }

  async release(grant: Grant): Promise<boolean> {
    const handle = grant.handle as GrantHandle | undefined;
    // Owner check by session: only this lease's queue key of that name is ours to delete.
    if (handle === undefined || handle.leaseHex !== this.#init.leaseHex) return false;
    const mine = queueKey(lockPrefix(this.#init.prefix, grant.key), this.#init.leaseHex);
    const response = await this.#kv.txn(
      guardedDelete(mine, handle.revision),
      `could not release "${grant.key}"`,
    );
    return response.succeeded;
  }

  async holder(name: string): Promise<Holder | null> {
    return (await readHolder(this.#kv, lockPrefix(this.#init.prefix, name))).holder;
  }

  watch(name: string, signal: AbortSignal): AsyncIterable<Holder | null> {
    return watchHolder(this.#kv, lockPrefix(this.#init.prefix, name), signal);
  }

  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#ended.abort(new SessionLostError("the etcd session was closed"));
    this.#keeper.close();
    this.#init.onClose(this);
    // Revoking deletes every key on the lease at once: locks held and places in queues.
    await this.#kv.revokeLease(this.leaseId);
  }

  /** Try once: one round trip whether the lock is free or held; nothing is left behind. */
  async #tryOnce(
    name: string,
    prefix: Buffer,
    key: Buffer,
    value: Buffer,
    signal: AbortSignal,
  ): Promise<Grant | null> {
    let response: Awaited<ReturnType<EtcdKv["txn"]>>;
    try {
      response = await this.#kv.txn(
        tryTxn(prefix, key, value, this.leaseId),
        `could not acquire "${name}"`,
      );
    } catch (error) {
      // The answer was lost, not necessarily the request: our key may exist.
      await this.#cleanup(name, key, null);
      throw error;
    }
    let revision: bigint;
    if (response.succeeded) revision = BigInt(response.header.revision);
    else {
      const oldest = response.responses[0]?.response_range.kvs[0];
      if (oldest?.key.equals(key)) {
        // A retried call whose first answer was lost: our key is the oldest, so we hold it.
        revision = BigInt(oldest.create_revision);
      } else if (oldest === undefined || isQueueKey(prefix, oldest.key)) {
        return null;
      } else {
        // Only keys of nested lock names (`name/x/...`) are there: fall back to the queue.
        return await this.#tryBehindNested(name, prefix, key, value, signal);
      }
    }
    if (signal.aborted) {
      await this.#cleanup(name, key, revision);
      throw signal.reason;
    }
    return this.#grant(name, revision);
  }

  /** A try when nested lock names share the prefix: join the queue, leave it unless first. */
  async #tryBehindNested(
    name: string,
    prefix: Buffer,
    key: Buffer,
    value: Buffer,
    signal: AbortSignal,
  ): Promise<Grant | null> {
    const joined = await this.#join(name, prefix, key, value);
    if (joined.first) return this.#finish(name, key, joined.revision, signal);
    const predecessor = await pickQueueKey(this.#kv, prefix, joined.predecessor, {
      oldest: false,
      below: joined.revision,
    }).catch(async (error: unknown) => {
      await this.#cleanup(name, key, joined.revision);
      throw error;
    });
    if (predecessor === undefined) return this.#finish(name, key, joined.revision, signal);
    await this.#cleanup(name, key, joined.revision);
    return null;
  }

  /** Waits in the queue: one round trip when free, then only the predecessor is watched. */
  async #enqueue(
    name: string,
    prefix: Buffer,
    key: Buffer,
    value: Buffer,
    signal: AbortSignal,
  ): Promise<Grant> {
    const joined = await this.#join(name, prefix, key, value);
    if (joined.first) return this.#finish(name, key, joined.revision, signal);
    const waitSignal = linkSignals([signal, this.#ended.signal]);
    try {
      await this.#waitTurn(name, prefix, key, joined.revision, waitSignal.signal);
    } catch (error) {
      // Leave nothing behind: a cancelled or failed waiter gives up its place in the queue.
      await this.#cleanup(name, key, joined.revision);
      if (signal.aborted) throw signal.reason;
      throw error;
    } finally {
      waitSignal.dispose();
    }
    return this.#finish(name, key, joined.revision, signal);
  }

  /**
   * Creates our queue key (or finds it, on a retried call). `first` is true when no queue key
   * is older than ours; `predecessor` is the newest key below ours, if the first read saw it.
   */
  async #join(
    name: string,
    prefix: Buffer,
    key: Buffer,
    value: Buffer,
  ): Promise<{ revision: bigint; first: boolean; predecessor?: IKeyValue }> {
    let response: Awaited<ReturnType<EtcdKv["txn"]>>;
    try {
      response = await this.#kv.txn(
        enqueueTxn(prefix, key, value, this.leaseId),
        `could not acquire "${name}"`,
      );
    } catch (error) {
      await this.#cleanup(name, key, null);
      throw error;
    }
    const revision = BigInt(response.header.revision);
    // Nothing under the prefix: our key was created and is the only one.
    if (response.succeeded) return { revision, first: true };
    const inner = response.responses[0]?.response_txn;
    if (inner === undefined) {
      throw new BackendUnavailableError(`etcd answered the queue of "${name}" inconsistently`);
    }
    if (!inner.succeeded) {
      const mine = inner.responses[0]?.response_range.kvs[0];
      if (mine === undefined) {
        throw new BackendUnavailableError(`etcd answered the queue of "${name}" inconsistently`);
      }
      // Our key already existed (a retried call): find our place with a read.
      return { revision: BigInt(mine.create_revision), first: false };
    }
    const newest = inner.responses[1]?.response_range.kvs ?? [];
    const others = newest.filter((kvp) => !kvp.key.equals(key));
    if (others.length === 0) return { revision, first: true };
    const predecessor = others[0] as IKeyValue;
    if (isQueueKey(prefix, predecessor.key)) return { revision, first: false, predecessor };
    return { revision, first: false };
  }

  /**
   * Waits until no queue key is older than ours, watching only the newest older one for its
   * delete (no herd), then re-reads: our own key must still be there with our revision (a
   * waiter whose lease ran out while it waited must not be told it holds the lock).
   */
  async #waitTurn(
    name: string,
    prefix: Buffer,
    key: Buffer,
    revision: bigint,
    signal: AbortSignal,
  ): Promise<void> {
    let failures = 0;
    for (;;) {
      if (signal.aborted) throw signal.reason;
      try {
        const response = await this.#kv.txn(
          turnTxn(prefix, key, revision),
          `could not read the queue of "${name}"`,
        );
        const mine = response.responses[1]?.response_range.kvs[0];
        if (mine === undefined || BigInt(mine.create_revision) !== revision) {
          const error = new SessionLostError(
            `the queue key of "${name}" is gone: the etcd lease expired while waiting`,
          );
          this.#markLost(error);
          throw error;
        }
        const predecessor = await pickQueueKey(
          this.#kv,
          prefix,
          response.responses[0]?.response_range.kvs[0],
          { oldest: false, below: revision },
        );
        if (predecessor === undefined) return;
        await waitForDelete(
          this.#kv.client,
          predecessor.key,
          BigInt(response.header.revision) + 1n,
          signal,
        );
        failures = 0;
      } catch (error) {
        if (signal.aborted || error instanceof SessionLostError) throw error;
        if (!(error instanceof BackendUnavailableError)) throw error;
        // A member failed or a stream broke: keep our place, back off, look again.
        failures++;
        const ceiling = Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** failures);
        await sleep(systemClock, ceiling / 2 + Math.random() * (ceiling / 2), signal);
      }
    }
  }

  /** Hands out the grant, unless the caller gave up meanwhile (then our key is deleted). */
  async #finish(name: string, key: Buffer, revision: bigint, signal: AbortSignal): Promise<Grant> {
    if (signal.aborted) {
      await this.#cleanup(name, key, revision);
      throw signal.reason;
    }
    return this.#grant(name, revision);
  }

  #grant(name: string, revision: bigint): Grant {
    const handle: GrantHandle = { leaseHex: this.#init.leaseHex, revision };
    return { key: name, ownerId: this.ownerId, token: revision, handle };
  }

  /**
   * Deletes our queue key (only ours: guarded by its create revision when known). If etcd
   * cannot be reached, the key is remembered and deleted before the next acquire of the
   * name, or after the next keepalive, so no stale place in a queue outlives a live session.
   */
  async #cleanup(name: string, key: Buffer, revision: bigint | null): Promise<void> {
    try {
      await this.#deleteQueueKey(name, key, revision);
      this.#leftovers.delete(name);
    } catch {
      if (!this.#ended.signal.aborted) this.#leftovers.set(name, revision);
    }
  }

  async #deleteQueueKey(name: string, key: Buffer, revision: bigint | null): Promise<void> {
    const context = `could not leave the queue of "${name}"`;
    if (revision === null)
      await this.#kv.txn({ success: [{ request_delete_range: { key } }] }, context);
    else await this.#kv.txn(guardedDelete(key, revision), context);
  }

  /** Before an acquire: finish any cleanup of this name first, so it cannot delete the new key. */
  async #cleanLeftover(name: string): Promise<void> {
    const running = this.#cleaning.get(name);
    if (running !== undefined) await running;
    if (!this.#leftovers.has(name)) return;
    const revision = this.#leftovers.get(name) ?? null;
    const key = queueKey(lockPrefix(this.#init.prefix, name), this.#init.leaseHex);
    await this.#deleteQueueKey(name, key, revision);
    this.#leftovers.delete(name);
  }

  #retryLeftovers(): void {
    for (const [name, revision] of this.#leftovers) {
      if (this.#acquiring.has(name) || this.#cleaning.has(name)) continue;
      const key = queueKey(lockPrefix(this.#init.prefix, name), this.#init.leaseHex);
      const run = this.#deleteQueueKey(name, key, revision)
        .then(() => {
          if (this.#leftovers.get(name) === revision) this.#leftovers.delete(name);
        })
        .catch(() => undefined)
        .finally(() => this.#cleaning.delete(name));
      this.#cleaning.set(name, run);
    }
  }

  #assertLive(): void {
    const reason: unknown = this.#ended.signal.reason;
    if (this.#ended.signal.aborted) {
      throw reason instanceof SessionLostError
        ? reason
        : new SessionLostError("the etcd session ended");
    }
  }

  #markLost(error: SessionLostError): void {
    if (!this.#ended.signal.aborted) this.#ended.abort(error);
    if (!this.#lostController.signal.aborted) this.#lostController.abort(error);
  }
}
