import { afterEach, describe, expect, it } from "vitest";
import {
  ConfigError,
  type Coordinator,
  createCoordinator,
  type Inspection,
  type ListKeysOptions,
  ManualClock,
  MemoryBackend,
  READ_WRITE_LIMIT,
} from "../../src/index.js";
import { expectError, flush, rejectionOf, track } from "../support/helpers.js";
import { wrappedMemory } from "../support/wrapped-memory.js";

const TTL_MS = 3_000;
const open: Coordinator[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.close()));
});

/** Coordinators named by owner id on one memory store driven by a manual clock. */
function world() {
  const clock = new ManualClock();
  const backend = new MemoryBackend({ clock });
  const coordinator = (ownerId: string) => {
    const c = createCoordinator({ backend, clock, ttlMs: TTL_MS, ownerId, closeBackend: false });
    open.push(c);
    return c;
  };
  return { clock, backend, coordinator };
}

async function collect(items: AsyncIterable<Inspection>): Promise<Inspection[]> {
  const out: Inspection[] = [];
  for await (const item of items) out.push(item);
  return out;
}

describe("inspect() shows what the store holds for a name", () => {
  it("a lock: its holder with token, value and times, and its waiters in queue order", async () => {
    const { clock, coordinator } = world();
    const a = coordinator("a");
    const lock = await a.acquire("invoices", { value: "10.0.0.7" });
    const waiting = track(coordinator("b").acquire("invoices"));
    const waitingToo = track(coordinator("c").acquire("invoices"));
    await flush();
    await clock.advance(250);
    const seen = await coordinator("ops").inspect("invoices");
    expect(seen).toMatchObject({
      kind: "lock",
      name: "invoices",
      holders: [{ ownerId: "a", value: "10.0.0.7", token: lock.token, heldMs: 250 }],
      waiters: { count: 2, ownerIds: ["b", "c"] },
    });
    expect(seen?.holders[0]?.remainingMs).toBeGreaterThan(0);
    await lock.release();
    await flush();
    expect(waiting.status).toBe("fulfilled");
    await waiting.value?.release();
    await flush();
    await waitingToo.value?.release();
  });

  it("a free name is null", async () => {
    const { coordinator } = world();
    expect(await coordinator("ops").inspect("nobody-holds-this")).toBeNull();
  });

  it("a semaphore: its grants, waiters and permits used of the limit", async () => {
    const { coordinator } = world();
    const exports = coordinator("a").semaphore("exports", { permits: 3 });
    const two = await exports.acquire({ permits: 2 });
    const one = await coordinator("b").semaphore("exports", { permits: 3 }).acquire();
    const waiting = track(coordinator("c").semaphore("exports", { permits: 3 }).acquire());
    await flush();
    expect(await coordinator("ops").inspect("exports")).toMatchObject({
      kind: "semaphore",
      holders: [
        { ownerId: "a", permits: 2, mode: "permit", token: two.token },
        { ownerId: "b", permits: 1, mode: "permit", token: one.token },
      ],
      waiters: { count: 1, ownerIds: ["c"] },
      permits: { used: 3, limit: 3 },
    });
    await two.release();
    await flush();
    await waiting.value?.release();
    await one.release();
  });

  it("a read-write lock: reads with their mode, and a waiting write", async () => {
    const { coordinator } = world();
    const read = await coordinator("a").readWriteLock("catalog").read();
    const write = track(coordinator("b").readWriteLock("catalog").write());
    await flush();
    expect(await coordinator("ops").inspect("catalog")).toMatchObject({
      kind: "read-write-lock",
      holders: [{ ownerId: "a", mode: "read", permits: 1 }],
      waiters: { count: 1, ownerIds: ["b"] },
      permits: { used: 1, limit: READ_WRITE_LIMIT },
    });
    await read.release();
    await flush();
    await write.value?.release();
  });

  it("an election: its leader, told apart from a plain lock", async () => {
    const { coordinator } = world();
    const a = coordinator("a");
    const elected = new Promise<void>((resolve) => {
      a.elect("scheduler", { value: "10.0.0.7:8080", onElected: () => resolve() });
    });
    await elected;
    await flush();
    expect(await coordinator("ops").inspect("scheduler")).toMatchObject({
      kind: "election",
      name: "scheduler",
      holders: [{ ownerId: "a", value: "10.0.0.7:8080" }],
    });
  });

  it("a job: its latest slots, newest first, and the running slot's holder", async () => {
    const { coordinator } = world();
    const a = coordinator("a");
    await a.runOnce("billing", "2026-11-30", () => "ok");
    await a.runOnce(
      "billing",
      "2026-12-01",
      () => {
        throw new Error("card processor down");
      },
      { maxAttempts: 1 },
    );
    let finish = () => {};
    const running = a.runOnce(
      "billing",
      "2026-12-02",
      () =>
        new Promise<void>((resolve) => {
          finish = resolve;
        }),
    );
    await flush();
    const seen = await coordinator("ops").inspect("billing");
    expect(seen).toMatchObject({
      kind: "job",
      name: "billing",
      holders: [{ ownerId: "a" }],
      slots: [
        { slot: "2026-12-02", record: { state: "running", holder: "a", attempt: 1 } },
        { slot: "2026-12-01", record: { state: "failed", error: "card processor down" } },
        { slot: "2026-11-30", record: { state: "done" } },
      ],
    });
    expect(seen?.holders[0]?.token).toBe(seen?.slots?.[0]?.record.token);
    finish();
    await running;
  });

  it("a job shows at most its 5 latest slots", async () => {
    const { coordinator } = world();
    const a = coordinator("a");
    for (let day = 1; day <= 8; day++) {
      await a.runOnce("reports", `2026-12-0${day}`, () => undefined);
    }
    const seen = await coordinator("ops").inspect("reports");
    expect(seen?.slots?.map((s) => s.slot)).toEqual([
      "2026-12-08",
      "2026-12-07",
      "2026-12-06",
      "2026-12-05",
      "2026-12-04",
    ]);
    expect(seen?.holders).toEqual([]);
  });
});

