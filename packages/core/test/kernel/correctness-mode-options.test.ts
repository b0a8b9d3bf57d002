import { describe, expect, it } from "vitest";
import { ConfigError, createCoordinator, MemoryFence, registerBackend } from "../../src/index.js";
import { configErrorOf, rejectionOf } from "../support/helpers.js";
import { ScriptedBackend } from "../support/scripted-backend.js";

const USE_INSTEAD = /Use etcd, zookeeper or postgres/;

describe("correctness mode refuses what cannot fence, before any I/O", () => {
  it("without a fence is a ConfigError(fence)", () => {
    const backend = new ScriptedBackend();
    const error = configErrorOf({ backend, mode: "correctness" });
    expect(error.field).toBe("fence");
    expect(error.message).toMatch(/correctness mode needs a fence/);
    expect(backend.calls.openSession).toBe(0);
  });

  it('a backend with "single-node" fencing is a ConfigError(mode) saying why', () => {
    const backend = new ScriptedBackend({ kind: "redis", fencing: "single-node" });
    const error = configErrorOf({ backend, mode: "correctness", fence: new MemoryFence() });
    expect(error.field).toBe("mode");
    expect(error.message).toMatch(/refuses the redis backend/);
    expect(error.message).toMatch(/one node/);
    expect(error.message).toMatch(USE_INSTEAD);
    expect(backend.calls.openSession).toBe(0);
  });

  it('a backend with "none" fencing is a ConfigError(mode) saying why', () => {
    const backend = new ScriptedBackend({ kind: "redlock", fencing: "none" });
    const error = configErrorOf({ backend, mode: "correctness", fence: new MemoryFence() });
    expect(error.field).toBe("mode");
    expect(error.message).toMatch(/refuses the redlock backend/);
    expect(error.message).toMatch(/no ordered fencing token/);
    expect(error.message).toMatch(USE_INSTEAD);
  });

  it("a registered scheme whose guarantees have no ordered tokens is refused at createCoordinator", () => {
    const backend = new ScriptedBackend({ kind: "weaknode", fencing: "single-node" });
    registerBackend("weaknode", () => backend, { guarantees: backend.guarantees });
    const error = configErrorOf({
      url: "weaknode://h1:1,h2:2",
      mode: "correctness",
      fence: new MemoryFence(),
    });
    expect(error.field).toBe("mode");
    expect(error.message).toMatch(/refuses the weaknode backend/);
    expect(error.message).toMatch(USE_INSTEAD);
    expect(backend.calls.openSession).toBe(0);
  });

  it("the same backends are accepted in efficiency mode", () => {
    const backend = new ScriptedBackend({ kind: "redis", fencing: "single-node" });
    expect(createCoordinator({ backend }).mode).toBe("efficiency");
    expect(() => createCoordinator({ url: "redis://127.0.0.1:6379" })).not.toThrow();
  });

  it("monotonic backends and URLs are accepted with a fence", () => {
    const fence = new MemoryFence();
    expect(
      createCoordinator({ backend: new ScriptedBackend(), mode: "correctness", fence }).mode,
    ).toBe("correctness");
    for (const url of ["etcd://a:2379", "zookeeper://a:2181/x", "postgres://db/app", "memory://"]) {
      expect(createCoordinator({ url, mode: "correctness", fence }).mode).toBe("correctness");
    }
  });

  it("a third-party scheme without fencing is refused on first acquire, before a session opens", async () => {
    const backend = new ScriptedBackend({ kind: "weakstore", fencing: "none" });
    registerBackend("weakstore", () => backend);
    const coordinator = createCoordinator({
      url: "weakstore://somewhere",
      mode: "correctness",
      fence: new MemoryFence(),
    });
    const error = await rejectionOf(coordinator.acquire("jobs", { waitMs: 0 }));
    expect(error).toBeInstanceOf(ConfigError);
    expect(error).toMatchObject({ field: "mode" });
    expect(backend.calls.openSession).toBe(0);
  });
});
