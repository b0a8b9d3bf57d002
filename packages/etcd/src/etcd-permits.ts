import {
  type BackendPermitOptions,
  BackendUnavailableError,
  backoffMs,
  type Grant,
  LeftoverCleanup,
  linkSignals,
  type PermitHolder,
  PermitLimitError,
  type PermitMode,
  type SessionEnd,
  SessionLostError,
  sleep,
  systemClock,
} from "@baton/core";
import type { IResponseOp, ITxnResponse } from "etcd3";
import { decodeRevision, encodePermitEntry, FOREIGN_OWNER_PREFIX } from "./etcd-codec.js";
import { permitEntryKey } from "./etcd-keys.js";
import type { EtcdKv } from "./etcd-kv.js";
import { blockingEntries, isAdmitted, QueueView, waitInQueue } from "./permit-queue.js";
import {
  claimWriteTxn,
  giveUpReply,
  giveUpTxn,
  joinOutcome,
  joinReply,
  joinTxn,
  keyId,
  leaveReply,
  leaveTxn,
  type PermitKeys,
  permitKeys,
  permitsOf,
  type QueueEntry,
  type QueueSnapshot,
  readQueueReply,
  readQueueTxn,
  storeLimitTxn,
} from "./permit-requests.js";
import { claimReply, claimTxn } from "./queue-requests.js";

/**
 * What a permit grant carries to release (or downgrade) exactly itself: the lease, the
 * entry's number on this session and its create revision, and what its value was built
 * from. The entry's key is rebuilt when needed rather than kept.
 */
export interface EtcdPermitHandle {
  readonly leaseHex: string;
  readonly entry: number;
  readonly revision: bigint;
  readonly permits: number;
  readonly mode: PermitMode;
  readonly value: string | undefined;
}

/** True when a grant's handle is a permit grant's. */
export function isPermitHandle(handle: unknown): handle is EtcdPermitHandle {
  return typeof handle === "object" && handle !== null && "entry" in handle;
}

/** Everything {@link EtcdPermits} needs from its session. */
export interface EtcdPermitsContext {
  readonly kv: EtcdKv;
  readonly prefix: string;
  readonly ownerId: string;
  readonly leaseId: string;
  readonly leaseHex: string;
  /** Ends every wait of the session; marks it lost when an entry vanished with the lease. */
  readonly end: SessionEnd;
}

/** Backoff between looks at the queue after a failure: 25 to 50 ms first, up to 1 s. */
const WAIT_BACKOFF = { minMs: 50, maxMs: 1_000 } as const;

/** The most entries a try's give-up compares (etcd bounds the operations of a transaction). */
const GIVE_UP_COMPARES = 64;

/** How often a join retries when other joins keep changing the limit key under it. */
const JOIN_ATTEMPTS = 16;

/** An entry a failed cleanup left: its permit key's keys and create revision (null: unknown). */
interface Leftover {
  readonly keys: PermitKeys;
  readonly revision: bigint | null;
}

/** Where a join left our entry: granted (with its token), or waiting behind `snapshot`. */
type Joined =
  | { readonly revision: bigint; readonly token: bigint }
  | { readonly revision: bigint; readonly snapshot: QueueSnapshot };

/**
 * The semaphores and read-write locks of one etcd session. Every holder or waiter is an
 * entry key on the session's lease (see etcd-keys.ts), so the session's one keepalive renews
 * them all and they go within a TTL of its death; the entries' create revisions order the
 * queue, and an entry is granted when its permits and those of every entry ahead fit the
 * limit (see `isAdmitted`). Tokens: a `"permit"` grant's is its entry's create revision; a
 * `"write"` grant's the revision of the step that granted it, which also rewrites the key's
 * `token` key; a `"read"` carries the `token` key's mod revision as of its grant.
 */
export class EtcdPermits {
  readonly #context: EtcdPermitsContext;
  readonly #kv: EtcdKv;
  /** Numbers this session's entries (several may be held of one key at once). */
  #next = 0;
  /**
   * Entries a failed cleanup or release left behind, by key id: the create revision, or null
   * when unknown. A keepalive retries them.
   */
  readonly #leftovers: LeftoverCleanup<Leftover>;
  /** Deletes of this session's entries in flight, by permit key name. */
  readonly #leaving = new Map<string, Set<Promise<unknown>>>();

