import type { PermitMode } from "@baton/core";
import {
  CompareResult,
  CompareTarget,
  type ICompare,
  type IKeyValue,
  type IRangeRequest,
  type IRequestOp,
  type IResponseOp,
  type ITxnRequest,
  type ITxnResponse,
  SortOrder,
  SortTarget,
} from "etcd3";
import {
  decodePermitEntry,
  decodePermitLimit,
  decodeRevision,
  encodePermitLimit,
  encodeRevision,
} from "./etcd-codec.js";
import {
  permitEntriesPrefix,
  permitLimitKey,
  permitPrefix,
  permitTokenKey,
  rangeEnd,
} from "./etcd-keys.js";
import { isOurs } from "./queue-requests.js";

/*
 * The transactions of a permit queue (a semaphore's or a read-write lock's), each followed by
 * the reading of its reply: a reply's `responses` are in the order of the branch's requests.
 * The layout is in etcd-keys.ts; the waiting in permit-queue.ts.
 */

/** The keys of one permit key: its whole range, its entries' range, `limit` and `token`. */
export interface PermitKeys {
  /** The permit key's name (the backend key), for messages. */
  readonly name: string;
  readonly prefix: Buffer;
  readonly entries: Buffer;
  readonly limit: Buffer;
  readonly token: Buffer;
}

/** The keys of permit key `name` under the backend's `prefix`. */
export function permitKeys(prefix: string, name: string): PermitKeys {
  const base = permitPrefix(prefix, name);
  return {
    name,
    prefix: base,
    entries: permitEntriesPrefix(base),
    limit: permitLimitKey(base),
    token: permitTokenKey(base),
  };
}

/** One entry of the queue as read: `permits` is `undefined` for bytes Baton did not write. */
export interface QueueEntry {
  /** The key's bytes as a string (`latin1`: one character per byte), to match events by. */
  readonly id: string;
  readonly createRevision: bigint;
  readonly modRevision: bigint;
  readonly permits: number | undefined;
  readonly mode: PermitMode;
  readonly ownerId: string | undefined;
  readonly value: string | undefined;
}

/** The queue at one revision: its entries oldest first, and the newest write's token (0n: none). */
export interface QueueSnapshot {
  readonly entries: readonly QueueEntry[];
  readonly writeToken: bigint;
  readonly revision: bigint;
}

/** The id of a key, as {@link QueueEntry.id}. */
export function keyId(key: Buffer): string {
  return key.toString("latin1");
}

/** The entry a key-value describes. */
export function queueEntry(kv: IKeyValue): QueueEntry {
  const stored = decodePermitEntry(kv.value);
  return {
    id: keyId(kv.key),
    createRevision: decodeRevision(kv.create_revision),
    modRevision: decodeRevision(kv.mod_revision),
    permits: stored?.permits,
    mode: stored?.mode ?? "permit",
    ownerId: stored?.ownerId,
    value: stored?.value,
  };
}

/** The permits an entry counts for: a stray key Baton did not write takes all of them. */
export function permitsOf(entry: QueueEntry, limit: number): number {
  return entry.permits ?? limit;
}

/** Every entry, oldest create revision first: the queue in order. */
function entriesOldestFirst(keys: PermitKeys): IRangeRequest {
  return {
    key: keys.entries,
    range_end: rangeEnd(keys.entries),
    sort_target: SortTarget.Create,
    sort_order: SortOrder.Ascend,
  };
}

/** True while no key lies in `[key, end)` (a compare over a range checks every key in it). */
function rangeEmpty(key: Buffer, end: Buffer): ICompare {
  return {
    key,
    range_end: end,
    target: CompareTarget.Create,
    result: CompareResult.Equal,
    create_revision: 0,
  };
}

/**
 * Puts our entry and reads the queue in the same step, so the entries read are exactly those
 * ahead of ours. A write first checks that no entry at all is there: then it is granted by
 * this very step, and rewrites `token` with it (its revision is the write's token).
 */
function joinOps(
  keys: PermitKeys,
  key: Buffer,
  value: Buffer,
  leaseId: string,
  mode: PermitMode,
): IRequestOp[] {
  const put: IRequestOp = { request_put: { key, value, lease: leaseId } };
  const read: IRequestOp[] = [
    { request_range: entriesOldestFirst(keys) },
    { request_range: { key: keys.token } },
  ];
  if (mode !== "write") return [put, ...read];
  return [
    {
      request_txn: {
        compare: [rangeEmpty(keys.entries, rangeEnd(keys.entries))],
        success: [put, { request_put: { key: keys.token, value: Buffer.alloc(0) } }],
        failure: [put, ...read],
      },
    },
  ];
}

