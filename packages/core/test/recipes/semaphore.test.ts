import { describe, expect, it } from "vitest";
import {
  type BackendPermitOptions,
  ConfigError,
  type Coordinator,
  createCoordinator,
  type Grant,
  LockHeldError,
  LockTimeoutError,
  ManualClock,
  MemoryBackend,
  MemoryFence,
  Permit,
  PermitLimitError,
} from "../../src/index.js";
import { ScriptedBackend } from "../support/scripted-backend.js";
import { wrappedMemory } from "../support/wrapped-memory.js";

/** Two coordinators on one memory store, as two processes would be. */
function coordinators(): [Coordinator, Coordinator] {
  const backend = new MemoryBackend();
  return [
    createCoordinator({ backend, ttlMs: 5_000, ownerId: "c0" }),
    createCoordinator({ backend, ttlMs: 5_000, ownerId: "c1" }),
  ];
}

describe("semaphores on the memory backend", () => {
  it("hands out at most `permits` at once, the rest wait their turn in order", async () => {
    const [a, b] = coordinators();
    const sem = a.semaphore("exports", { permits: 2 });
    const p1 = await sem.acquire();
    const p2 = await b.semaphore("exports", { permits: 2 }).acquire();
    expect(p1).toBeInstanceOf(Permit);
    expect(p2.token).toBeGreaterThan(p1.token);
    expect(await sem.tryAcquire()).toBeNull();
    await expect(sem.acquire({ waitMs: 0 })).rejects.toBeInstanceOf(LockHeldError);
    const order: string[] = [];
    const third = sem.acquire({ waitMs: 5_000 }).then((p) => {
      order.push("third");
      return p;
    });
    const fourth = sem.acquire({ waitMs: 5_000 }).then((p) => {
      order.push("fourth");
      return p;
    });
    await p1.release();
    const p3 = await third;
    expect(order).toEqual(["third"]);
    await p2.release();
    const p4 = await fourth;
    expect(order).toEqual(["third", "fourth"]);
    expect(p4.token).toBeGreaterThan(p3.token);
    expect((await sem.holders()).map((h) => h.token)).toEqual([p3.token, p4.token]);
    await p3.release();
    await p4.release();
    expect(await sem.holders()).toEqual([]);
    await a.close();
    await b.close();
  });

  it("does not let single permits overtake a waiting multi-permit request", async () => {
    const [a] = coordinators();
    const sem = a.semaphore("batch", { permits: 3 });
    const first = await sem.acquire();
    const big = sem.acquire({ permits: 3, waitMs: 5_000 });
    // One permit is free twice over, but the 3-permit request came first.
    expect(await sem.tryAcquire()).toBeNull();
    await first.release();
    const all = await big;
    expect(all.permits).toBe(3);
    await all.release();
    await a.close();
  });

  it("refuses a number of permits the store does not hold for the name", async () => {
    const [a, b] = coordinators();
    const held = await a.semaphore("jobs", { permits: 2 }).acquire();
    const error = await b
      .semaphore("jobs", { permits: 3 })
      .acquire()
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PermitLimitError);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as PermitLimitError).stored).toBe(2);
    await held.release();
    // Once nobody holds or waits, the new number is taken.
    const again = await b.semaphore("jobs", { permits: 3 }).acquire();
    await again.release();
    await a.close();
    await b.close();
  });

  it("checks its input before any I/O", async () => {
    const [a] = coordinators();
    expect(() => a.semaphore("x", { permits: 0 })).toThrow(ConfigError);
    expect(() => a.semaphore("x", { permits: 1_000_001 })).toThrow(ConfigError);
    expect(() => a.semaphore("", { permits: 1 })).toThrow(ConfigError);
    const sem = a.semaphore("x", { permits: 2 });
    await expect(sem.acquire({ permits: 3 })).rejects.toMatchObject({ field: "permits" });
    await expect(sem.acquire({ permits: 1.5 })).rejects.toMatchObject({ field: "permits" });
    await expect(sem.tryAcquire({ waitMs: 1 } as never)).rejects.toBeInstanceOf(ConfigError);
    await a.close();
  });

  it("frees a dead holder's permits when its lease runs out", async () => {
    const clock = new ManualClock();
    const backend = new MemoryBackend({ clock });
    const live = createCoordinator({ backend, ttlMs: 60_000, ownerId: "live", clock });
    // A holder that never renews: its process died.
    const dead = await backend.openSession({ ttlMs: 1_000, ownerId: "dead" });
    const held = await dead.acquirePermits?.("s", {
      limit: 1,
      permits: 1,
      mode: "permit",
      wait: false,
      signal: new AbortController().signal,
    });
    const waiting = live.semaphore("s", { permits: 1 }).acquire({ waitMs: 30_000 });
    await clock.advance(1_500);
    const got = await waiting;
    expect(got.token).toBeGreaterThan(held?.token ?? 0n);
    await live.close();
  });

  it("times out a wait that is not served", async () => {
    const [a] = coordinators();
    const sem = a.semaphore("t", { permits: 1 });
    const held = await sem.acquire();
    await expect(sem.acquire({ waitMs: 50 })).rejects.toBeInstanceOf(LockTimeoutError);
    // The timed-out wait left nothing behind.
    await held.release();
    const next = await sem.acquire({ waitMs: 0 });
    await next.release();
    await a.close();
  });
});