  constructor(context: EtcdPermitsContext) {
    this.#context = context;
    this.#kv = context.kv;
    this.#leftovers = new LeftoverCleanup<Leftover>(
      (id, { keys, revision }) => this.#leave(keys, Buffer.from(id, "latin1"), revision),
      context.end.signal,
    );
  }

  /** Retries the cleanups that failed (after a keepalive). */
  retry(): void {
    this.#leftovers.retry();
  }

  /**
   * Acquires permits of `name` (see `BackendSession.acquirePermits`). It first waits for
   * this session's releases and cleanups of `name` still in flight (a wait core gave up on
   * is cleaned up after core rejected it): an acquire right after never queues behind them.
   */
  async acquire(name: string, options: BackendPermitOptions): Promise<Grant | null> {
    // The caller's signal is read only once the acquire waits (see docs/hot-path.md, "etcd").
    this.#context.end.assertLive();
    const leaving = this.#leaving.get(name);
    if (leaving !== undefined) await Promise.allSettled(leaving);
    const keys = permitKeys(this.#context.prefix, name);
    const entry = this.#next++;
    const key = permitEntryKey(keys.entries, this.#context.leaseHex, entry);
    const { permits, mode } = options;
    const value = encodePermitEntry({
      ownerId: this.#context.ownerId,
      permits,
      mode,
      value: options.value,
    });
    const handle = (revision: bigint): EtcdPermitHandle => ({
      leaseHex: this.#context.leaseHex,
      entry,
      revision,
      permits,
      mode,
      value: options.value,
    });
    try {
      const joined = await this.#join(name, keys, key, value, options);
      if ("token" in joined) return this.#grant(name, joined.token, handle(joined.revision));
      if (!options.wait) {
        const token = await this.#giveUp(name, keys, key, value, joined, options);
        return token === null ? null : this.#grant(name, token, handle(joined.revision));
      }
      const { signal } = options;
      // Core rejects an aborted wait at once: from the abort on, until our entry is deleted,
      // later acquires of the key on this session wait (see `acquire`).
      let left: (() => void) | undefined;
      const onAbort = () => {
        this.#track(
          name,
          new Promise<void>((resolve) => {
            left = resolve;
          }),
        );
      };
      signal.addEventListener("abort", onAbort, { once: true });
      const waitSignal = linkSignals([signal, this.#context.end.signal]);
      try {
        let token: bigint;
        try {
          token = await this.#wait(name, keys, key, value, joined, options, waitSignal.signal);
        } catch (error) {
          // Leave nothing behind: a cancelled or failed waiter gives up its place in the queue.
          await this.#cleanup(keys, key, joined.revision);
          if (signal.aborted) throw signal.reason;
          throw error;
        }
        if (signal.aborted) {
          await this.#cleanup(keys, key, joined.revision);
          throw signal.reason;
        }
        return this.#grant(name, token, handle(joined.revision));
      } finally {
        waitSignal.dispose();
        signal.removeEventListener("abort", onAbort);
        left?.();
      }
    } catch (error) {
      // e.g. "lease not found" on the put: the lease expired before core noticed.
      if (error instanceof SessionLostError) this.#context.end.markLost(error);
      throw error;
    }
  }

  /** Owner-checked release of a permit grant: false when its entry was no longer ours. */
  async release(grant: Grant, handle: EtcdPermitHandle): Promise<boolean> {
    const keys = permitKeys(this.#context.prefix, grant.key);
    const key = permitEntryKey(keys.entries, this.#context.leaseHex, handle.entry);
    try {
      return await this.#leave(keys, key, handle.revision);
    } catch (error) {
      // The entry may still be there, on a lease that lives on: deleted after a keepalive.
      this.#leftovers.remember(keyId(key), { keys, revision: handle.revision });
      throw error;
    }
  }

  /** Turns a write grant into a read grant of 1 permit with the same token, in one step. */
  async downgrade(grant: Grant, handle: EtcdPermitHandle): Promise<Grant | null> {
    if (handle.mode !== "write") return null;
    const keys = permitKeys(this.#context.prefix, grant.key);
    const key = permitEntryKey(keys.entries, this.#context.leaseHex, handle.entry);
    const value = encodePermitEntry({
      ownerId: this.#context.ownerId,
      permits: 1,
      mode: "read",
      value: handle.value,
    });
    const response = await this.#kv.txn(
      claimTxn(key, value, this.#context.leaseId, handle.revision),
      `could not downgrade "${grant.key}"`,
    );
    if (!response.succeeded) return null;
    const read: EtcdPermitHandle = { ...handle, permits: 1, mode: "read" };
    return { key: grant.key, ownerId: grant.ownerId, token: grant.token, handle: read };
  }

  /**
   * The granted entries of `name`, in the order they were granted. An entry whose turn came
   * but whose waiter has not yet taken it shows with its create revision as its token.
   */
  async holders(name: string): Promise<PermitHolder[]> {
    const keys = permitKeys(this.#context.prefix, name);
    const { snapshot, limit } = readQueueReply(
      await this.#kv.txn(readQueueTxn(keys), `could not read the holders of "${name}"`),
    );
    return splitQueue(keys, snapshot, limit).granted.map((g) => g.holder);
  }

  /**
   * Puts our entry while the stored limit is ours (one round trip), storing the limit first
   * when nobody holds or waits; rejects with `PermitLimitError`, nothing put, when entries
   * use another limit.
   */
  async #join(
    name: string,
    keys: PermitKeys,
    key: Buffer,
    value: Buffer,
    options: BackendPermitOptions,
  ): Promise<Joined> {
    const { mode, limit } = options;
    const what = `could not acquire "${name}"`;
    for (let attempt = 0; attempt < JOIN_ATTEMPTS; attempt++) {
      const response = await this.#txnPut(
        keys,
        key,
        joinTxn(keys, key, value, this.#context.leaseId, mode, limit),
        what,
      );
      const outcome = joinOutcome(response);
      if (outcome === undefined) {
        throw this.#kv.unavailable(`etcd answered the queue of "${name}" inconsistently`);
      }
      if ("joined" in outcome) {
        const revision = decodeRevision(response.header.revision);
        const { joined, offset } = outcome;
        return this.#joined(name, keys, key, value, joined, offset, revision, options);
      }
      const { seen } = outcome;
      if (!seen.busy) continue; // The last entry left meanwhile: look again.
      if (seen.limit !== undefined) throw new PermitLimitError(name, seen.limit, limit);
      // Entries without a readable limit key (deleted by hand): store ours, if still so.
      const stored = await this.#txnPut(
        keys,
        key,
        storeLimitTxn(keys, key, value, this.#context.leaseId, mode, limit, seen),
        what,
      );
      if (stored.succeeded) {
        const revision = decodeRevision(stored.header.revision);
        return this.#joined(name, keys, key, value, stored.responses, 1, revision, options);
      }
      // Another join changed the limit key meanwhile: look again.
    }
    throw this.#kv.unavailable(`${what}: its limit kept changing under concurrent acquires`);
  }

  /** A transaction that may have put our entry: on a lost answer, the entry is deleted. */
  async #txnPut(
    keys: PermitKeys,
    key: Buffer,
    request: Parameters<EtcdKv["txn"]>[0],
    what: string,
  ): Promise<ITxnResponse> {
    try {
      return await this.#kv.txn(request, what);
    } catch (error) {
      // The answer was lost, not necessarily the request: our entry may exist.
      await this.#cleanup(keys, key, null);
      throw error;
    }
  }

  /** Where the join ops of `response` (from `offset`) left our entry. */
  async #joined(
    name: string,
    keys: PermitKeys,
    key: Buffer,
    value: Buffer,
    responses: readonly IResponseOp[],
    offset: number,
    revision: bigint,
    options: BackendPermitOptions,
  ): Promise<Joined> {
    const { mode, limit } = options;
    const reply = joinReply(responses, offset, mode, revision);
    if (reply !== undefined && "granted" in reply) {
      return { revision: reply.granted, token: reply.granted };
    }
    const id = keyId(key);
    const index = reply?.snapshot.entries.findIndex((e) => e.id === id) ?? -1;
    const own = reply?.snapshot.entries[index];
    if (reply === undefined || own === undefined) {
      await this.#cleanup(keys, key, null);
      throw this.#kv.unavailable(`etcd answered the queue of "${name}" inconsistently`);
    }
    const { snapshot } = reply;
    const created = own.createRevision;
    if (!isAdmitted(snapshot.entries, index, limit)) return { revision: created, snapshot };
    try {
      return {
        revision: created,
        token: await this.#token(
          name,
          keys,
          key,
          value,
          created,
          snapshot.writeToken,
          mode,
          created === revision,
        ),
      };
    } catch (error) {
      await this.#cleanup(keys, key, created);
      throw error;
    }
  }

  /**
   * The token of a grant just admitted. A read carries the newest write's. A permit granted
   * by the join that created its entry takes that step's revision; any other permit or write
   * rewrites its entry (a write the token key too) and takes that step's revision, so a grant
   * that ends before another begins always has the smaller token, whichever of two waiters
   * admitted together notices first.
   */
  async #token(
    name: string,
    keys: PermitKeys,
    key: Buffer,
    value: Buffer,
    revision: bigint,
    writeToken: bigint,
    mode: PermitMode,
    joinedNow: boolean,
  ): Promise<bigint> {
    if (mode === "read") return writeToken;
    if (mode === "permit" && joinedNow) return revision;
    const leaseId = this.#context.leaseId;
    const token = claimReply(
      await this.#kv.txn(
        mode === "write"
          ? claimWriteTxn(keys, key, value, leaseId, revision)
          : claimTxn(key, value, leaseId, revision),
        `could not acquire "${name}"`,
      ),
    );
    if (token === undefined) throw this.#entryGone(name);
    return token;
  }

  /**
   * Waits until our entry is granted: one watch on the key's range from the revision the
   * join read, whose events keep a view of the queue ahead (no read per event, no herd of
   * reads when a holder leaves). Resolves the grant's token.
   */
  async #wait(
    name: string,
    keys: PermitKeys,
    key: Buffer,
    value: Buffer,
    joined: { readonly revision: bigint; readonly snapshot: QueueSnapshot },
    options: BackendPermitOptions,
    signal: AbortSignal,
  ): Promise<bigint> {
    const view = new QueueView(keys, key, options.permits, options.limit);
    view.reset(joined.snapshot);
    let from = joined.snapshot.revision + 1n;
    let attempt = 0;
    while (!view.settled) {
      if (signal.aborted) throw signal.reason;
      try {
        if ((await waitInQueue(this.#kv, keys, view, from, signal)) === "compacted") {
          from = (await this.#reread(name, keys, view)) + 1n;
        }
        attempt = 0;
      } catch (error) {
        if (signal.aborted || error instanceof SessionLostError) throw error;
        if (!(error instanceof BackendUnavailableError)) throw error;
        // A member failed or a stream broke: keep our place, back off, look again.
        await sleep(systemClock, backoffMs(attempt++, WAIT_BACKOFF), signal);
        try {
          from = (await this.#reread(name, keys, view)) + 1n;
        } catch (reread) {
          if (!(reread instanceof BackendUnavailableError)) throw reread;
        }
      }
    }
    if (view.gone) throw this.#entryGone(name);
    return await this.#token(
      name,
      keys,
      key,
      value,
      joined.revision,
      view.writeToken,
      options.mode,
      false,
    );
  }

  /**
   * A try that found no room: deletes its entry in one round trip, unless what held it back
   * changed meanwhile (see `giveUpTxn`): then it is granted after all if the queue read again
   * has room, and otherwise gives up. Resolves the grant's token, or `null`.
   */
  async #giveUp(
    name: string,
    keys: PermitKeys,
    key: Buffer,
    value: Buffer,
    joined: { readonly revision: bigint; readonly snapshot: QueueSnapshot },
    options: BackendPermitOptions,
  ): Promise<bigint | null> {
    const { revision, snapshot } = joined;
    const id = keyId(key);
    const index = snapshot.entries.findIndex((e) => e.id === id);
    const blocking = blockingEntries(snapshot.entries, index, options.limit, GIVE_UP_COMPARES);
    if (blocking === undefined) {
      await this.#cleanup(keys, key, revision);
      return null;
    }
    let reply: "left" | QueueSnapshot;
    try {
      const giving = this.#kv
        .txn(giveUpTxn(keys, key, revision, blocking), `could not leave the queue of "${name}"`)
        .then(giveUpReply);
      this.#track(name, giving);
      reply = await giving;
    } catch {
      await this.#cleanup(keys, key, revision);
      return null;
    }
    if (reply === "left") return null;
    const again = reply.entries.findIndex((e) => e.id === id);
    if (again < 0) throw this.#entryGone(name);
    if (!isAdmitted(reply.entries, again, options.limit)) {
      await this.#cleanup(keys, key, revision);
      return null;
    }
    try {
      return await this.#token(
        name,
        keys,
        key,
        value,
        revision,
        reply.writeToken,
        options.mode,
        false,
      );
    } catch (error) {
      await this.#cleanup(keys, key, revision);
      throw error;
    }
  }

  /** Reads the queue again into `view`; resolves the read's revision. */
  async #reread(name: string, keys: PermitKeys, view: QueueView): Promise<bigint> {
    const { snapshot } = readQueueReply(
      await this.#kv.txn(readQueueTxn(keys), `could not wait in the queue of "${name}"`),
    );
    view.reset(snapshot);
    return snapshot.revision;
  }

  /** Our entry vanished: its lease is gone. Marks the session lost. */
  #entryGone(name: string): SessionLostError {
    const error = new SessionLostError(
      `the permit entry of "${name}" is gone: the etcd lease expired while waiting`,
    );
    this.#context.end.markLost(error);
    return error;
  }

  #grant(name: string, token: bigint, handle: EtcdPermitHandle): Grant {
    return { key: name, ownerId: this.#context.ownerId, token, handle };
  }

  /**
   * Deletes our entry (and the limit key when it was the last one; see `leaveTxn`). Until it
   * settles, acquires of the key on this session wait for it (see {@link EtcdPermits.acquire}).
   */
  #leave(keys: PermitKeys, key: Buffer, revision: bigint | null): Promise<boolean> {
    const leaving = this.#kv
      .txn(leaveTxn(keys, key, revision), `could not leave the queue of "${keys.name}"`)
      .then(leaveReply);
    this.#track(keys.name, leaving);
    return leaving;
  }

  /** Makes acquires of `name` on this session wait for `pending` to settle. */
  #track(name: string, pending: Promise<unknown>): void {
    let set = this.#leaving.get(name);
    if (set === undefined) {
      set = new Set();
      this.#leaving.set(name, set);
    }
    const tracked = set;
    tracked.add(pending);
    const untrack = () => {
      tracked.delete(pending);
      if (tracked.size === 0 && this.#leaving.get(name) === tracked) this.#leaving.delete(name);
    };
    pending.then(untrack, untrack);
  }

  /**
   * Deletes our entry; if etcd cannot be reached, it is remembered and deleted after the
   * next keepalive, so no stale place in a queue outlives a live session.
   */
  async #cleanup(keys: PermitKeys, key: Buffer, revision: bigint | null): Promise<void> {
    const id = keyId(key);
    try {
      await this.#leave(keys, key, revision);
      this.#leftovers.forget(id);
    } catch {
      this.#leftovers.remember(id, { keys, revision });
    }
  }
}

