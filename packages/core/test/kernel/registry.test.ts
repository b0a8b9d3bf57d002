import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import {
  type BackendUrl,
  ConfigError,
  type Coordinator,
  createBackend,
  createCoordinator,
  MemoryBackend,
  registerBackend,
} from "../../src/index.js";
import { ScriptedBackend } from "../support/scripted-backend.js";

const open: Coordinator[] = [];
function coordinatorFor(url: string): Coordinator {
  const coordinator = createCoordinator({ url, ttlMs: 60_000 });
  open.push(coordinator);
  return coordinator;
}
afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.close()));
});

describe("backends by URL", () => {
  it("memory:// gives each coordinator a private store", async () => {
    const a = coordinatorFor("memory://");
    const b = coordinatorFor("memory://");
    const lockA = await a.acquire("jobs", { waitMs: 0 });
    const lockB = await b.acquire("jobs", { waitMs: 0 });
    expect([lockA.held, lockB.held]).toEqual([true, true]);
    expect((await a.backend()).kind).toBe("memory");
  });

  it("memory://NAME shares locks between coordinators of this process", async () => {
    const name = `shared-${randomUUID().slice(0, 8)}`;
    const a = coordinatorFor(`memory://${name}`);
    const b = coordinatorFor(`memory://${name}`);
    const c = coordinatorFor(`memory://other-${name}`);
    const held = await a.acquire("jobs", { waitMs: 0 });
    expect(await b.tryAcquire("jobs")).toBeNull();
    expect((await b.holder("jobs"))?.ownerId).toBe(a.ownerId);
    expect(await c.tryAcquire("jobs")).not.toBeNull();
    await held.release();
    expect(await b.tryAcquire("jobs")).not.toBeNull();
  });

  it("memory:// refuses a query parameter (a typo is not silently ignored)", async () => {
    await expect(createBackend("memory://jobs?prefx=a")).rejects.toThrow(
      /memory:\/\/ takes no parameters, got "\?prefx="/,
    );
    await expect(createBackend("memory://jobs?prefx=a")).rejects.toBeInstanceOf(ConfigError);
  });

  it("createBackend('memory://') builds a MemoryBackend", async () => {
    const backend = await createBackend("memory://");
    expect(backend).toBeInstanceOf(MemoryBackend);
    expect(backend.guarantees.fencing).toBe("monotonic");
    await backend.close();
  });

  it("registerBackend adds a scheme createCoordinator({ url }) can use", async () => {
    const seen: BackendUrl[] = [];
    const backend = new ScriptedBackend({ kind: "acme" });
    registerBackend("acme", (url) => {
      seen.push(url);
      return backend;
    });
    const coordinator = coordinatorFor("acme://cluster-a:7000/locks");
    expect(seen).toEqual([]); // nothing is built before first use
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    expect(lock.held).toBe(true);
    expect(seen).toHaveLength(1);
    expect(seen[0]?.hosts).toEqual([{ host: "cluster-a", port: 7000 }]);
    expect(seen[0]?.pathname).toBe("/locks");
    expect(backend.calls.openSession).toBe(1);
    // A backend built from a URL belongs to the coordinator: close() closes it.
    await coordinator.close();
    expect(backend.closed).toBe(true);
  });

  it("an async factory works, and a later registration replaces an earlier one", async () => {
    const first = new ScriptedBackend({ kind: "first" });
    const second = new ScriptedBackend({ kind: "second" });
    registerBackend("swap", async () => first);
    registerBackend("swap", async () => second);
    expect((await createBackend("swap://x")).kind).toBe("second");
  });

  it("registerBackend refuses a scheme that is not a lower-case URL scheme without ':'", () => {
    for (const scheme of ["", "Acme", "acme:", "acme://", "1acme", "ac me", "acme/x"]) {
      let thrown: unknown;
      try {
        registerBackend(scheme, () => new ScriptedBackend());
      } catch (error) {
        thrown = error;
      }
      expect(thrown, scheme).toBeInstanceOf(ConfigError);
      expect(thrown).toMatchObject({ field: "scheme" });
    }
  });
});