describe("list() walks the store page by page", () => {
  it("every kind, with a slot's lock folded into its job", async () => {
    const { coordinator } = world();
    const a = coordinator("a");
    const lock = await a.acquire("invoices");
    const permit = await a.semaphore("exports", { permits: 2 }).acquire();
    const read = await a.readWriteLock("catalog").read();
    await new Promise<void>((resolve) => {
      a.elect("scheduler", { onElected: () => resolve() });
    });
    await a.runOnce("billing", "2026-11-30", () => undefined);
    let finish = () => {};
    const running = a.runOnce(
      "billing",
      "2026-12-01",
      () =>
        new Promise<void>((resolve) => {
          finish = resolve;
        }),
    );
    await flush();
    const items = await collect(coordinator("ops").list());
    expect(items.map((i) => [i.kind, i.name])).toEqual([
      ["lock", "invoices"],
      ["election", "scheduler"],
      ["read-write-lock", "catalog"],
      ["semaphore", "exports"],
      ["job", "billing"],
    ]);
    const job = items.find((i) => i.kind === "job");
    expect(job?.holders).toMatchObject([{ ownerId: "a" }]);
    expect(job?.slots?.map((s) => s.slot)).toEqual(["2026-12-01", "2026-11-30"]);
    finish();
    await running;
    await Promise.all([lock.release(), permit.release(), read.release()]);
  });

  it("prefix keeps only the names that start with it", async () => {
    const { coordinator } = world();
    const a = coordinator("a");
    await a.acquire("billing/invoices");
    await a.acquire("billing/refunds");
    await a.acquire("search/reindex");
    await a.runOnce("billing/close", "2026-12-01", () => undefined);
    const names = (await collect(coordinator("ops").list({ prefix: "billing/" }))).map(
      (i) => i.name,
    );
    expect(names).toEqual(["billing/invoices", "billing/refunds", "billing/close"]);
  });

  it("reads pages of at most 100 keys, a few keys at once, and stops at limit", async () => {
    const clock = new ManualClock();
    const pages: ListKeysOptions[] = [];
    let reading = 0;
    let mostAtOnce = 0;
    const backend = wrappedMemory(
      "memory",
      (session) => ({
        listKeys: (options) => {
          pages.push(options);
          return session.listKeys?.(options) ?? Promise.resolve({ keys: [] });
        },
        inspectKey: async (space, key) => {
          reading++;
          mostAtOnce = Math.max(mostAtOnce, reading);
          await flush(1);
          reading--;
          return (await session.inspectKey?.(space, key)) ?? null;
        },
        readRecord: (key) => session.readRecord?.(key) ?? Promise.resolve(null),
        writeRecord: (key, value, expected) =>
          session.writeRecord?.(key, value, expected) ?? Promise.resolve(null),
      }),
      { clock },
    );
    const holder = createCoordinator({ backend, clock, ttlMs: TTL_MS, closeBackend: false });
    const ops = createCoordinator({ backend, clock, ttlMs: TTL_MS, closeBackend: false });
    open.push(holder, ops);
    for (let i = 0; i < 250; i++) await holder.acquire(`lock-${String(i).padStart(3, "0")}`);

    const all = await collect(ops.list());
    expect(all).toHaveLength(250);
    expect(new Set(all.map((i) => i.name)).size).toBe(250);
    const lockPages = pages.filter((p) => p.space === "lock");
    expect(lockPages.map((p) => p.limit)).toEqual([100, 100, 100]);
    expect(mostAtOnce).toBeGreaterThan(1);
    expect(mostAtOnce).toBeLessThanOrEqual(8);

    pages.length = 0;
    const first = await collect(ops.list({ limit: 30 }));
    expect(first).toHaveLength(30);
    // One page was enough: nothing else was read.
    expect(pages.map((p) => p.space)).toEqual(["lock"]);

    pages.length = 0;
    for await (const _ of ops.list()) break;
    expect(pages).toHaveLength(1);
  });

  it("a signal aborted while listing ends the iteration with its reason", async () => {
    const { coordinator } = world();
    const a = coordinator("a");
    for (let i = 0; i < 150; i++) await a.acquire(`lock-${i}`);
    const stop = new AbortController();
    const seen: string[] = [];
    const error = await rejectionOf(
      (async () => {
        for await (const item of coordinator("ops").list({ signal: stop.signal })) {
          seen.push(item.name);
          stop.abort(new Error("operator pressed q"));
        }
      })(),
    );
    expect(error).toMatchObject({ message: "operator pressed q" });
    expect(seen).toEqual(["lock-0"]);
  });

  it("bad options are a ConfigError naming the field, before any read", async () => {
    const { coordinator } = world();
    const ops = coordinator("ops");
    expectError(
      (() => {
        try {
          ops.list({ limit: 0 });
        } catch (error) {
          return error;
        }
      })() as Error,
      ConfigError,
      { field: "limit" },
    );
    expect(() => ops.list({ prefix: "a\u0001" })).toThrow(ConfigError);
    expect(() => ops.list({ nope: 1 } as never)).toThrow(ConfigError);
    expectError(await rejectionOf(ops.inspect("")), ConfigError, { field: "name" });
  });
});

