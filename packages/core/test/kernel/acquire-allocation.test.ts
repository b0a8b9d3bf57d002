import { Session } from "node:inspector/promises";
import { describe, expect, it } from "vitest";
import type { Grant } from "../../src/index.js";
import { createCoordinator, MemoryBackend } from "../../src/index.js";

/** A node of V8's sampling heap profile. */
interface SampleNode {
  readonly selfSize: number;
  readonly children: readonly SampleNode[];
}

function totalBytes(node: SampleNode): number {
  let bytes = node.selfSize;
  for (const child of node.children) bytes += totalBytes(child);
  return bytes;
}

const CALLERS = 256;
const PAIRS = 8_000;

/** Bytes allocated per call of `op`, by `CALLERS` concurrent callers, each on a name of its own. */
async function bytesPerPair(op: (name: string) => Promise<void>): Promise<number> {
  const pairs = async (n: number) => {
    await Promise.all(
      Array.from({ length: CALLERS }, async (_, caller) => {
        for (let i = caller; i < n; i += CALLERS) await op(`alloc-${caller}`);
      }),
    );
  };
  await pairs(20_000); // compiled and warm
  const inspector = new Session();
  inspector.connect();
  try {
    await inspector.post("HeapProfiler.enable");
    await inspector.post("HeapProfiler.startSampling", {
      samplingInterval: 128,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    } as { samplingInterval: number });
    await pairs(PAIRS);
    const { profile } = (await inspector.post("HeapProfiler.stopSampling")) as {
      profile: { head: SampleNode };
    };
    return totalBytes(profile.head) / PAIRS;
  } finally {
    inspector.disconnect();
  }
}

describe("acquire + release allocation", () => {
  // Many callers of one service acquire and release at once: whatever each lock allocates
  // while its calls are in flight is copied by every young-generation collection, so a
  // lock's garbage is client CPU at high concurrency. Core's share is what a coordinator's
  // acquire + release allocates beyond the same pair on the backend's own session. The
  // callers pass a signal (a service's shutdown signal), as services do.
  it("an acquire + release of a free lock allocates under 3.4 KB in core with 256 callers", async () => {
    const signal = new AbortController().signal;
    const backend = new MemoryBackend();
    const session = await backend.openSession({ ttlMs: 15_000, ownerId: "alloc-bare" });
    const bare = await bytesPerPair(async (name) => {
      const grant = await session.acquire(name, { wait: true, signal });
      expect(await session.release(grant as Grant)).toBe(true);
    });
    await session.close();
    const coordinator = createCoordinator({ backend, ttlMs: 15_000, ownerId: "alloc" });
    try {
      const whole = await bytesPerPair(async (name) => {
        const lock = await coordinator.acquire(name, { waitMs: 10_000, signal });
        expect(await lock.release()).toBe(true);
      });
      expect(bare).toBeGreaterThan(0);
      expect(whole - bare).toBeLessThan(3_400);
    } finally {
      await coordinator.close();
    }
  }, 60_000);
});
