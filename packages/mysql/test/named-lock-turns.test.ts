import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import { type Coordinator, createCoordinator } from "@baton/core";
import { afterEach, describe, expect, it } from "vitest";
import { MysqlBackend } from "../src/index.js";

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describeBackend("mysql", (url) => {
  describe("mysql named-lock turns", () => {
    const coordinators: Coordinator[] = [];
    /** A coordinator on a backend of its own (as if in a process of its own). */
    const separate = () => {
      const c = createCoordinator({ backend: new MysqlBackend({ url }), ttlMs: 15_000 });
      coordinators.push(c);
      return c;
    };
    afterEach(async () => {
      await Promise.allSettled(coordinators.splice(0).map((c) => c.close()));
    });

    it("two processes taking turns at one name hand it over in milliseconds, each getting its share", async () => {
      const name = `turns-${randomUUID()}`;
      const pair = [separate(), separate()];
      const grants = [0, 0];
      const until = performance.now() + 4_000;
      await Promise.all(
        pair.map(async (c, i) => {
          while (performance.now() < until) {
            const lock = await c.acquire(name, { waitMs: 10_000 });
            grants[i] = (grants[i] as number) + 1;
            await delay(2);
            await lock.release();
            await delay(1);
          }
        }),
      );
      // A waiter here waits in the server and is woken at the release: a coordinator that asks
      // again holds off a few ms, not a poll's window (250 ms at this TTL, about 8 grants/s).
      const [first = 0, second = 0] = grants;
      const total = first + second;
      expect(total).toBeGreaterThan(60);
      expect(Math.min(first, second)).toBeGreaterThan(total / 4);
    });
  });
});
