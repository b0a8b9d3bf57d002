import { ConfigError, CoordinatorClosedError } from "../contract/errors.js";
import { type Clock, sleep } from "../helpers/clock.js";
import { reportError } from "../helpers/report-error.js";
import { checkFunction, checkInt, checkName, checkOptions } from "../helpers/validate.js";
import type { Lock, RecipeHost } from "../kernel/index.js";

/** Members and partitions are owned for as long as it takes: no long-hold warnings. */
const OWNED = { warnHeldMs: 0 } as const;

/** What `onAssigned` receives for one partition. */
export interface PartitionContext {
  /** Aborts when this instance stops owning the partition, for any reason. */
  readonly signal: AbortSignal;
  /** Fencing token of this ownership; send it with the partition's writes. */
  readonly token: bigint;
}

/** Options of `coordinator.partitions()`. */
export interface PartitionOptions {
  /** Number of partitions, 1 to 1024. Partitions are numbered 0 .. count-1. */
  readonly count: number;
  /** Runs once each time this instance comes to own a partition. */
  readonly onAssigned: (partition: number, context: PartitionContext) => void | Promise<void>;
  /** Runs once when an ownership that started ends (handed to another instance, lost, closed). */
  readonly onRevoked?: (
    partition: number,
    info: { token: bigint; reason: string },
  ) => void | Promise<void>;
  /** Errors of callbacks and of the balancing loop (default: the coordinator's `backgroundError`). */
  readonly onError?: (error: unknown) => void;
}

/** Ownership of a share of `count` partitions among the live instances; see `coordinator.partitions()`. */
export interface Partitions extends AsyncDisposable {
  /** The partitions this instance owns now, ascending. */
  owned(): number[];
  /** Stops balancing and gives up every partition (their `onRevoked` runs before it resolves). */
  close(): Promise<void>;
}

const PARTITION_KEYS = ["count", "onAssigned", "onRevoked", "onError"] as const;
const MAX_PARTITIONS = 1024;

/**
 * Starts owning a fair share of `options.count` partitions of `name` (see
 * `Coordinator.partitions`). Throws `ConfigError` for bad input and `CoordinatorClosedError`
 * after `close()`.
 */
export function partitions(host: RecipeHost, name: string, options: PartitionOptions): Partitions {
  checkName(name);
  const resolved = resolvePartitionOptions(options);
  checkName(`${name}/partition/${resolved.count - 1}`, "name");
  host.assertOpen();
  return new PartitionBalancer(host, name, resolved);
}

/** Checks `partitions()` options; throws `ConfigError` naming the field. */
export function resolvePartitionOptions(input: unknown): PartitionOptions {
  const o = checkOptions(input, "options", PARTITION_KEYS);
  checkInt(o.count, "count", 1, MAX_PARTITIONS);
  checkFunction(o.onAssigned, "onAssigned");
  for (const key of ["onRevoked", "onError"] as const) {
    if (o[key] !== undefined) checkFunction(o[key], key);
  }
  return o as unknown as PartitionOptions;
}

/**
 * This instance's fair share: live members sorted by member slot, `count / members` each,
 * the first `count % members` taking one more, so the shares add up to `count` exactly.
 */
export function fairShare(count: number, members: number, rank: number): number {
  if (members <= 0) return count;
  return Math.floor(count / members) + (rank < count % members ? 1 : 0);
}

/**
 * @internal The balancing loop. Each instance holds one member slot (a lock
 * `<name>/member/<i>`), so everyone can count the live instances; every ttl/3 it releases
 * partitions above its fair share and takes free ones below it. A dead instance's member
 * slot and partitions expire with its session, and the survivors take them over.
 */
export class PartitionBalancer implements Partitions {
  readonly #name: string;
  readonly #host: RecipeHost;
  readonly #options: PartitionOptions;
  readonly #clock: Clock;
  readonly #stop = new AbortController();
  readonly #owned = new Map<number, Lock>();
  readonly #done: Promise<void>;
  readonly #untrack: () => void;
  #member: Lock | undefined;
  #closed = false;

