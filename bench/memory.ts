/**
 * `npm run bench -- memory`: the permit figures of the in-process memory backend (what core
 * and the memory store cost, with no store round trips to hide them):
 *
 * 1. Uncontended permit acquire + release: the adapter's session alone and the coordinator's
 *    semaphore, interleaved, with a lock's acquire + release on the same coordinator as a
 *    reference (there is no raw client, so no floor).
 * 2. Permit handoff to the next of 8 waiters.
 * 3. 10,000 permits held by one coordinator: keepAlive() calls per interval, CPU and memory.
 *
 * The lock figures are not measured here: the other backends' benches measure them against
 * their stores.
 */
import { MemoryBackend } from "@baton/core";
import { BackendRun, runPermitSteps, SCALE } from "./lib/backend-run.js";
import { measureBackendHeldLocks, scaledLocks } from "./lib/held-locks.js";
import { selected } from "./lib/only.js";
import type { PermitBench } from "./lib/permits.js";
import type { BackendResult } from "./lib/results.js";
import { measureService, type ServiceBench } from "./lib/service.js";
import { benchCoordinator } from "./lib/telemetry.js";
import { measureWatchScale } from "./lib/watch-scale.js";

const TTL_MS = 15_000;
/** One named store, so the handoff's coordinators (each its own backend) share it. */
const URL = "memory://bench";

const PERMITS: PermitBench = {
  noFloor: "an in-process store has no round trips, so no raw client to compare with",
  uncontended: async () => {
    const coordinator = benchCoordinator({ url: URL, ttlMs: TTL_MS, ownerId: "bench-lock" });
    return {
      floor: [
        {
          name: "baton coordinator lock acquire+release",
          role: "reference",
          op: async () => {
            const lock = await coordinator.acquire("bench-lock");
            await lock.release();
          },
        },
      ],
      notes: ["the reference row is a lock on a coordinator of its own: what a permit adds to it"],
      close: () => coordinator.close(),
    };
  },
  rounds: { warmup: 2_000, rounds: 30, perRound: 400, maxMs: 30_000 },
  handoffs: 300,
  ttlMs: TTL_MS,
};

export async function run(): Promise<BackendResult> {
  const out = new BackendRun("memory");
  out.server = "in process (memory://), no server";
  out.scope = "permits";
  if (selected("service")) {
    const sections = await out.step("service", () => measureService(serviceBench()));
    for (const section of sections ?? []) out.add(section);
  }
  if (selected("scale")) {
    const held = await out.step("scale: held locks", () =>
      measureBackendHeldLocks(new MemoryBackend(), {
        items: scaledLocks({ ...SCALE, ttlMs: 6_000, probes: 200 }),
        notes: [
          "counted client side: the memory store has no requests of its own",
          "no many-waiters figures: a memory store lives in one process",
        ],
      }),
    );
    if (held) out.addHeldScale(held);
    const watched = await out.step("scale: watched names", () =>
      measureWatchScale({ url: URL, ttlMs: TTL_MS, names: SCALE.watched, prefix: "bench-watch" }),
    );
    if (watched) out.addWatched(watched);
  }
  if (selected("permits")) {
    await runPermitSteps(out, {
      permits: PERMITS,
      url: URL,
      clientUrl: URL,
      group: undefined,
      held: (items) =>
        measureBackendHeldLocks(new MemoryBackend(), {
          items,
          notes: ["counted client side: the memory store has no requests of its own"],
        }),
    });
  }
  return out.result();
}

/**
 * The service pattern on the memory backend: one coordinator, no floor (an in-process store
 * has no round trips): what core and the adapter cost per lock under C concurrent callers.
 */
export function serviceBench(): ServiceBench {
  return {
    variants: [
      {
        name: "baton coordinator",
        role: "coordinator",
        open: async () => {
          const coordinator = benchCoordinator({
            url: "memory://bench-service",
            ttlMs: TTL_MS,
            ownerId: "bench-service",
          });
          return {
            op: async (key, signal) => {
              const lock = await coordinator.acquire(key.name, { waitMs: 60_000, signal });
              await lock.release();
            },
            close: () => coordinator.close(),
          };
        },
      },
    ],
    notes: ["one coordinator on an in-process store: no floor to compare with"],
  };
}