/**
 * Joins the queue in one round trip: while the stored limit is `limit`, puts our entry and
 * reads the queue (see {@link joinOps}); else, in a nested transaction, while no entry is
 * there (the limit key is absent, or was left by entries that expired), stores `limit` and
 * does the same; else reads the stored limit and whether any entry is there, and puts
 * nothing.
 */
export function joinTxn(
  keys: PermitKeys,
  key: Buffer,
  value: Buffer,
  leaseId: string,
  mode: PermitMode,
  limit: number,
): ITxnRequest {
  // Hot path: see docs/hot-path.md, "etcd".
  const join = joinOps(keys, key, value, leaseId, mode);
  const stored = encodePermitLimit(limit);
  return {
    compare: [
      { key: keys.limit, target: CompareTarget.Value, result: CompareResult.Equal, value: stored },
    ],
    success: join,
    failure: [
      {
        request_txn: {
          compare: [rangeEmpty(keys.entries, rangeEnd(keys.entries))],
          success: [{ request_put: { key: keys.limit, value: stored } }, ...join],
          failure: [
            { request_range: { key: keys.limit } },
            {
              request_range: {
                key: keys.entries,
                range_end: rangeEnd(keys.entries),
                count_only: true,
              },
            },
          ],
        },
      },
    ],
  };
}

/**
 * Where a {@link joinTxn} left things: the reply of its join ops (the response and the offset
 * of the ops in it), or the stored limit when nothing was put.
 */
export function joinOutcome(
  response: ITxnResponse,
):
  | { readonly joined: IResponseOp[]; readonly offset: number }
  | { readonly seen: StoredLimit }
  | undefined {
  if (response.succeeded) return { joined: response.responses, offset: 0 };
  const inner = response.responses[0]?.response_txn;
  if (inner === undefined) return undefined;
  return inner.succeeded ? { joined: inner.responses, offset: 1 } : { seen: storedLimit(inner) };
}

/** What a failed {@link joinTxn} read: the stored limit (and its key's mod revision), if any. */
export interface StoredLimit {
  /** `undefined`: no limit key, or one whose bytes are no limit. */
  readonly limit: number | undefined;
  /** The limit key's mod revision, 0n when there is none. */
  readonly modRevision: bigint;
  /** True when entries are there (holders or waiters). */
  readonly busy: boolean;
}

/** The stored limit a failed join read. */
function storedLimit(response: ITxnResponse): StoredLimit {
  const found = response.responses[0]?.response_range.kvs[0];
  const count = response.responses[1]?.response_range.count;
  return {
    limit: found === undefined ? undefined : decodePermitLimit(found.value),
    modRevision: found === undefined ? 0n : decodeRevision(found.mod_revision),
    busy: countOf(count) > 0,
  };
}

/**
 * Stores `limit` and joins the queue (see {@link joinOps}), in one step, while the limit key
 * is still as read: absent or unreadable while entries are there (a stray deletion).
 */
export function storeLimitTxn(
  keys: PermitKeys,
  key: Buffer,
  value: Buffer,
  leaseId: string,
  mode: PermitMode,
  limit: number,
  seen: StoredLimit,
): ITxnRequest {
  const unchanged: ICompare =
    seen.modRevision === 0n
      ? {
          key: keys.limit,
          target: CompareTarget.Create,
          result: CompareResult.Equal,
          create_revision: 0,
        }
      : {
          key: keys.limit,
          target: CompareTarget.Mod,
          result: CompareResult.Equal,
          mod_revision: encodeRevision(seen.modRevision),
        };
  return {
    compare: [unchanged],
    success: [
      { request_put: { key: keys.limit, value: encodePermitLimit(limit) } },
      ...joinOps(keys, key, value, leaseId, mode),
    ],
  };
}

/**
 * What the join ops (from `offset` in `responses`) did: a write granted on the spot (its
 * token is `revision`, the outer step's: a nested reply has no header of its own), or the
 * queue as read right after our entry was put.
 * `undefined` when the reply does not have the shape the transaction asks for.
 */
export function joinReply(
  responses: readonly IResponseOp[],
  offset: number,
  mode: PermitMode,
  revision: bigint,
): { readonly granted: bigint } | { readonly snapshot: QueueSnapshot } | undefined {
  let reads: IResponseOp[] = responses.slice(offset + 1);
  if (mode === "write") {
    const inner = responses[offset]?.response_txn;
    if (inner === undefined) return undefined;
    if (inner.succeeded) return { granted: revision };
    reads = inner.responses.slice(1);
  }
  const entries = reads[0]?.response_range;
  const token = reads[1]?.response_range;
  if (entries === undefined || token === undefined) return undefined;
  return { snapshot: snapshotOf(entries.kvs, token.kvs[0], revision) };
}

