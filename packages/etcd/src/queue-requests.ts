import {
  CompareResult,
  CompareTarget,
  type ICompare,
  type IKeyValue,
  type IRangeRequest,
  type ITxnRequest,
  type ITxnResponse,
  SortOrder,
  SortTarget,
} from "etcd3";
import { decodeRevision, encodeRevision } from "./etcd-codec.js";
import { isQueueKey, rangeEnd } from "./etcd-keys.js";
import type { EtcdKv } from "./etcd-kv.js";

/*
 * The transactions of the lock queue, each followed by the reading of its reply: a reply's
 * `responses` are in the order of the branch's requests, so they are read here, beside them.
 */

/** Range of every key under `prefix`, oldest create revision first (the holder first). */
export function oldestFirst(prefix: Buffer, limit: number): IRangeRequest {
  return {
    key: prefix,
    range_end: rangeEnd(prefix),
    sort_target: SortTarget.Create,
    sort_order: SortOrder.Ascend,
    limit,
  };
}

/** Range of every key under `prefix` created before `revision`, newest first (the predecessor first). */
export function newestBelow(prefix: Buffer, revision: bigint, limit: number): IRangeRequest {
  return {
    keys_only: true,
    key: prefix,
    range_end: rangeEnd(prefix),
    sort_target: SortTarget.Create,
    sort_order: SortOrder.Descend,
    max_create_revision: encodeRevision(revision - 1n),
    limit,
  };
}

/** The stored values of a queue key (see `encodeHolderValue`): once it holds, and while it waits. */
export interface HolderValues {
  readonly held: Buffer;
  readonly waiting: Buffer;
}

/**
 * Joins the queue in one round trip. If nothing lives under the lock's prefix, create our key
 * on our lease with `held` as its value: the whole uncontended acquire is that compare and that
 * put, and its revision is the grant's. Otherwise, in a nested transaction, create our key with
 * `waiting` as its value if absent, or read it if it exists already (a retried call whose first
 * answer was lost).
 */
export function enqueueTxn(
  prefix: Buffer,
  key: Buffer,
  values: HolderValues,
  leaseId: string,
): ITxnRequest {
  // Hot path: see docs/hot-path.md, "etcd".
  return {
    compare: [prefixEmpty(prefix)],
    success: [{ request_put: { key, value: values.held, lease: leaseId } }],
    failure: [
      {
        request_txn: {
          compare: [
            { key, target: CompareTarget.Create, result: CompareResult.Equal, create_revision: 0 },
          ],
          success: [{ request_put: { key, value: values.waiting, lease: leaseId } }],
          failure: [{ request_range: { key, keys_only: true } }],
        },
      },
    ],
  };
}

/**
 * What an {@link enqueueTxn} did: our key's create revision, with the grant's token when the
 * lock was free (the creation itself took the grant); `undefined` when the reply does not have
 * the shape the transaction asks for.
 */
export function enqueueReply(
  response: ITxnResponse,
): { readonly revision: bigint; readonly token?: bigint } | undefined {
  const revision = decodeRevision(response.header.revision);
  // Nothing under the prefix: our key was created, and the lock is ours since that write.
  if (response.succeeded) return { revision, token: revision };
  const inner = response.responses[0]?.response_txn;
  if (inner === undefined) return undefined;
  // Our key was created (the revision is the put's) and waits behind others.
  if (inner.succeeded) return { revision };
  const mine = inner.responses[0]?.response_range.kvs[0];
  // Our key already existed (a retried call): its place is found by the first turn.
  return mine === undefined ? undefined : { revision: decodeRevision(mine.create_revision) };
}

/** True when no key at all lives under `prefix` (a compare over a range checks every key in it). */
function prefixEmpty(prefix: Buffer): ICompare {
  return {
    key: prefix,
    range_end: rangeEnd(prefix),
    target: CompareTarget.Create,
    result: CompareResult.Equal,
    create_revision: 0,
  };
}

/**
 * Try once in one round trip: create our key only if nothing at all lives under the lock's
 * prefix (so a try never queues and never leaves a key behind); otherwise read the oldest key.
 */
export function tryTxn(prefix: Buffer, key: Buffer, value: Buffer, leaseId: string): ITxnRequest {
  // Hot path: see docs/hot-path.md, "etcd".
  return {
    compare: [prefixEmpty(prefix)],
    success: [{ request_put: { key, value, lease: leaseId } }],
    failure: [{ request_range: oldestFirst(prefix, 1) }],
  };
}

