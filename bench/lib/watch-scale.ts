import type { Coordinator, Holder } from "@baton/core";
import type { WatchResult } from "./results.js";
import { quantile } from "./stats.js";
import { benchCoordinator } from "./telemetry.js";

/** Options of {@link measureWatchScale}. */
export interface WatchScaleOptions {
  /** The URL of both coordinators. */
  readonly url: string;
  readonly ttlMs: number;
  /** Names watched. Default 10,000. */
  readonly names?: number;
  /** Notifications timed (each an acquire and a release). Default 100. */
  readonly samples?: number;
  /**
   * Time each of the two timings may take (many names, then one): it stops after this once
   * it has {@link MIN_SAMPLES}, and the figures say how many it took. Default 60 s: a store
   * whose watch polls once per renewal interval takes seconds per notification.
   */
  readonly budgetMs?: number;
  /** Lock-name prefix. */
  readonly prefix: string;
  readonly notes?: readonly string[];
}

/** How long the watches may take to set up before the figure is given up. */
const SETUP_LIMIT_MS = 180_000;

/** How long one notification may take before the figure is given up. */
const NOTIFY_LIMIT_MS = 30_000;

/** Notifications timed at least, whatever the budget. */
const MIN_SAMPLES = 10;

/** `global.gc` when node runs with `--expose-gc`. */
const gc = (globalThis as { gc?: () => void }).gc;

function heap(): number {
  if (gc) {
    gc();
    gc();
  }
  const m = process.memoryUsage();
  return m.heapUsed + m.external;
}

/** The watch loops of one coordinator: the latest value per name and who waits for a change. */
class Watches {
  readonly #waiting = new Map<string, (h: Holder | null) => void>();
  readonly #first: Promise<void>[] = [];
  /** Watches that have yielded their first value. */
  seen = 0;
  readonly #controller = new AbortController();

  constructor(coordinator: Coordinator, names: readonly string[]) {
    for (const name of names) {
      let resolveFirst!: () => void;
      let first = false;
      const seen = () => {
        if (first) return;
        first = true;
        this.seen++;
        resolveFirst();
      };
      this.#first.push(
        new Promise<void>((resolve) => {
          resolveFirst = resolve;
        }),
      );
      void (async () => {
        try {
          for await (const h of coordinator.watch(name, { signal: this.#controller.signal })) {
            seen();
            const w = this.#waiting.get(name);
            if (w) {
              this.#waiting.delete(name);
              w(h);
            }
          }
        } catch {
          // aborted at the end
        }
        seen();
      })();
    }
  }

  /** Resolves when every watch has yielded its first value; throws after `ms`. */
  async ready(ms = SETUP_LIMIT_MS): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        Promise.all(this.#first),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () =>
              reject(
                new Error(
                  `${this.seen} of ${this.#first.length} watches had their first value after ${ms / 1000} s`,
                ),
              ),
            ms,
          );
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * The next value pushed for `name` that satisfies `test`; throws after `ms` (a watch that
   * ended, or missed the change, fails the figure instead of stopping the bench).
   */
  next(name: string, test: (h: Holder | null) => boolean, ms = NOTIFY_LIMIT_MS): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiting.delete(name);
        reject(new Error(`the watch of "${name}" showed no change within ${ms / 1000} s`));
      }, ms);
      const wait = () =>
        this.#waiting.set(name, (h) => {
          if (!test(h)) return wait();
          clearTimeout(timer);
          resolve();
        });
      wait();
    });
  }

  stop(): void {
    this.#controller.abort();
  }
}

/**
 * Times `samples` acquire and release notifications on names drawn from `names`, fewer (but at
 * least {@link MIN_SAMPLES}) when they take longer than `budgetMs`.
 */
async function notifications(
  watches: Watches,
  actor: Coordinator,
  names: readonly string[],
  samples: number,
  budgetMs = Number.POSITIVE_INFINITY,
): Promise<{ acquired: number[]; released: number[] }> {
  const acquired: number[] = [];
  const released: number[] = [];
  const start = performance.now();
  for (let i = 0; i < samples; i++) {
    if (i >= MIN_SAMPLES && performance.now() - start > budgetMs) break;
    const name = names[Math.floor(Math.random() * names.length)] as string;
    const held = watches.next(name, (h) => h !== null);
    const lock = await actor.acquire(name, { waitMs: 30_000 });
    const t0 = performance.now();
    await held;
    acquired.push(performance.now() - t0);
    const freed = watches.next(name, (h) => h === null);
    await lock.release();
    const t1 = performance.now();
    await freed;
    released.push(performance.now() - t1);
  }
  return { acquired: acquired.sort((a, b) => a - b), released: released.sort((a, b) => a - b) };
}

/**
 * One coordinator watches `names` names (`coordinator.watch`, one loop each); another takes
 * and releases some of them: the set-up time (to every watch's first value), the memory per
 * watched name, and the time from the other coordinator's acquire (or release) resolving to
 * the watcher seeing it; then the same notifications with one name watched.
 */
export async function measureWatchScale(options: WatchScaleOptions): Promise<WatchResult> {
  const count = options.names ?? 10_000;
  const samples = options.samples ?? 100;
  const watcher = benchCoordinator({ url: options.url, ttlMs: options.ttlMs, ownerId: "watcher" });
  const actor = benchCoordinator({ url: options.url, ttlMs: options.ttlMs, ownerId: "actor" });
  const all: Watches[] = [];
  try {
    // Sessions open and code paths warm before the baseline.
    const warm = new Watches(watcher, [`${options.prefix}/warm`]);
    all.push(warm);
    await warm.ready();
    await notifications(warm, actor, [`${options.prefix}/warm`], 5);
    const names = Array.from({ length: count }, (_, i) => `${options.prefix}/w${i}`);
    const before = heap();
    const t0 = performance.now();
    const watches = new Watches(watcher, names);
    all.push(watches);
    await watches.ready();
    const setupMs = performance.now() - t0;
    const after = heap();
    const budgetMs = options.budgetMs ?? 60_000;
    const many = await notifications(watches, actor, names, samples, budgetMs);
    const one = await notifications(warm, actor, [`${options.prefix}/warm`], samples, budgetMs);
    return {
      names: count,
      setupMs,
      heapBytesPerName: gc ? (after - before) / count : Number.NaN,
      samples: many.acquired.length,
      acquiredP50: quantile(many.acquired, 0.5),
      acquiredP99: quantile(many.acquired, 0.99),
      releasedP50: quantile(many.released, 0.5),
      releasedP99: quantile(many.released, 0.99),
      oneNameP50: quantile(one.acquired, 0.5),
      notes: [
        `one coordinator watches ${count.toLocaleString("en-US")} names (one \`watch(name)\` loop each); another coordinator acquires and releases ${many.acquired.length} of them, drawn at random, one at a time${many.acquired.length < samples ? ` (${samples} were asked; the timing stops after ${budgetMs / 1000} s)` : ""}; the one-name figure from ${one.acquired.length}`,
        "notification latency: from the other coordinator's acquire (or release) resolving to the watcher's loop getting the holder (or null)",
        ...(options.notes ?? []),
      ],
    };
  } finally {
    for (const w of all) w.stop();
    await Promise.allSettled([watcher.close(), actor.close()]);
  }
}
