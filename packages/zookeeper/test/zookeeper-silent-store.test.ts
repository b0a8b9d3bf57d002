import { SilentListener, settleTime } from "@baton/conformance/faults";
import { BackendUnavailableError, createCoordinator } from "@baton/core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ZookeeperBackend } from "../src/index.js";

/** A generous bound for close(): it must not wait on a store that never answers. */
const CLOSE_BOUND_MS = 5_000;

describe("zookeeper against a store that accepts connections and never answers", () => {
  let silent: SilentListener;
  beforeEach(async () => {
    silent = await SilentListener.start();
  });
  afterEach(async () => {
    await silent.close();
  });

  it("an acquire fails naming the member; coordinator.close() settles soon after, no socket left", async () => {
    const coordinator = createCoordinator({
      url: `zookeeper://127.0.0.1:${silent.port}`,
      ttlMs: 2_000,
    });
    const error = await coordinator.acquire("job", { waitMs: 30_000 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(BackendUnavailableError);
    expect((error as Error).message).toContain(`127.0.0.1:${silent.port}`);
    expect(await settleTime(coordinator.close(), 20_000)).toBeLessThan(CLOSE_BOUND_MS);
    await silent.until((s) => s.open === 0);
  }, 60_000);

  it("backend.close() settles while a session is still opening, and the open fails", async () => {
    const backend = new ZookeeperBackend({
      hosts: [`127.0.0.1:${silent.port}`],
      connectTimeoutMs: 60_000,
    });
    const opening = backend.openSession({ ttlMs: 2_000, ownerId: "silent" });
    opening.catch(() => undefined);
    await silent.until((s) => s.accepted > 0);
    expect(await settleTime(backend.close(), 20_000)).toBeLessThan(CLOSE_BOUND_MS);
    expect(await settleTime(opening, 20_000)).toBeLessThan(CLOSE_BOUND_MS);
    await expect(opening).rejects.toBeInstanceOf(BackendUnavailableError);
    await silent.until((s) => s.open === 0);
  }, 60_000);
});