  constructor(host: RecipeHost, name: string, options: PartitionOptions) {
    this.#name = name;
    this.#host = host;
    this.#options = options;
    this.#clock = host.clock;
    this.#untrack = host.track(() => this.close());
    this.#done = this.#run();
  }

  owned(): number[] {
    return [...this.#owned.entries()]
      .filter(([, lock]) => lock.held)
      .map(([p]) => p)
      .sort((a, b) => a - b);
  }

  async close(): Promise<void> {
    if (!this.#closed) {
      this.#closed = true;
      this.#stop.abort(new ConfigError("partitions", `partitions "${this.#name}" are closed`));
    }
    await this.#done;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  async #run(): Promise<void> {
    const every = Math.max(10, Math.floor(this.#host.locks.ttlMs / 3));
    try {
      while (!this.#closed) {
        try {
          await this.#balance();
        } catch (error) {
          if (this.#closed) break;
          if (error instanceof CoordinatorClosedError) break;
          this.#error(error, "balancing");
        }
        await sleep(this.#clock, every, this.#stop.signal).catch(() => undefined);
      }
    } finally {
      await Promise.all([...this.#owned.keys()].map((p) => this.#giveUp(p, "closed")));
      await this.#member?.release().catch(() => undefined);
      this.#untrack();
    }
  }

  async #balance(): Promise<void> {
    const locks = this.#host.locks;
    const count = this.#options.count;
    for (const [p, lock] of this.#owned)
      if (!lock.held) await this.#giveUp(p, lock.lostReason ?? "lost");
    if (this.#member === undefined || !this.#member.held) {
      this.#member = undefined;
      for (let slot = 0; slot < count && this.#member === undefined; slot++) {
        this.#member = (await locks.tryAcquire(this.#memberKey(slot), OWNED)) ?? undefined;
      }
      if (this.#member === undefined) return; // more instances than partitions: stand by
    }
    const holders = await Promise.all(
      Array.from({ length: count }, (_, slot) => locks.holder(this.#memberKey(slot))),
    );
    const live = holders.flatMap((h, slot) => (h === null ? [] : [{ slot, token: h.token }]));
    const mySlot = live.findIndex((m) => this.#memberKey(m.slot) === this.#member?.name);
    const share = fairShare(count, Math.max(1, live.length), Math.max(0, mySlot));
    const owned = this.owned();
    for (const p of owned.slice(share).reverse()) await this.#giveUp(p, "rebalanced");
    if (owned.length >= share) return;
    // Start the search at this member's own stretch of partitions, so instances do not collide.
    const start = Math.floor((Math.max(0, mySlot) * count) / Math.max(1, live.length));
    for (let i = 0; i < count && this.#owned.size < share; i++) {
      if (this.#stop.signal.aborted) return;
      const p = (start + i) % count;
      if (this.#owned.has(p)) continue;
      const lock = await locks.tryAcquire(this.#partitionKey(p), OWNED);
      if (lock === null) continue;
      this.#owned.set(p, lock);
      try {
        // The token is read from the lock: a backend without fencing has none (Lock.token).
        await this.#options.onAssigned(p, {
          signal: lock.signal,
          get token() {
            return lock.token;
          },
        });
      } catch (error) {
        this.#error(error, `onAssigned(${p})`);
        await this.#giveUp(p, "failed");
      }
    }
  }

  async #giveUp(partition: number, reason: string): Promise<void> {
    const lock = this.#owned.get(partition);
    if (lock === undefined) return;
    this.#owned.delete(partition);
    await lock
      .release()
      .catch((error: unknown) => this.#error(error, `releasing partition ${partition}`));
    try {
      await this.#options.onRevoked?.(partition, {
        get token() {
          return lock.token;
        },
        reason,
      });
    } catch (error) {
      this.#error(error, `onRevoked(${partition})`);
    }
  }

  #memberKey(slot: number): string {
    return `${this.#name}/member/${slot}`;
  }

  #partitionKey(partition: number): string {
    return `${this.#name}/partition/${partition}`;
  }

  #error(error: unknown, during: string): void {
    reportError(
      this.#options.onError,
      (e, during) => this.#host.report(e, during),
      error,
      `partitions "${this.#name}": ${during}`,
    );
  }
}
