import type { Coordinator } from "@baton/core";
import { type LatencySection, row } from "./results.js";
import { summarise } from "./stats.js";

/** Options of {@link measureThroughput}. */
export interface ThroughputOptions {
  /** Makes client `i` (its own coordinator, and its own backend connection if the caller wants). */
  readonly client: (i: number) => Coordinator;
  /** Closes whatever `client` opened besides the coordinators. */
  readonly cleanup?: () => Promise<void>;
  /** Clients. Default 16. */
  readonly clients?: number;
  /** Lock names drawn from. Default 1,000. */
  readonly keys?: number;
  /** Measuring time. Default 5 s. */
  readonly durationMs?: number;
  /** Lock-name prefix. */
  readonly prefix: string;
  /** How the clients connect, for the notes. */
  readonly connections: string;
}

/**
 * Throughput: `clients` coordinators each loop acquire (waiting, on a key drawn at random from
 * `keys`) + release for `durationMs`. Locks per second over all clients and the latency of one
 * acquire + release (which includes waiting when two clients drew the same key).
 */
export async function measureThroughput(options: ThroughputOptions): Promise<LatencySection> {
  const clients = options.clients ?? 16;
  const keys = options.keys ?? 1_000;
  const durationMs = options.durationMs ?? 5_000;
  const coordinators = Array.from({ length: clients }, (_, i) => options.client(i));
  const samples: number[] = [];
  let elapsed = 0;
  try {
    // Open every session (and warm every connection) before the clock starts.
    await Promise.all(
      coordinators.map(async (c, i) => (await c.acquire(`${options.prefix}/warm-${i}`)).release()),
    );
    const started = performance.now();
    const until = started + durationMs;
    await Promise.all(
      coordinators.map(async (c) => {
        while (performance.now() < until) {
          const key = `${options.prefix}/k${Math.floor(Math.random() * keys)}`;
          const s = performance.now();
          const lock = await c.acquire(key, { waitMs: 30_000 });
          await lock.release();
          samples.push(performance.now() - s);
        }
      }),
    );
    elapsed = performance.now() - started;
  } finally {
    await Promise.allSettled(coordinators.map((c) => c.close()));
    await options.cleanup?.();
  }
  return {
    figure: "throughput",
    title: `throughput, ${clients} clients over ${keys} keys for ${durationMs / 1000} s`,
    opsLabel: "locks/s",
    rows: [
      row("baton coordinator acquire (wait)+release", "coordinator", summarise(samples, elapsed)),
    ],
    notes: [
      `each client: its own coordinator (its own session); ${options.connections}`,
      "a key is drawn at random per lock; p50/p99 are of one acquire + release, waits for a taken key included",
    ],
  };
}
