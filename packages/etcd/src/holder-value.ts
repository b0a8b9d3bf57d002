import type { Holder } from "@baton/core";

interface Stored {
  readonly baton: 1;
  readonly owner: string;
  readonly value?: string;
  /** Set while the key waits in the queue; a grant rewrites the key without it. */
  readonly waiting?: true;
}

/** What Baton stores in a queue key's value: the owner id and the published value, as JSON. */
export function encodeHolderValue(ownerId: string, value: string | undefined): Buffer {
  const stored: Stored =
    value === undefined ? { baton: 1, owner: ownerId } : { baton: 1, owner: ownerId, value };
  return Buffer.from(JSON.stringify(stored));
}

const WAITING_TAIL = Buffer.from(',"waiting":true}');

/** The value of {@link encodeHolderValue}, marked `waiting` (for a key that joins a queue). */
export function waitingValue(held: Buffer): Buffer {
  return Buffer.concat([held.subarray(0, held.length - 1), WAITING_TAIL]);
}

/**
 * The holder a queue key describes, or `null` for a Baton key still marked waiting (the lock
 * is being handed to it: nobody has been granted it yet). A key written by another client
 * (e.g. `etcdctl lock`, which stores an empty value) is shown with owner
 * `etcd-lease:<lease hex>` and its raw value.
 */
export function decodeHolder(raw: Buffer, token: bigint, leaseHex: string): Holder | null {
  const text = raw.toString();
  if (text.startsWith('{"baton":1')) {
    try {
      const stored = JSON.parse(text) as Partial<Stored>;
      if (typeof stored.owner === "string") {
        if (stored.waiting === true) return null;
        return typeof stored.value === "string"
          ? { ownerId: stored.owner, token, value: stored.value }
          : { ownerId: stored.owner, token };
      }
    } catch {
      // Not ours after all: shown as a foreign key below.
    }
  }
  const ownerId = `etcd-lease:${leaseHex}`;
  return text === "" ? { ownerId, token } : { ownerId, token, value: text };
}

/** True when two holders (or nulls) are the same grant with the same value. */
export function sameHolder(a: Holder | null, b: Holder | null): boolean {
  if (a === null || b === null) return a === b;
  return a.ownerId === b.ownerId && a.token === b.token && a.value === b.value;
}
