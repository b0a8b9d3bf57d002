import { freePorts } from "@baton/conformance/harness";
import { BackendUnavailableError } from "@baton/core";
import { describe, expect, it } from "vitest";
import { RedisBackend, RedlockBackend } from "../src/index.js";

describe("Redis errors name where they could not connect, never a credential", () => {
  it("redis: a refused connection names host and port", async () => {
    const [port] = await freePorts(1);
    const backend = new RedisBackend({
      url: `redis://app:s3cret@127.0.0.1:${port}`,
      commandTimeoutMs: 500,
    });
    try {
      const error = await backend.openSession({ ttlMs: 1_000, ownerId: "o" }).then(
        () => expect.unreachable("opened a session on a closed port"),
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(BackendUnavailableError);
      expect((error as Error).message).toContain(`redis at 127.0.0.1:${port}`);
      expect((error as Error).message).not.toContain("s3cret");
    } finally {
      await backend.close();
    }
  });

  it("redlock: a missing quorum lists every node that could not be reached", async () => {
    const ports = await freePorts(3);
    const backend = new RedlockBackend({
      url: `redlock://${ports.map((p) => `127.0.0.1:${p}`).join(",")}`,
      nodeTimeoutMs: 500,
    });
    try {
      const error = await backend.openSession({ ttlMs: 1_000, ownerId: "o" }).then(
        () => expect.unreachable("opened a session on closed ports"),
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(BackendUnavailableError);
      const message = (error as Error).message;
      expect(message).toContain("fewer than 2 of 3 nodes");
      // A quorum is lost after 2 failures: both are named.
      expect(ports.filter((p) => message.includes(`127.0.0.1:${p}`)).length).toBeGreaterThanOrEqual(
        2,
      );
      expect(message).toMatch(/check that Redis runs at each address/);
    } finally {
      await backend.close();
    }
  });
});
