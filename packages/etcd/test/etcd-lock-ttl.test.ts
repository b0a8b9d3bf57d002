import { describeBackend } from "@baton/conformance/harness";
import { ConfigError, createBackend, createCoordinator } from "@baton/core";
import { describe, expect, it } from "vitest";
import { EtcdBackend } from "../src/index.js";

describe("etcd lease lengths at createCoordinator (no server)", () => {
  it("a ttlMs etcd cannot grant is a ConfigError naming ttlMs when the coordinator is created", async () => {
    const backend = new EtcdBackend({ hosts: ["127.0.0.1:1"] });
    try {
      for (const ttlMs of [2_500, 1_000, 800]) {
        for (const options of [{ backend }, { url: "etcd://127.0.0.1:1" }]) {
          let error: unknown;
          try {
            createCoordinator({ ...options, ttlMs });
          } catch (e) {
            error = e;
          }
          expect(error, `${ttlMs} ${Object.keys(options)[0]}`).toBeInstanceOf(ConfigError);
          expect((error as ConfigError).field).toBe("ttlMs");
          expect((error as ConfigError).message).toMatch(
            /etcd backend grants leases in steps of 1000 ms, at least 2000 ms/,
          );
        }
      }
      // Whole seconds of at least 2 s pass, and so does the default.
      const fine = createCoordinator({ backend, ttlMs: 2_000 });
      const byUrl = createCoordinator({ url: "etcd://127.0.0.1:1" });
      expect([fine.ttlMs, byUrl.ttlMs]).toEqual([2_000, 15_000]);
      await Promise.all([fine.close(), byUrl.close()]);
    } finally {
      await backend.close();
    }
  });
});

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
