import {
  BackendUnavailableError,
  type Coordinator,
  createCoordinator,
  LockTimeoutError,
} from "@baton/core";

/** What one process of a grant-order run saw: its grants' tokens, every wait, the timeouts. */
export interface WorkerGrants {
  readonly id: string;
  /** Fencing tokens of its grants, as decimal strings. */
  readonly tokens: readonly string[];
  /** How long each acquire waited, in ms (those that ran out included). */
  readonly waits: readonly number[];
  /** Acquires whose wait ran out. */
  readonly timeouts: number;
}

/** The order of grants across the processes of a run. */
export interface GrantOrder {
  readonly grants: number;
  /** Grants per process, in the order given. */
  readonly perWorker: readonly number[];
  /** Share of grants (after the first) that went to the process that held the grant before. */
  readonly regrabShare: number;
  readonly longestWaitMs: number;
  readonly p99WaitMs: number;
  readonly timeouts: number;
}

/**
 * Puts the grants of every process in order by fencing token (tokens rise with every grant)
 * and counts how often the next grant went to the process that held the lock just before.
 */
export function grantOrder(runs: readonly WorkerGrants[]): GrantOrder {
  const all = runs
    .flatMap((r) => r.tokens.map((t) => ({ token: BigInt(t), id: r.id })))
    .sort((a, b) => (a.token < b.token ? -1 : a.token > b.token ? 1 : 0));
  let regrabs = 0;
  for (let i = 1; i < all.length; i++) if (all[i]?.id === all[i - 1]?.id) regrabs++;
  const waits = runs.flatMap((r) => r.waits).sort((a, b) => a - b);
  return {
    grants: all.length,
    perWorker: runs.map((r) => r.tokens.length),
    regrabShare: all.length > 1 ? regrabs / (all.length - 1) : 0,
    longestWaitMs: waits.at(-1) ?? 0,
    p99WaitMs: waits[Math.min(waits.length - 1, Math.floor(waits.length * 0.99))] ?? 0,
    timeouts: runs.reduce((n, r) => n + r.timeouts, 0),
  };
}

/**
 * Three coordinators of this process (each with its own backend and session) loop acquire
 * (waiting up to `waitMs`), hold 50 ms, release on lock `name` of `url` for `forMs`.
 */
export async function contendInProcess(
  url: string,
  name: string,
  forMs: number,
  waitMs = 6_000,
): Promise<WorkerGrants[]> {
  const coordinators = ["a", "b", "c"].map(() => createCoordinator({ url, ttlMs: 2_000 }));
  try {
    await Promise.all(coordinators.map((c) => openSession(c, name)));
    const end = performance.now() + forMs;
    return await Promise.all(
      coordinators.map(async (c, i) => {
        const tokens: string[] = [];
        const waits: number[] = [];
        let timeouts = 0;
        while (performance.now() < end) {
          const asked = performance.now();
          try {
            const lock = await c.acquire(name, { waitMs });
            waits.push(performance.now() - asked);
            tokens.push(String(lock.token));
            await new Promise((resolve) => setTimeout(resolve, 50));
            await lock.release();
          } catch (error) {
            if (!(error instanceof LockTimeoutError)) throw error;
            waits.push(performance.now() - asked);
            timeouts++;
          }
        }
        return { id: String(i), tokens, waits, timeouts };
      }),
    );
  } finally {
    await Promise.all(coordinators.map((c) => c.close()));
  }
}

/**
 * Opens the coordinator's session before the clock starts (a read of `name`'s holder), trying
 * again while the store is slow to answer: a busy machine can take longer than one TTL to
 * open the first session.
 */
export async function openSession(coordinator: Coordinator, name: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await coordinator.holder(name);
      return;
    } catch (error) {
      if (!(error instanceof BackendUnavailableError) || attempt === 5) throw error;
    }
  }
}
