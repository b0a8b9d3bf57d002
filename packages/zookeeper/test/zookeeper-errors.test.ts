import { freePorts } from "@baton/conformance/harness";
import { BackendUnavailableError } from "@baton/core";
import { describe, expect, it } from "vitest";
import { ZookeeperBackend } from "../src/index.js";

describe("ZooKeeper errors say what failed, where, and what to do", () => {
  it("an ensemble that refuses connections: members named, the last socket error as cause, the time really spent", async () => {
    const ports = await freePorts(2); // nothing listens on them
    const backend = new ZookeeperBackend({
      hosts: ports.map((p) => `127.0.0.1:${p}`),
      connectTimeoutMs: 600,
    });
    try {
      const started = performance.now();
      const error = await backend.openSession({ ttlMs: 2_000, ownerId: "o" }).then(
        () => expect.unreachable("opened a session on closed ports"),
        (e: unknown) => e,
      );
      const elapsed = performance.now() - started;
      expect(error).toBeInstanceOf(BackendUnavailableError);
      const message = (error as Error).message;
      for (const p of ports) expect(message).toContain(`127.0.0.1:${p}`);
      expect(message).toMatch(/check that ZooKeeper runs there/);
      expect((error as Error).cause).toMatchObject({ code: "ECONNREFUSED" });
      // The duration it reports is the one it took.
      const said = Number(/within (\d+) ms/.exec(message)?.[1]);
      expect(Math.abs(said - elapsed)).toBeLessThan(1_000);
    } finally {
      await backend.close();
    }
  });

  it("the default connect bound is below core's 5 s bound on opening a session", async () => {
    const [port] = await freePorts(1);
    const backend = new ZookeeperBackend({ hosts: [`127.0.0.1:${port}`] });
    try {
      const error = await backend.openSession({ ttlMs: 2_000, ownerId: "o" }).then(
        () => expect.unreachable("opened a session on a closed port"),
        (e: unknown) => e,
      );
      expect((error as Error).message).toContain(`127.0.0.1:${port}`);
      expect(Number(/within (\d+) ms/.exec((error as Error).message)?.[1])).toBeLessThan(5_000);
    } finally {
      await backend.close();
    }
  }, 15_000);
});
