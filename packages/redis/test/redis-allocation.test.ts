import { randomUUID } from "node:crypto";
import { Session } from "node:inspector/promises";
import { describeBackend } from "@baton/conformance/harness";
import type { Grant } from "@baton/core";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisBackend } from "../src/index.js";

const never = new AbortController().signal;

/** A node of V8's sampling heap profile. */
interface SampleNode {
  readonly callFrame: { readonly url: string };
  readonly selfSize: number;
  readonly children: readonly SampleNode[];
}

/** Bytes allocated under a frame of the session's own file (what it and its calls allocate). */
function sessionBytes(node: SampleNode, under = false): number {
  const inSession = under || node.callFrame.url.endsWith("/redis-session.ts");
  let bytes = inSession ? node.selfSize : 0;
  for (const child of node.children) bytes += sessionBytes(child, inSession);
  return bytes;
}

describeBackend("redis", (url) => {
  describe("redis session allocation", () => {
    let client: Redis;
    let backend: RedisBackend;

    beforeAll(async () => {
      client = new Redis(url);
      backend = new RedisBackend({ client, keyPrefix: `t-${randomUUID().slice(0, 8)}:` });
    });
    afterAll(async () => {
      await backend.close();
      client.disconnect();
    });

    // Many callers of one service acquire and release at once: whatever each lock allocates
    // while its calls are in flight is copied by every young-generation collection, so a
    // lock's garbage is client CPU at high concurrency.
    it("an acquire + release of a free lock allocates under 10.5 KB in the session and its client calls", async () => {
      const session = await backend.openSession({ ttlMs: 10_000, ownerId: "alloc" });
      const pairs = async (n: number) => {
        await Promise.all(
          Array.from({ length: 32 }, async (_, caller) => {
            for (let i = caller; i < n; i += 32) {
              const grant = await session.acquire(`alloc-${caller}`, { wait: true, signal: never });
              expect(await session.release(grant as Grant)).toBe(true);
            }
          }),
        );
      };
      await pairs(2_000); // compiled and warm
      const inspector = new Session();
      inspector.connect();
      try {
        await inspector.post("HeapProfiler.enable");
        await inspector.post("HeapProfiler.startSampling", {
          samplingInterval: 128,
          includeObjectsCollectedByMajorGC: true,
          includeObjectsCollectedByMinorGC: true,
        } as { samplingInterval: number });
        const n = 4_000;
        await pairs(n);
        const { profile } = (await inspector.post("HeapProfiler.stopSampling")) as {
          profile: { head: SampleNode };
        };
        const perPair = sessionBytes(profile.head) / n;
        expect(perPair).toBeGreaterThan(0);
        expect(perPair).toBeLessThan(10_500);
      } finally {
        inspector.disconnect();
        await session.close();
      }
    }, 60_000);
  });
});
