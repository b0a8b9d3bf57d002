import {
  ConfigError,
  type ForceReleaseOptions,
  type InspectedHolder,
  type KeyPage,
  type KeyState,
  type ListKeysOptions,
  type RevokedGrant,
  SessionLostError,
} from "@baton/core";
import { CompareResult, CompareTarget, type IRequestOp, SortOrder, SortTarget } from "etcd3";
import {
  decodeHolder,
  decodeListCursor,
  decodeQueueEntry,
  decodeRevision,
  decodeRevocation,
  encodeListCursor,
  encodeRevision,
  encodeRevocation,
  leaseIdOfHex,
} from "./etcd-codec.js";
import {
  isQueueKey,
  leaseHexOf,
  lockPrefix,
  nameOfKey,
  rangeEnd,
  revocationKey,
  revocationPrefix,
  spaceRange,
} from "./etcd-keys.js";
import type { EtcdKv } from "./etcd-kv.js";
import { splitQueue } from "./etcd-permits.js";
import { permitKeys, readQueueReply, readQueueTxn } from "./permit-requests.js";
import { oldestFirst, pickQueueKey } from "./queue-requests.js";
import { watchUntil } from "./watch-until.js";

/** Everything {@link EtcdInspection} needs from its session. */
export interface EtcdInspectionContext {
  readonly kv: EtcdKv;
  readonly prefix: string;
  readonly leaseHex: string;
  /** Aborted when the session ends. */
  readonly ended: AbortSignal;
}

/** The most queue keys one inspection reads of a lock (holder and waiters). */
const INSPECT_LIMIT = 1_000;

/**
 * Inspection and forced release for operators, on any session of the etcd backend.
 *
 * - Listing is a range over the key space's keys under the prefix, `keys_only`, with the
 *   page's `limit` as the range's: one bounded read per page. The cursor is the last key read
 *   (the next page starts after it) and the last name listed (a name whose queue keys run on
 *   into the next page is not listed again).
 * - A lock's inspection reads its queue keys oldest first: the oldest is the holder (its
 *   token the revision of its last write, its time left that of its lease: a second round
 *   trip), the others wait, in queue order. etcd keeps no time of a write, so no `heldMs`.
 * - A forced release deletes the holder's key in one transaction that compares its mod
 *   revision with the token (a later grant is never freed) and writes a revocation entry
 *   with the reason on the holder's own lease: it lives as long as the session it tells,
 *   and goes with it. The next waiter watches that key's delete, as for a release, and takes
 *   the grant with a write of its own: a greater token. The holder's renewal reads its
 *   revocation entries (see {@link EtcdInspection.revocations}).
 */
export class EtcdInspection {
  readonly #kv: EtcdKv;
  readonly #prefix: string;
  /** The range of the revocation entries addressed to this session. */
  readonly #revocations: Buffer;
  /** Aborted when the session ends: stops the watch of its revocation range. */
  readonly #ended: AbortSignal;
  /** True while the watch of the revocation range runs. */
  #watching = false;
  /** True when a revocation may have been written since the last read. */
  #changed = true;

  constructor(context: EtcdInspectionContext) {
    this.#kv = context.kv;
    this.#prefix = context.prefix;
    this.#revocations = revocationPrefix(context.prefix, context.leaseHex);
    this.#ended = context.ended;
  }

  /** One page of the key space's names (see `BackendSession.listKeys`). */
  async listKeys(options: ListKeysOptions): Promise<KeyPage> {
    const { space, prefix, limit, signal } = options;
    const range = spaceRange(this.#prefix, space, prefix);
    let start = range.start;
    let skip: string | undefined;
    if (options.cursor !== undefined) {
      const cursor = decodeListCursor(options.cursor);
      if (cursor === undefined) {
        throw new ConfigError("cursor", "is not a cursor a page of this list returned");
      }
      // Just after the last key read.
      start = Buffer.concat([cursor.lastKey, Buffer.from([0])]);
      skip = cursor.lastName;
    }
    signal.throwIfAborted();
    const { kvs, more } = await this.#kv.range(
      { key: start, range_end: range.end, keys_only: true, limit },
      `could not list the ${space} keys`,
    );
    signal.throwIfAborted();
    const keys: string[] = [];
    let last = skip;
    for (const { key } of kvs) {
      const name = nameOfKey(space, range.base, key);
      if (name === undefined || name === last) continue;
      // Nested names' keys may lie between a name's own: a page lists each name once.
      if (!keys.includes(name)) keys.push(name);
      last = name;
    }
    const lastKey = kvs.at(-1)?.key;
    if (!more || lastKey === undefined) return { keys };
    return { keys, cursor: encodeListCursor(lastKey, last) };
  }