/**
 * A permit queue read at one revision, split into its granted entries (in grant order, each
 * with the holder it shows) and the entries still waiting (in queue order). An entry whose
 * turn came but whose waiter has not yet taken it shows with its create revision as its token.
 * `limit` is the stored one (absent: the largest permits of an entry).
 */
export function splitQueue(
  keys: PermitKeys,
  snapshot: QueueSnapshot,
  limit: number | undefined,
): {
  readonly granted: { readonly entry: QueueEntry; readonly holder: PermitHolder }[];
  readonly waiting: QueueEntry[];
  readonly limit: number;
} {
  const { entries, writeToken } = snapshot;
  const stored = limit ?? Math.max(0, ...entries.map((e) => e.permits ?? 1));
  const granted: { entry: QueueEntry; holder: PermitHolder }[] = [];
  let i = 0;
  for (; i < entries.length; i++) {
    const entry = entries[i];
    if (entry === undefined || !isAdmitted(entries, i, stored)) break;
    // A write is granted by the step that rewrites its entry with the token key.
    if (entry.mode === "write" && entry.modRevision !== writeToken) break;
    // A permit's or a write's token is the revision of the step that granted it, the
    // entry's last write; a read carries the newest write's.
    const token = entry.mode === "read" ? writeToken : entry.modRevision;
    const ownerId =
      entry.ownerId ?? `${FOREIGN_OWNER_PREFIX}${entry.id.slice(keys.entries.length)}`;
    const holder: PermitHolder = {
      ownerId,
      token,
      permits: permitsOf(entry, stored),
      mode: entry.mode,
      ...(entry.value === undefined ? {} : { value: entry.value }),
    };
    granted.push({ entry, holder });
  }
  // In grant order: waiters admitted together take their grants in the order they claim.
  granted.sort((a, b) =>
    a.holder.token < b.holder.token ? -1 : a.holder.token > b.holder.token ? 1 : 0,
  );
  return { granted, waiting: entries.slice(i), limit: stored };
}