describe("read-write locks on the memory backend", () => {
  it("lets readers share, keeps a writer alone, and never starves a waiting writer", async () => {
    const [a, b] = coordinators();
    const rw = a.readWriteLock("catalog");
    const r1 = await rw.read();
    const r2 = await b.readWriteLock("catalog").read();
    expect(r1.token).toBe(0n);
    expect(r2.token).toBe(0n);
    const writer = rw.write({ waitMs: 5_000 });
    // A reader that comes after a waiting writer waits behind it.
    expect(await rw.tryRead()).toBeNull();
    await r1.release();
    await r2.release();
    const w = await writer;
    expect(w.mode).toBe("write");
    expect(w.token).toBeGreaterThan(0n);
    expect(await rw.tryRead()).toBeNull();
    expect(await rw.tryWrite()).toBeNull();
    await w.release();
    const r3 = await rw.read();
    expect(r3.token).toBe(w.token);
    await r3.release();
    await a.close();
    await b.close();
  });

  it("downgrades a write to a read with its token, letting queued readers in", async () => {
    const [a, b] = coordinators();
    const rw = a.readWriteLock("index");
    const w = await rw.write();
    const reader = b.readWriteLock("index").read({ waitMs: 5_000 });
    const r = await w.downgrade();
    expect(w.held).toBe(false);
    expect(w.signal.aborted).toBe(true);
    expect(r.mode).toBe("read");
    expect(r.token).toBe(w.token);
    const other = await reader;
    expect(other.token).toBe(w.token);
    // A writer still waits for both readers.
    expect(await rw.tryWrite()).toBeNull();
    await expect(r.downgrade()).rejects.toBeInstanceOf(ConfigError);
    await r.release();
    await other.release();
    const w2 = await rw.write({ waitMs: 0 });
    expect(w2.token).toBeGreaterThan(w.token);
    await w2.release();
    await a.close();
    await b.close();
  });

  it("runs a function under a read or a write and releases it", async () => {
    const [a] = coordinators();
    const rw = a.readWriteLock("prices");
    const token = await rw.withWrite(({ token: t }) => t);
    expect(await rw.withRead(({ token: t }) => t)).toBe(token);
    expect(await rw.holders()).toEqual([]);
    await a.close();
  });
});

