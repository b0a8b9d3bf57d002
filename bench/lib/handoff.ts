import { type Summary, summarise } from "./stats.js";

/** Something that can take the contended lock and hands back its release. */
export interface Contender {
  acquire(): Promise<() => Promise<void>>;
}

/**
 * Handoff latency with every contender queued on one lock: each loops acquire, hold 2 ms,
 * release, pause 5 ms; a sample is the time from one release to the next grant.
 */
export async function measureHandoff(
  contenders: readonly Contender[],
  handoffs: number,
): Promise<Summary> {
  const samples: number[] = [];
  let releasedAt: number | undefined;
  let done = false;
  const started = performance.now();
  await Promise.all(
    contenders.map(async (c) => {
      while (!done) {
        const release = await c.acquire();
        const now = performance.now();
        if (releasedAt !== undefined) samples.push(now - releasedAt);
        if (samples.length >= handoffs) done = true;
        await sleep(2);
        releasedAt = performance.now();
        await release();
        await sleep(5);
      }
    }),
  );
  return summarise(samples, performance.now() - started);
}

/** Coordinators as contenders for lock `name` (each waits up to a minute). */
export function coordinatorContenders(
  coordinators: readonly {
    acquire(name: string, options: { waitMs: number }): Promise<{ release(): Promise<boolean> }>;
  }[],
  name: string,
): Contender[] {
  return coordinators.map((c) => ({
    acquire: async () => {
      const lock = await c.acquire(name, { waitMs: 60_000 });
      return async () => {
        await lock.release();
      };
    },
  }));
}

/** Resolves after `ms`. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