/**
 * What a {@link tryTxn} answered: the revision of the write that created our key (the lock
 * was free), or the oldest key under the prefix.
 */
export function tryReply(
  response: ITxnResponse,
): { readonly revision: bigint } | { readonly oldest: IKeyValue | undefined } {
  if (response.succeeded) return { revision: decodeRevision(response.header.revision) };
  return { oldest: response.responses[0]?.response_range.kvs[0] };
}

/**
 * Takes our turn if it has come: while our key still has its create revision and no key under
 * the prefix is older, rewrite it with `value` (the holder's), so the grant's token is the
 * revision of that write, after every earlier holder's. Otherwise read the key just before
 * ours and our own key (to check it is still ours).
 */
export function turnTxn(
  prefix: Buffer,
  key: Buffer,
  value: Buffer,
  leaseId: string,
  revision: bigint,
): ITxnRequest {
  return {
    compare: [
      isOurs(key, revision),
      {
        key: prefix,
        range_end: rangeEnd(prefix),
        target: CompareTarget.Create,
        result: CompareResult.Greater,
        create_revision: encodeRevision(revision - 1n),
      },
    ],
    success: [{ request_put: { key, value, lease: leaseId } }],
    failure: [
      { request_range: newestBelow(prefix, revision, 1) },
      { request_range: { key, keys_only: true } },
    ],
  };
}

/**
 * What a {@link turnTxn} answered: the grant's token (the revision of the rewrite), or the
 * create revision of our key (`undefined` when it is gone), the key just before ours among
 * the first keys read (maybe a nested name's) and the read's revision.
 */
export function turnReply(response: ITxnResponse):
  | { readonly token: bigint }
  | {
      readonly ownRevision: bigint | undefined;
      readonly before: IKeyValue | undefined;
      readonly revision: bigint;
    } {
  const revision = decodeRevision(response.header.revision);
  if (response.succeeded) return { token: revision };
  const mine = response.responses[1]?.response_range.kvs[0];
  return {
    ownRevision: mine === undefined ? undefined : decodeRevision(mine.create_revision),
    before: response.responses[0]?.response_range.kvs[0],
    revision,
  };
}

/**
 * Takes a grant known to be ours (no queue key is older, whatever nested names' keys are):
 * rewrites our key with `value` while it still has its create revision. A permit entry's
 * downgrade is the same step.
 */
export function claimTxn(
  key: Buffer,
  value: Buffer,
  leaseId: string,
  revision: bigint,
): ITxnRequest {
  return {
    compare: [isOurs(key, revision)],
    success: [{ request_put: { key, value, lease: leaseId } }],
  };
}

/** The token of a {@link claimTxn} (its write's revision), or `undefined` when our key is gone. */
export function claimReply(response: ITxnResponse): bigint | undefined {
  return response.succeeded ? decodeRevision(response.header.revision) : undefined;
}

/** True while `key` has create revision `revision` (the same key, not a newer one). */
export function isOurs(key: Buffer, revision: bigint): ICompare {
  return {
    key,
    target: CompareTarget.Create,
    result: CompareResult.Equal,
    create_revision: encodeRevision(revision),
  };
}

/** Deletes `key` only while its create revision is `revision`: a retry never deletes a newer key. */
export function guardedDelete(key: Buffer, revision: bigint): ITxnRequest {
  return { compare: [isOurs(key, revision)], success: [{ request_delete_range: { key } }] };
}

/**
 * The queue key of `prefix` with the lowest (`oldest`) or highest (`newest`, below `below`)
 * create revision, ignoring keys of nested lock names. `first` is what a limited read returned;
 * only when it is a nested key does this read the whole range (rare: names like `a` and `a/b`).
 */
export async function pickQueueKey(
  kv: EtcdKv,
  prefix: Buffer,
  first: IKeyValue | undefined,
  which: { readonly oldest: true } | { readonly oldest: false; readonly below: bigint },
): Promise<IKeyValue | undefined> {
  if (first === undefined || isQueueKey(prefix, first.key)) return first;
  const request = which.oldest ? oldestFirst(prefix, 0) : newestBelow(prefix, which.below, 0);
  const { kvs } = await kv.range(request, "could not read the lock queue");
  return kvs.find((kvp) => isQueueKey(prefix, kvp.key));
}