describe("permits through the coordinator", () => {
  it("raises the fence in correctness mode for writes only", async () => {
    const fence = new MemoryFence();
    const coordinator = createCoordinator({
      backend: new MemoryBackend(),
      mode: "correctness",
      fence,
    });
    const rw = coordinator.readWriteLock("ledger");
    const w = await rw.write();
    expect(fence.highest("ledger")).toBe(w.token);
    await w.release();
    const sem = coordinator.semaphore("pool", { permits: 2 });
    const p = await sem.acquire();
    const r = await rw.read();
    // Permits and reads are held many at once: raising with each would reject the others.
    expect(fence.highest("pool")).toBeUndefined();
    expect(fence.highest("ledger")).toBe(w.token);
    await p.release();
    await r.release();
    await coordinator.close();
  });

  it("refuses a backend without semaphores with a ConfigError, before any I/O", () => {
    const backend = new ScriptedBackend();
    const coordinator = createCoordinator({ backend });
    expect(() => coordinator.semaphore("s", { permits: 2 })).toThrow(/semaphores: false/);
    expect(() => coordinator.readWriteLock("rw")).toThrow(ConfigError);
    expect(backend.calls.openSession).toBe(0);
  });

  it("refuses with a ConfigError when the sessions have no permits after all", async () => {
    // A backend whose declaration is known only once connected (a URL's mode, say).
    const backend = wrappedMemory("partial", () => ({
      acquirePermits: undefined,
      permitHolders: undefined,
      downgrade: undefined,
    }));
    const coordinator = createCoordinator({ backend });
    const error = await coordinator
      .semaphore("s", { permits: 2 })
      .acquire({ waitMs: 1_000 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toMatch(
      /^backend: this backend's sessions have no semaphores/,
    );
    await expect(coordinator.readWriteLock("rw").holders()).rejects.toBeInstanceOf(ConfigError);
    await coordinator.close();
  });

  it("rejects a given-up wait only once the backend has taken its entry out", async () => {
    // A store that needs 200 ms to take an aborted waiter out of its queue, and 50 ms for a
    // release.
    const slowCleanup = wrappedMemory("slow-cleanup", (session) => ({
      release: async (grant) => {
        await new Promise((r) => setTimeout(r, 50));
        return await session.release(grant);
      },
      acquirePermits: (key: string, o: BackendPermitOptions) => {
        const late = new AbortController();
        if (o.wait) {
          o.signal.addEventListener("abort", () => {
            setTimeout(() => late.abort(o.signal.reason), 200);
          });
        }
        return session.acquirePermits?.(key, {
          limit: o.limit,
          permits: o.permits,
          mode: o.mode,
          wait: o.wait,
          value: o.value,
          signal: late.signal,
        }) as Promise<Grant | null>;
      },
    }));
    const holder = createCoordinator({ backend: slowCleanup, ownerId: "holder" });
    const waiter = createCoordinator({ backend: slowCleanup, ownerId: "waiter" });
    const other = createCoordinator({ backend: slowCleanup, ownerId: "other" });
    const held = await holder.semaphore("s", { permits: 1 }).acquire();
    await expect(
      waiter.semaphore("s", { permits: 1 }).acquire({ waitMs: 100 }),
    ).rejects.toBeInstanceOf(LockTimeoutError);
    await held.release();
    // The timed-out waiter is not ahead any more: the permit is free for the next one.
    const next = await other.semaphore("s", { permits: 1 }).tryAcquire();
    expect(next).not.toBeNull();
    await next?.release();
    await Promise.all([holder.close(), waiter.close(), other.close()]);
  });

  it("a lost lock key ends the lock of that name, not a permit of the same name", async () => {
    const clock = new ManualClock();
    let lostKeys: string[] = [];
    const backend = wrappedMemory(
      "losing",
      (session) => ({
        keepAlive: async () => {
          await session.keepAlive();
          return { lostKeys };
        },
      }),
      { clock },
    );
    const coordinator = createCoordinator({ backend, ttlMs: 3_000, clock });
    const lock = await coordinator.acquire("x");
    const permit = await coordinator.semaphore("x", { permits: 2 }).acquire();
    lostKeys = ["x"];
    await clock.advance(1_100); // one renewal
    expect(lock.lostReason).toBe("key-lost");
    expect(permit.held).toBe(true);
    await coordinator.close();
  });

  it("emits acquired and released, and close() releases held permits", async () => {
    const backend = new MemoryBackend();
    const coordinator = createCoordinator({ backend, closeBackend: false });
    const events: string[] = [];
    coordinator.on("acquired", ({ name }) => events.push(`acquired ${name}`));
    coordinator.on("released", ({ name }) => events.push(`released ${name}`));
    const sem = coordinator.semaphore("s", { permits: 2 });
    const p = await sem.acquire();
    await p.release();
    const held = await sem.acquire({ permits: 2 });
    await coordinator.close();
    expect(held.held).toBe(false);
    expect(held.lostReason).toBe("closed");
    expect(events).toEqual(["acquired s", "released s", "acquired s", "released s"]);
    const other = createCoordinator({ backend });
    const again = await other.semaphore("s", { permits: 2 }).acquire({ permits: 2, waitMs: 0 });
    await again.release();
    await other.close();
  });

  it("ends a permit at once when its process resumes past its lease, and frees it", async () => {
    const clock = new ManualClock();
    const backend = new MemoryBackend({ clock });
    const paused = createCoordinator({ backend, ttlMs: 1_000, clock });
    const permit = await paused.semaphore("s", { permits: 1 }).acquire();
    expect(permit.held).toBe(true);
    clock.jump(5_000); // a pause (GC, SIGSTOP) past the lease, before any timer has run
    expect(permit.signal.aborted).toBe(true);
    expect(permit.lostReason).toBe("deadline");
    const other = createCoordinator({ backend, ttlMs: 1_000, clock });
    const next = await other.semaphore("s", { permits: 1 }).acquire({ waitMs: 0 });
    expect(next.token).toBeGreaterThan(permit.token);
    await next.release();
    await other.close();
    await paused.close();
  });
});