describe("a backend that cannot list its keys", () => {
  it("list() and inspect() reject with a ConfigError naming the backend", async () => {
    const backend = wrappedMemory("memory", () => ({}));
    (backend as { guarantees: object }).guarantees = {
      ...backend.guarantees,
      inspection: false,
    };
    const ops = createCoordinator({ backend });
    open.push(ops);
    const inspected = expectError(await rejectionOf(ops.inspect("invoices")), ConfigError, {
      field: "backend",
    });
    expect(inspected.message).toContain("the memory backend cannot list or inspect its keys");
    const listed = await rejectionOf(collect(ops.list()));
    expectError(listed, ConfigError, { field: "backend" });
  });
});

describe("what the backend's guarantees leave out", () => {
  /** A memory store behind a backend whose guarantees are changed by `change`. */
  function changed(change: (g: Record<string, unknown>) => Record<string, unknown>) {
    const clock = new ManualClock();
    const backend = wrappedMemory(
      "memory",
      (session) => ({
        listKeys: (options) => session.listKeys?.(options) ?? Promise.resolve({ keys: [] }),
        inspectKey: (space, key) => session.inspectKey?.(space, key) ?? Promise.resolve(null),
      }),
      { clock },
    );
    (backend as { guarantees: object }).guarantees = change({ ...backend.guarantees });
    const c = createCoordinator({ backend, clock, ttlMs: TTL_MS, ownerId: "a" });
    open.push(c);
    return c;
  }

  it("without records an election shows as a lock", async () => {
    const c = changed((g) => ({ ...g, records: false }));
    await new Promise<void>((resolve) => {
      c.elect("scheduler", { onElected: () => resolve() });
    });
    expect(await c.inspect("scheduler")).toMatchObject({ kind: "lock", name: "scheduler" });
  });

  it("without fencing a holder has no token", async () => {
    const c = changed((g) => ({ ...g, fencing: "none" }));
    await c.acquire("invoices");
    const seen = await c.inspect("invoices");
    expect(seen?.holders).toHaveLength(1);
    expect(seen?.holders[0]).toMatchObject({ ownerId: "a" });
    expect(seen?.holders[0]).not.toHaveProperty("token");
  });
});
