import { describe, expect, it } from "vitest";
import {
  BackendUnavailableError,
  createCoordinator,
  type Fence,
  LockTimeoutError,
  ManualClock,
  MemoryFence,
  sleep,
} from "../../src/index.js";
import { expectError, failOnUnhandledRejections, flush, track } from "../support/helpers.js";
import { ScriptedBackend } from "../support/scripted-backend.js";

failOnUnhandledRejections();

const TTL = 1_000;

function correctness(fence: Fence) {
  const clock = new ManualClock();
  const backend = new ScriptedBackend({ clock });
  const coordinator = createCoordinator({
    backend,
    clock,
    ttlMs: TTL,
    mode: "correctness",
    fence,
  });
  return { clock, backend, coordinator };
}

describe("the fence raise has its own bound, not what is left of the wait", () => {
  it("a grant 1 ms before the wait runs out, with a fence that answers in 3 ms, is handed over", async () => {
    const memory = new MemoryFence();
    const clock = new ManualClock();
    const fence: Fence = {
      raise: async (resource, token) => {
        await sleep(clock, 3);
        await memory.raise(resource, token);
      },
    };
    const backend = new ScriptedBackend({ clock });
    const coordinator = createCoordinator({
      backend,
      clock,
      ttlMs: TTL,
      mode: "correctness",
      fence,
    });
    backend.hooks.acquire = async (_key, _options, next) => {
      await sleep(clock, 7_999);
      return await next();
    };
    const pending = track(coordinator.acquire("invoices", { waitMs: 8_000 }));
    await clock.advance(7_999);
    await flush();
    await clock.advance(3);
    await flush();
    expect(pending.status).toBe("fulfilled");
    expect(pending.value?.held).toBe(true);
    expect(memory.highest("invoices")).toBe(pending.value?.token);
  });

  it("a fence that never answers fails after one TTL, saying the fence ran out, even with a long wait left", async () => {
    const fence: Fence = { raise: () => new Promise(() => undefined) };
    const { clock, coordinator } = correctness(fence);
    const pending = track(coordinator.acquire("invoices", { waitMs: 60_000 }));
    await flush();
    await clock.advance(TTL - 1);
    expect(pending.status).toBe("pending");
    await clock.advance(1);
    await flush();
    const error = expectError(pending.error, BackendUnavailableError);
    expect(error.message).toContain("fence");
    expect(error.message).toContain(`${TTL} ms`);
    expect(error.message).not.toContain("60000");
    expect(await coordinator.holder("invoices")).toBeNull();
  });

  it("a raise that ran out while this process was paused says so instead of blaming the fence's store", async () => {
    const fence: Fence = { raise: () => new Promise(() => undefined) };
    const { clock, coordinator } = correctness(fence);
    const pending = track(coordinator.acquire("invoices", { waitMs: 60_000 }));
    await flush();
    clock.jump(3 * TTL); // the process was stopped for three TTLs during the raise
    await clock.advance(0);
    await flush();
    const error = expectError(pending.error, BackendUnavailableError);
    expect(error.message).toContain("fence did not answer");
    expect(error.message).toMatch(/this process was paused for \d+ ms/);
    expect(error.message).not.toContain("check that the fence's store is reachable");
  });

  it("a raise that ran out without a pause still points at the fence's store", async () => {
    const fence: Fence = { raise: () => new Promise(() => undefined) };
    const { clock, coordinator } = correctness(fence);
    const pending = track(coordinator.acquire("invoices", { waitMs: 60_000 }));
    await flush();
    await clock.advance(TTL);
    await flush();
    const error = expectError(pending.error, BackendUnavailableError);
    expect(error.message).toContain("check that the fence's store is reachable");
    expect(error.message).not.toContain("paused");
  });

  it("a grant at the end of the wait whose fence is slow fails as the fence, never as a wait that ran out", async () => {
    const fence: Fence = { raise: () => new Promise(() => undefined) };
    const { clock, backend, coordinator } = correctness(fence);
    backend.hooks.acquire = async (_key, _options, next) => {
      await sleep(clock, 1_999);
      return await next();
    };
    const pending = track(coordinator.acquire("invoices", { waitMs: 2_000 }));
    await clock.advance(1_999);
    await flush();
    await clock.advance(1); // the wait runs out while the fence is raised: not the fence's fault
    await flush();
    expect(pending.status).toBe("pending");
    await clock.advance(TTL);
    await flush();
    expect(pending.error).toBeInstanceOf(BackendUnavailableError);
    expect(pending.error).not.toBeInstanceOf(LockTimeoutError);
    expect((pending.error as Error).message).toContain(`within ${TTL} ms`);
  });
});