/** The queue of a read: entries (oldest first) and the `token` key (maybe absent). */
function snapshotOf(
  entries: readonly IKeyValue[],
  token: IKeyValue | undefined,
  revision: bigint,
): QueueSnapshot {
  return {
    entries: entries.map(queueEntry),
    writeToken: token === undefined ? 0n : decodeRevision(token.mod_revision),
    revision,
  };
}

/** Reads the queue, the `token` key and the `limit` key in one step. */
export function readQueueTxn(keys: PermitKeys): ITxnRequest {
  return {
    success: [
      { request_range: entriesOldestFirst(keys) },
      { request_range: { key: keys.token } },
      { request_range: { key: keys.limit } },
    ],
  };
}

/** What a {@link readQueueTxn} read: the queue, and its stored limit (`undefined`: none). */
export function readQueueReply(response: ITxnResponse): {
  readonly snapshot: QueueSnapshot;
  readonly limit: number | undefined;
} {
  const [entries, token, limit] = response.responses.map((r) => r.response_range);
  const stored = limit?.kvs[0];
  return {
    snapshot: snapshotOf(
      entries?.kvs ?? [],
      token?.kvs[0],
      decodeRevision(response.header.revision),
    ),
    limit: stored === undefined ? undefined : decodePermitLimit(stored.value),
  };
}

/**
 * Takes a write grant known to be ours (no entry is ahead of it): rewrites our entry and the
 * `token` key while our entry still has its create revision. The step's revision is the
 * token, after every earlier grant's; our entry's mod revision then equals the token key's,
 * which tells a granted write from one that waits.
 */
export function claimWriteTxn(
  keys: PermitKeys,
  key: Buffer,
  value: Buffer,
  leaseId: string,
  revision: bigint,
): ITxnRequest {
  return {
    compare: [isOurs(key, revision)],
    success: [
      { request_put: { key, value, lease: leaseId } },
      { request_put: { key: keys.token, value: Buffer.alloc(0) } },
    ],
  };
}

/** The key just after `key` in etcd's byte order. */
function keyAfter(key: Buffer): Buffer {
  return Buffer.concat([key, Buffer.from([0])]);
}

/**
 * Deletes our entry (only while it has create revision `revision`, when known) and, when it
 * is the last entry, the limit key with it, in one step: the key forgets its limit once
 * nobody holds or waits, and a join that comes in between sees either both or neither.
 */
export function leaveTxn(keys: PermitKeys, key: Buffer, revision: bigint | null): ITxnRequest {
  const end = rangeEnd(keys.entries);
  const mine: ICompare[] = revision === null ? [] : [isOurs(key, revision)];
  return {
    compare: [...mine, rangeEmpty(keys.entries, key), rangeEmpty(keyAfter(key), end)],
    success: [{ request_delete_range: { key } }, { request_delete_range: { key: keys.limit } }],
    failure: [
      {
        request_txn: {
          compare: mine,
          success: [{ request_delete_range: { key } }],
        },
      },
    ],
  };
}

/** True when a {@link leaveTxn} deleted our entry (false: it was no longer ours). */
export function leaveReply(response: ITxnResponse): boolean {
  const deleted = (index: number, r: ITxnResponse) =>
    countOf(r.responses[index]?.response_delete_range.deleted) > 0;
  if (response.succeeded) return deleted(0, response);
  const inner = response.responses[0]?.response_txn;
  return inner?.succeeded === true && deleted(0, inner);
}

/** An int64 count as etcd's API returns it (proto3 may leave a zero out). */
function countOf(text: string | undefined): number {
  return Number(text || "0");
}

/**
 * A try that found no room gives its entry up, unless the queue ahead changed since the join
 * read it: deletes our entry while every entry of `blocking` (entries ahead whose permits
 * with ours exceed the limit) still has the mod revision read; otherwise reads the queue
 * again, so a try that met a holder's release or a waiter's cancel in flight sees it.
 */
export function giveUpTxn(
  keys: PermitKeys,
  key: Buffer,
  revision: bigint,
  blocking: readonly QueueEntry[],
): ITxnRequest {
  return {
    compare: [
      isOurs(key, revision),
      ...blocking.map(
        (entry): ICompare => ({
          key: Buffer.from(entry.id, "latin1"),
          target: CompareTarget.Mod,
          result: CompareResult.Equal,
          mod_revision: encodeRevision(entry.modRevision),
        }),
      ),
    ],
    success: [{ request_delete_range: { key } }],
    failure: [{ request_range: entriesOldestFirst(keys) }, { request_range: { key: keys.token } }],
  };
}

/** What a {@link giveUpTxn} did: `"left"`, or the queue as read again. */
export function giveUpReply(response: ITxnResponse): "left" | QueueSnapshot {
  if (response.succeeded) return "left";
  const [entries, token] = response.responses.map((r) => r.response_range);
  return snapshotOf(entries?.kvs ?? [], token?.kvs[0], decodeRevision(response.header.revision));
}
