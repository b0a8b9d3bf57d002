import type { Holder } from "@baton/core";
import { decodeHolder, decodeRevision } from "./etcd-codec.js";
import { leaseHexOf } from "./etcd-keys.js";
import type { EtcdKv } from "./etcd-kv.js";
import { oldestFirst, pickQueueKey } from "./queue-requests.js";

/**
 * The holder of the lock whose prefix is `prefix` (its oldest queue key, whose token is the
 * revision of its last write: its grant's), and the read's revision.
 */
export async function readHolder(
  kv: EtcdKv,
  prefix: Buffer,
): Promise<{ holder: Holder | null; revision: bigint }> {
  const { kvs, revision } = await kv.range(
    oldestFirst(prefix, 1),
    "could not read the lock holder",
  );
  const first = await pickQueueKey(kv, prefix, kvs[0], { oldest: true });
  if (first === undefined) return { holder: null, revision };
  const holder = decodeHolder(
    first.value,
    decodeRevision(first.mod_revision),
    leaseHexOf(prefix, first.key),
  );
  return { holder, revision };
}
