import {
  CompareResult,
  CompareTarget,
  type ICompare,
  type IKeyValue,
  type IRangeRequest,
  type ITxnRequest,
  SortOrder,
  SortTarget,
} from "etcd3";
import type { EtcdKv } from "./etcd-kv.js";
import { isQueueKey, rangeEnd } from "./lock-keys.js";

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
    max_create_revision: (revision - 1n).toString(),
    limit,
  };
}

/**
 * Joins the queue in one round trip. If nothing lives under the lock's prefix, create our key
 * on our lease: the whole uncontended acquire is that compare and that put. Otherwise, in a
 * nested transaction, create our key if absent and read the two newest keys (ours and, if any,
 * the one just before it); if it exists already (a retried call whose first answer was lost),
 * read it.
 */
export function enqueueTxn(
  prefix: Buffer,
  key: Buffer,
  value: Buffer,
  leaseId: string,
): ITxnRequest {
  const put = { request_put: { key, value, lease: leaseId } };
  return {
    compare: [prefixEmpty(prefix)],
    success: [put],
    failure: [
      {
        request_txn: {
          compare: [
            { key, target: CompareTarget.Create, result: CompareResult.Equal, create_revision: 0 },
          ],
          success: [
            put,
            {
              request_range: {
                keys_only: true,
                key: prefix,
                range_end: rangeEnd(prefix),
                sort_target: SortTarget.Create,
                sort_order: SortOrder.Descend,
                limit: 2,
              },
            },
          ],
          failure: [{ request_range: { key, keys_only: true } }],
        },
      },
    ],
  };
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
  return {
    compare: [prefixEmpty(prefix)],
    success: [{ request_put: { key, value, lease: leaseId } }],
    failure: [{ request_range: oldestFirst(prefix, 1) }],
  };
}

/** Our key (to check it is still ours) and the key just before it in the queue. */
export function turnTxn(prefix: Buffer, key: Buffer, revision: bigint): ITxnRequest {
  return {
    success: [
      { request_range: newestBelow(prefix, revision, 1) },
      { request_range: { key, keys_only: true } },
    ],
  };
}

/** Deletes `key` only while its create revision is `revision`: a retry never deletes a newer key. */
export function guardedDelete(key: Buffer, revision: bigint): ITxnRequest {
  return {
    compare: [
      {
        key,
        target: CompareTarget.Create,
        result: CompareResult.Equal,
        create_revision: revision.toString(),
      },
    ],
    success: [{ request_delete_range: { key } }],
  };
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
