import type { Holder } from "@baton/core";
import { decodeHolder, decodeRevision } from "./etcd-codec.js";
import { leaseHexOf } from "./etcd-keys.js";
import type { EtcdKv } from "./etcd-kv.js";
import { oldestFirst, pickQueueKey } from "./queue-requests.js";

/**
 * The holder of the lock whose prefix is `prefix` (its oldest queue key, whose token is the
 * revision of its last write: its grant's), and the read's revision. With `timeLeft`, the
 * holder's `remainingMs` too: the time left on the key's lease (one more round trip).
 */
export async function readHolder(
  kv: EtcdKv,
  prefix: Buffer,
  timeLeft = false,
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
  if (holder === null || !timeLeft || first.lease === "0") return { holder, revision };
  const seconds = await kv.leaseTimeToLive(first.lease);
  // The lease ran out between the two reads: the lock is free now.
  if (seconds === undefined) return { holder: null, revision };
  return { holder: { ...holder, remainingMs: seconds * 1000 }, revision };
}
