import { ConfigError, createCoordinator } from "@baton/core";
import { describe, expect, it } from "vitest";
import { usageFromConfig } from "../src/args.js";
import { EXIT } from "../src/exit-codes.js";
import { runMain } from "./support/run-main.js";

describe("CLI errors name the flag the user typed, not the library's field", () => {
  it("baton lock --ttl 2500 on etcd names --ttl, not ttlMs, and exits with the usage code", async () => {
    // etcd leases are whole seconds: refused when the session opens, before any lock.
    const { code, err } = await runMain([
      "lock",
      "jobs",
      "--backend",
      "etcd://127.0.0.1:1",
      "--ttl",
      "2500",
      "--",
      "true",
    ]);
    expect(code).toBe(EXIT.usage);
    expect(err).toContain("--ttl");
    expect(err).toContain("multiple of 1000");
    expect(err).not.toContain("ttlMs");
  });

  it("a misspelt backend URL option is a usage error naming --backend and the option", async () => {
    const { code, err } = await runMain([
      "lock",
      "jobs",
      "--backend",
      "redis://127.0.0.1:1?prefx=jobs",
      "--",
      "true",
    ]);
    expect(code).toBe(EXIT.usage);
    expect(err).toContain("--backend");
    expect(err).toContain("prefx");
    expect(err).not.toMatch(/ConfigError|at .*\.ts/); // a message, not a stack trace
  });

  it("a count is not called milliseconds; a duration is", async () => {
    const coordinator = createCoordinator({ url: "memory://counts" });
    try {
      let permits: unknown;
      try {
        coordinator.semaphore("exports", { permits: 0 });
      } catch (error) {
        permits = error;
      }
      expect(permits).toBeInstanceOf(ConfigError);
      expect((permits as ConfigError).message).toContain(
        "permits: must be an integer between 1 and",
      );
      expect((permits as ConfigError).message).not.toContain("milliseconds");
      expect((permits as ConfigError).message).toContain("got 0");
    } finally {
      await coordinator.close();
    }
    expect(() => createCoordinator({ url: "memory://counts", ttlMs: 1 })).toThrow(
      /ttlMs: must be an integer between \d+ and \d+ \(milliseconds\), got 1/,
    );
  });

  it("usageFromConfig maps every library field a flag sets, and keeps others as they are", () => {
    expect(usageFromConfig(new ConfigError("ttlMs", "must be at least 10")).message).toBe(
      "--ttl: must be at least 10",
    );
    expect(usageFromConfig(new ConfigError("waitMs", "too long")).message).toBe("--wait: too long");
    expect(usageFromConfig(new ConfigError("url", "bad")).message).toBe("--backend: bad");
    expect(usageFromConfig(new ConfigError("privileges", "no")).message).toBe("privileges: no");
  });
});
