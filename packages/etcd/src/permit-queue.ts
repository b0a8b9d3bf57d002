import type { IWatchResponse } from "etcd3";
import { decodePermitEntry, decodeRevision, eventType } from "./etcd-codec.js";
import { rangeEnd } from "./etcd-keys.js";
import type { EtcdKv } from "./etcd-kv.js";
import {
  keyId,
  type PermitKeys,
  permitsOf,
  type QueueEntry,
  type QueueSnapshot,
} from "./permit-requests.js";
import { watchUntil } from "./watch-until.js";

/**
 * The rule of a permit queue: the entry at `index` is granted when its permits and those of
 * every entry ahead of it (granted or waiting) are at most `limit`. Entries ahead only ever
 * leave or shrink (a downgrade), and new ones join behind, so an entry once granted stays
 * granted while it lives: the rule needs no lock around it.
 */
export function isAdmitted(entries: readonly QueueEntry[], index: number, limit: number): boolean {
  let sum = 0;
  for (let i = 0; i <= index; i++) {
    const entry = entries[i];
    if (entry === undefined) return false;
    sum += permitsOf(entry, limit);
    if (sum > limit) return false;
  }
  return true;
}

/**
 * The shortest run of entries ahead of `index` whose permits with the entry's own exceed
 * `limit` (what holds it back), or `undefined` when it is admitted or that run is longer
 * than `most`.
 */
export function blockingEntries(
  entries: readonly QueueEntry[],
  index: number,
  limit: number,
  most: number,
): QueueEntry[] | undefined {
  const own = entries[index];
  if (own === undefined) return undefined;
  let sum = permitsOf(own, limit);
  for (let i = 0; i < index && i < most; i++) {
    sum += permitsOf(entries[i] as QueueEntry, limit);
    if (sum > limit) return entries.slice(0, i + 1);
  }
  return undefined;
}

/**
 * What a waiting entry knows of the queue: the permits of every entry ahead of it, and the
 * newest write's token, kept up to date from watch events (a delete frees permits, a
 * downgrade's rewrite shrinks them, a write grant rewrites the token key; entries that join
 * are behind and change nothing).
 */
export class QueueView {
  readonly #keys: PermitKeys;
  readonly #ownId: string;
  readonly #ownPermits: number;
  readonly #limit: number;
  #ahead = new Map<string, number>();
  #sum = 0;
  #writeToken = 0n;
  #gone = false;

  constructor(keys: PermitKeys, own: Buffer, permits: number, limit: number) {
    this.#keys = keys;
    this.#ownId = keyId(own);
    this.#ownPermits = permits;
    this.#limit = limit;
  }

  /** Starts over from a read of the queue. */
  reset(snapshot: QueueSnapshot): void {
    this.#ahead = new Map();
    this.#sum = 0;
    this.#writeToken = snapshot.writeToken;
    this.#gone = true;
    for (const entry of snapshot.entries) {
      if (entry.id === this.#ownId) {
        this.#gone = false;
        break;
      }
      const permits = permitsOf(entry, this.#limit);
      this.#ahead.set(entry.id, permits);
      this.#sum += permits;
    }
  }

  /** Applies the events of one watch response, in order. */
  apply(response: IWatchResponse): void {
    for (const event of response.events) {
      const id = keyId(event.kv.key);
      if (eventType(event) === "delete") {
        if (id === this.#ownId) this.#gone = true;
        const permits = this.#ahead.get(id);
        if (permits !== undefined) {
          this.#ahead.delete(id);
          this.#sum -= permits;
        }
      } else if (event.kv.key.equals(this.#keys.token)) {
        this.#writeToken = decodeRevision(event.kv.mod_revision);
      } else {
        const before = this.#ahead.get(id);
        if (before === undefined) continue;
        const entry = decodePermitEntry(event.kv.value)?.permits ?? this.#limit;
        this.#ahead.set(id, entry);
        this.#sum += entry - before;
      }
    }
  }

  /** True when our entry is gone (its lease expired). */
  get gone(): boolean {
    return this.#gone;
  }

  /** True when our entry is granted. */
  get admitted(): boolean {
    return !this.#gone && this.#sum + this.#ownPermits <= this.#limit;
  }

  /** The waiting is over: granted, or our entry is gone. */
  get settled(): boolean {
    return this.#gone || this.admitted;
  }

  /** The newest write's token as of the events applied (0n: none). */
  get writeToken(): bigint {
    return this.#writeToken;
  }
}

/**
 * Watches the whole range of a permit key from `fromRevision` (so nothing after the read the
 * view started from is missed), feeding `view` every event, until the view is settled
 * (resolves `"settled"`) or etcd cancels the watch because that history was compacted
 * (resolves `"compacted"`: read the queue again). One watch stream of its own. Rejects with
 * `signal.reason` on abort, `BackendUnavailableError` when the stream fails.
 */
export async function waitInQueue(
  kv: EtcdKv,
  keys: PermitKeys,
  view: QueueView,
  fromRevision: bigint,
  signal: AbortSignal,
): Promise<"settled" | "compacted"> {
  const range = { key: keys.prefix, rangeEnd: rangeEnd(keys.prefix) };
  const ended = await watchUntil(kv, range, fromRevision, signal, (response) => {
    view.apply(response);
    return view.settled;
  });
  return ended === "done" ? "settled" : "compacted";
}
