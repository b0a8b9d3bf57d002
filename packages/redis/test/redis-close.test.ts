import { SilentListener, TcpProxy } from "@baton/conformance/faults";
import { describeBackend } from "@baton/conformance/harness";
import { BackendUnavailableError, createCoordinator, type LockBackend } from "@baton/core";
import { afterEach, describe, expect, it } from "vitest";
import { RedisBackend, RedlockBackend } from "../src/index.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f().catch(() => undefined);
});

/** How long `promise` takes to settle, and how. */
async function timed<T>(promise: Promise<T>): Promise<{ ms: number; error: unknown }> {
  const start = performance.now();
  try {
    await promise;
    return { ms: performance.now() - start, error: undefined };
  } catch (error) {
    return { ms: performance.now() - start, error };
  }
}

/** Waits until `test()` holds, for at most `ms`; returns whether it did. */
async function eventually(test: () => boolean, ms: number): Promise<boolean> {
  const until = performance.now() + ms;
  while (!test()) {
    if (performance.now() > until) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}

const kinds = {
  redis: (hosts: string) => new RedisBackend({ url: `redis://${hosts}` }),
  "redis cluster": (hosts: string) => new RedisBackend({ url: `redis://${hosts}?cluster=true` }),
  redlock: (hosts: string) => new RedlockBackend({ url: `redlock://${hosts}` }),
} satisfies Record<string, (hosts: string) => LockBackend>;

async function silentStore(kind: keyof typeof kinds) {
  const count = kind === "redlock" ? 3 : 1;
  const listeners = await Promise.all(Array.from({ length: count }, () => SilentListener.start()));
  cleanups.push(() => Promise.all(listeners.map((s) => s.close())));
  return {
    hosts: listeners.map((s) => `${s.host}:${s.port}`).join(","),
    accepted: () => listeners.reduce((n, s) => n + s.accepted, 0),
    open: () => listeners.reduce((n, s) => n + s.open, 0),
  };
}

describe("a store that accepts connections and never answers", () => {
  it.each(Object.keys(kinds) as (keyof typeof kinds)[])(
    "%s: acquire fails in bounded time, close() settles at once and leaves no connection",
    async (kind) => {
      const store = await silentStore(kind);
      const backend = kinds[kind](store.hosts);
      cleanups.push(() => backend.close());
      const coordinator = createCoordinator({ backend, ttlMs: 3_000 });
      cleanups.push(() => coordinator.close());
      const acquire = await timed(coordinator.acquire("silent", { waitMs: 3_000 }));
      expect(acquire.error).toBeInstanceOf(BackendUnavailableError);
      expect(acquire.ms).toBeLessThan(10_000);
      expect(store.accepted()).toBeGreaterThan(0);
      const close = await timed(Promise.all([coordinator.close(), backend.close()]));
      expect(close.error).toBeUndefined();
      expect(close.ms).toBeLessThan(3_000);
      expect(await eventually(() => store.open() === 0, 3_000)).toBe(true);
    },
    30_000,
  );

  it.each(Object.keys(kinds) as (keyof typeof kinds)[])(
    "%s: close() during an acquire that waits for the store settles at once",
    async (kind) => {
      const store = await silentStore(kind);
      const backend = kinds[kind](store.hosts);
      cleanups.push(() => backend.close());
      const coordinator = createCoordinator({ backend, ttlMs: 3_000 });
      const acquire = timed(coordinator.acquire("silent", { waitMs: 60_000 }));
      await eventually(() => store.accepted() > 0, 5_000);
      await new Promise((r) => setTimeout(r, 300));
      const close = await timed(Promise.all([coordinator.close(), backend.close()]));
      expect(close.error).toBeUndefined();
      expect(close.ms).toBeLessThan(3_000);
      const settled = await acquire;
      expect(settled.error).toBeDefined();
      expect(await eventually(() => store.open() === 0, 3_000)).toBe(true);
    },
    30_000,
  );
});

describeBackend("redis", (url) => {
  it("a store that stops answering while locks, permits and waits are open: close() settles within the command bound", async () => {
    const [host, port] = url.replace("redis://", "").split(":");
    const proxy = await TcpProxy.start({ host: host as string, port: Number(port) });
    cleanups.push(() => proxy.close());
    const backend = new RedisBackend({
      url: `redis://127.0.0.1:${proxy.port}?prefix=close:&commandTimeoutMs=1000`,
    });
    cleanups.push(() => backend.close());
    const coordinator = createCoordinator({ backend, ttlMs: 5_000 });
    cleanups.push(() => coordinator.close());
    const name = `stops-${Date.now()}`;
    await coordinator.acquire(name);
    await coordinator.semaphore(`${name}-permits`, { permits: 2 }).acquire();
    const waiting = timed(coordinator.acquire(name, { waitMs: 60_000 }));
    await new Promise((r) => setTimeout(r, 300));
    proxy.blackhole();
    const close = await timed(Promise.all([coordinator.close(), backend.close()]));
    expect(close.ms).toBeLessThan(5_000);
    expect((await waiting).error).toBeDefined();
    expect(await eventually(() => proxy.connections === 0, 3_000)).toBe(true);
  }, 30_000);
});