  /** One lock or permit key's holders and waiters (see `BackendSession.inspectKey`). */
  inspectKey(space: "lock" | "permit", key: string): Promise<KeyState | null> {
    return space === "lock" ? this.#inspectLock(key) : this.#inspectPermits(key);
  }

  async #inspectLock(name: string): Promise<KeyState | null> {
    const prefix = lockPrefix(this.#prefix, name);
    const { kvs, count } = await this.#kv.range(
      {
        key: prefix,
        range_end: rangeEnd(prefix),
        sort_target: SortTarget.Create,
        sort_order: SortOrder.Ascend,
        limit: INSPECT_LIMIT,
      },
      `could not inspect "${name}"`,
    );
    // Keys of nested names (`name/x/...`) lie in the range too.
    const queue = kvs.filter((kv) => isQueueKey(prefix, kv.key));
    const first = queue[0];
    if (first === undefined) return null;
    const holders: InspectedHolder[] = [];
    let waiting = queue;
    const holder = decodeHolder(
      first.value,
      decodeRevision(first.mod_revision),
      leaseHexOf(prefix, first.key),
    );
    // A first key still marked waiting is being handed the lock: nobody holds it yet.
    if (holder !== null) {
      waiting = queue.slice(1);
      let remainingMs: number | undefined;
      if (first.lease !== "0") {
        const seconds = await this.#kv.leaseTimeToLive(first.lease);
        // The lease ran out between the two reads: its keys are gone, the lock is free.
        if (seconds === undefined) return await this.#inspectLock(name);
        remainingMs = seconds * 1000;
      }
      holders.push(remainingMs === undefined ? holder : { ...holder, remainingMs });
    }
    const ownerIds = waiting.map(
      (kv) => decodeQueueEntry(kv.value, leaseHexOf(prefix, kv.key)).ownerId,
    );
    // Past the read's limit, the count of the range tells how many more wait.
    const more = Math.max(0, count - kvs.length);
    const waiters =
      more === 0 ? { count: ownerIds.length, ownerIds } : { count: ownerIds.length + more };
    return { holders, waiters };
  }

  async #inspectPermits(name: string): Promise<KeyState | null> {
    const keys = permitKeys(this.#prefix, name);
    const { snapshot, limit } = readQueueReply(
      await this.#kv.txn(readQueueTxn(keys), `could not inspect "${name}"`),
    );
    if (snapshot.entries.length === 0) return null;
    const split = splitQueue(keys, snapshot, limit);
    const ownerIds = split.waiting.map(
      (e) => e.ownerId ?? `etcd-lease:${e.id.slice(keys.entries.length)}`,
    );
    return {
      holders: split.granted.map((g) => g.holder),
      waiters: { count: ownerIds.length, ownerIds },
      limit: split.limit,
    };
  }

  /**
   * Frees the grant of `key` with token `options.token` (see `BackendSession.forceRelease`):
   * resolves `false` when no such grant holds it.
   */
  async forceRelease(
    space: "lock" | "permit",
    key: string,
    options: ForceReleaseOptions,
  ): Promise<boolean> {
    options.signal.throwIfAborted();
    const released =
      space === "lock"
        ? await this.#forceLock(key, options)
        : await this.#forcePermits(key, options);
    return released;
  }

  async #forceLock(name: string, options: ForceReleaseOptions): Promise<boolean> {
    const prefix = lockPrefix(this.#prefix, name);
    const { kvs } = await this.#kv.range(
      oldestFirst(prefix, 1),
      `could not force the release of "${name}"`,
    );
    const first = await pickQueueKey(this.#kv, prefix, kvs[0], { oldest: true });
    if (first === undefined || decodeRevision(first.mod_revision) !== options.token) return false;
    options.signal.throwIfAborted();
    return await this.#revoke(
      [{ key: first.key, modRevision: options.token, leaseHex: leaseHexOf(prefix, first.key) }],
      "lock",
      name,
      options,
    );
  }

  async #forcePermits(name: string, options: ForceReleaseOptions): Promise<boolean> {
    const keys = permitKeys(this.#prefix, name);
    const { snapshot, limit } = readQueueReply(
      await this.#kv.txn(readQueueTxn(keys), `could not force the release of "${name}"`),
    );
    // Every granted entry with that token: reads granted after the same write share it.
    const entries = splitQueue(keys, snapshot, limit)
      .granted.filter((g) => g.holder.token === options.token)
      .map(({ entry }) => {
        const key = Buffer.from(entry.id, "latin1");
        const id = key.subarray(keys.entries.length).toString();
        return { key, modRevision: entry.modRevision, leaseHex: id.slice(0, id.indexOf(".")) };
      });
    if (entries.length === 0) return false;
    options.signal.throwIfAborted();
    return await this.#revoke(entries, "permit", name, options);
  }

  /**
   * One transaction: while each entry still has the mod revision read, deletes it and writes
   * the revocation entry on its lease. A lease that ran out meanwhile (etcd refuses the put)
   * took the key with it: nothing is left to free.
   */
  async #revoke(
    entries: readonly { key: Buffer; modRevision: bigint; leaseHex: string }[],
    space: "lock" | "permit",
    name: string,
    options: ForceReleaseOptions,
  ): Promise<boolean> {
    const value = encodeRevocation({
      space,
      key: name,
      token: options.token,
      reason: options.reason,
    });
    const success: IRequestOp[] = [];
    for (const entry of entries) {
      success.push({ request_delete_range: { key: entry.key } });
      const tell = revocationKey(
        revocationPrefix(this.#prefix, entry.leaseHex),
        space,
        options.token,
        name,
      );
      success.push({ request_put: { key: tell, value, lease: leaseIdOfHex(entry.leaseHex) } });
    }
    try {
      const response = await this.#kv.txn(
        {
          compare: entries.map((entry) => ({
            key: entry.key,
            target: CompareTarget.Mod,
            result: CompareResult.Equal,
            mod_revision: encodeRevision(entry.modRevision),
          })),
          success,
        },
        `could not force the release of "${name}"`,
      );
      return response.succeeded;
    } catch (error) {
      if (error instanceof SessionLostError) return false;
      throw error;
    }
  }

  /**
   * The revocation entries addressed to this session, each with its key for
   * {@link EtcdInspection.forget}, or `undefined` when none can have come since the last read:
   * a watch on the session's revocation range (one stream, opened at the first read, from
   * that read's revision) has seen no put. Reads them in one range otherwise: the first time,
   * after a put, or when the watch ended (it is opened again from the read).
   */
  async revocations(): Promise<{ readonly key: Buffer; readonly grant?: RevokedGrant }[]> {
    if (this.#watching && !this.#changed) return [];
    // A put seen from here on is read by the next renewal, even if this read sees it too.
    this.#changed = false;
    const { kvs, revision } = await this.#kv.range(
      { key: this.#revocations, range_end: rangeEnd(this.#revocations) },
      "could not read the revocations of the etcd session",
    );
    if (!this.#watching) this.#watch(revision + 1n);
    return kvs.map((kv) => {
      const grant = decodeRevocation(kv.value);
      return grant === undefined ? { key: kv.key } : { key: kv.key, grant };
    });
  }

  /** Watches the session's revocation range from `fromRevision` until the session ends. */
  #watch(fromRevision: bigint): void {
    if (this.#ended.aborted) return;
    this.#watching = true;
    const range = {
      key: this.#revocations,
      rangeEnd: rangeEnd(this.#revocations),
      putsOnly: true,
    };
    watchUntil(this.#kv, range, fromRevision, this.#ended, (response) => {
      if (response.events.length > 0) this.#changed = true;
      return false;
    }).then(
      // Compacted, failed or ended: the next renewal reads, and watches again.
      () => this.#unwatched(),
      () => this.#unwatched(),
    );
  }

  #unwatched(): void {
    this.#watching = false;
    this.#changed = true;
  }

  /** Deletes revocation entries once reported, in the background (they go with the lease). */
  forget(keys: readonly Buffer[]): void {
    if (keys.length === 0) return;
    void this.#kv
      .txn(
        { success: keys.map((key) => ({ request_delete_range: { key } })) },
        "could not delete the revocations read",
      )
      .catch(() => undefined);
  }
}
