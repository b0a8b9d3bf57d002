import { describeBackend } from "@baton/conformance/harness";
import { ConfigError, createBackend, createCoordinator } from "@baton/core";
import { expect, it } from "vitest";
import "../src/index.js";

describeBackend("etcd", (url) => {
  it("a lock's own ttlMs is a lease of whole seconds, like the coordinator's; others are a ConfigError", async () => {
    const backend = await createBackend(url);
    const coordinator = createCoordinator({ backend, ttlMs: 2_000 });
    try {
      const error = await coordinator
        .acquire("lock-ttl/odd", { ttlMs: 2_500 })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).field).toBe("ttlMs");
      const asked = performance.now();
      const lock = await coordinator.acquire("lock-ttl/odd", { ttlMs: 3_000 });
      const tookMs = performance.now() - asked;
      expect(lock.ttlMs).toBe(3_000);
      // A 3 s lease less the time the acquire took (and the drift allowance): a 2 s lease,
      // the coordinator's, could not leave that much, however slow the machine.
      expect(lock.remainingMs()).toBeGreaterThan(3_000 - tookMs - 100);
    } finally {
      await coordinator.close();
      await backend.close();
    }
  });
});
