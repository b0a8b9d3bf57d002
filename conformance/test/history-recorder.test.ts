import { createCoordinator, type LockBackend, MemoryBackend } from "@baton/core";
import { afterEach, describe, expect, it } from "vitest";
import { type LockWorker, spawnLockWorker } from "../src/faults/index.js";
import {
  type AcquireOp,
  certainHolds,
  checkHistory,
  History,
  RecordedCoordinator,
  RecordedWorker,
} from "../src/history/index.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((f) => f()));
});

describe("RecordedCoordinator", () => {
  it("records acquires with their deadline, renewals, releases, failures as fail or unknown, and losses", async () => {
    const backend = new MemoryBackend();
    const history = new History();
    const a = new RecordedCoordinator(
      history,
      "a",
      createCoordinator({ backend, ttlMs: 300, ownerId: "a" }),
    );
    const b = new RecordedCoordinator(
      history,
      "b",
      createCoordinator({ backend, ttlMs: 300, ownerId: "b" }),
    );
    cleanups.push(
      () => a.close(),
      () => b.close(),
    );

    const lock = await a.acquire("k");
    const acquire = history.entries[0] as AcquireOp;
    expect(acquire).toMatchObject({ type: "acquire", process: "a", key: "k" });
    expect(acquire.result).toMatchObject({ status: "ok", token: lock.token });
    const deadline = (acquire.result as { deadline: number }).deadline;
    expect(deadline - (acquire.completeAt as number)).toBeGreaterThan(200);
    expect(deadline - (acquire.completeAt as number)).toBeLessThanOrEqual(300);

    await expect(b.acquire("k", { waitMs: 0 })).rejects.toThrow();
    await expect(b.acquire("k", { waitMs: 50 })).rejects.toThrow();
    expect(await b.tryAcquire("k")).toBeNull();
    const statuses = history.entries
      .filter((e): e is AcquireOp => e.type === "acquire" && e.process === "b")
      .map((e) => e.result?.status);
    expect(statuses).toEqual(["fail", "unknown", "fail"]);

    await new Promise((r) => setTimeout(r, 350)); // through renewals
    const renewals = history.entries.filter((e) => e.type === "renew" && e.process === "a");
    expect(renewals.length).toBeGreaterThan(0);
    expect(renewals.every((e) => e.type === "renew" && e.ok && e.deadline !== undefined)).toBe(
      true,
    );
    // Still held: the hold runs to the deadline the last renewal set, which is still ahead.
    const [hold] = certainHolds(history.entries);
    expect(hold?.endedBy).toBe("deadline");
    expect(hold?.end).toBeGreaterThan(history.now());
    expect(hold?.end).toBeGreaterThan(deadline);

    expect(await a.release(lock)).toBe(true);
    const second = await b.acquire("k");
    expect(await b.release(second)).toBe(true);
    expect(certainHolds(history.entries).map((h) => [h.process, h.endedBy])).toEqual([
      ["a", "release"],
      ["b", "release"],
    ]);
    expect(checkHistory(history, { fencing: true })).toEqual([]);
  });

  it("records a loss by deadline at the deadline itself, and failed renewals", async () => {
    const inner = new MemoryBackend();
    let broken = false;
    // Renewals fail once `broken` is set: the lock is lost at its local deadline.
    const backend: LockBackend = {
      kind: inner.kind,
      guarantees: inner.guarantees,
      openSession: async (options) => {
        const session = await inner.openSession(options);
        return new Proxy(session, {
          get(target, property) {
            if (property === "keepAlive") {
              return () => (broken ? Promise.reject(new Error("down")) : target.keepAlive());
            }
            const value = Reflect.get(target, property, target);
            return typeof value === "function" ? value.bind(target) : value;
          },
        });
      },
      close: () => inner.close(),
    };
    const history = new History();
    const c = new RecordedCoordinator(history, "c", createCoordinator({ backend, ttlMs: 300 }));
    cleanups.push(() => c.close());
    const lock = await c.acquire("k");
    await new Promise((r) => setTimeout(r, 150));
    broken = true;
    const abortedAt = await new Promise<number>((resolve) =>
      lock.signal.addEventListener("abort", () => resolve(history.now()), { once: true }),
    );
    const lost = history.entries.find((e) => e.type === "lost");
    expect(lost).toMatchObject({ process: "c", key: "k", token: lock.token, reason: "deadline" });
    const [hold] = certainHolds(history.entries);
    expect(hold?.endedBy).toBe("deadline");
    // Not later than the abort was seen, and not earlier than the last confirmed renewal.
    expect(hold?.end).toBeLessThanOrEqual(abortedAt);
    expect(lost?.type === "lost" && lost.at).toBe(hold?.end);
    expect(history.entries.some((e) => e.type === "renew" && !e.ok)).toBe(true);
  });
});

describe("RecordedWorker", () => {
  let worker: LockWorker | undefined;
  afterEach(async () => {
    await worker?.kill();
    worker = undefined;
  });

  it("records a worker's acquire, pause, resume, loss and unchecked writes on receipt", async () => {
    const ttlMs = 400;
    worker = await spawnLockWorker({ url: "memory://", ttlMs });
    const history = new History();
    const writes: { token: string; at: number }[] = [];
    const w = new RecordedWorker(history, "w", worker, {
      onWrite: (e) => {
        writes.push({ token: e.token, at: history.now() });
        history.plainWrite("w", e.name, { token: BigInt(e.token), value: `w:${e.seq}` });
      },
    });
    w.acquire("job");
    await worker.waitFor((e) => e.event === "acquired", 5_000);
    w.acquire("job", { waitMs: 100 }); // held by itself: the wait runs out
    await worker.waitFor((e) => e.event === "error" && e.op === "acquire", 5_000);
    w.send({ op: "tick", name: "job", everyMs: 20, unchecked: true });
    await worker.waitFor((e) => e.event === "wrote" && e.seq >= 2, 5_000);
    w.pause();
    await new Promise((r) => setTimeout(r, ttlMs * 2));
    const resumedAt = history.now();
    w.resume();
    await worker.waitFor((e) => e.event === "lost", 5_000);
    const before = writes.filter((x) => x.at > resumedAt).length;
    await worker.waitFor(() => writes.filter((x) => x.at > resumedAt).length >= before + 2, 5_000);

    const acquires = history.entries.filter((e): e is AcquireOp => e.type === "acquire");
    expect(acquires.map((a) => a.result?.status)).toEqual(["ok", "unknown"]);
    expect(acquires[1]?.result).toMatchObject({
      reason: expect.stringContaining("BATON_LOCK_TIMEOUT"),
    });
    expect(
      history.entries.filter((e) => e.type === "pause" || e.type === "resume").map((e) => e.type),
    ).toEqual(["pause", "resume"]);
    const lost = history.entries.find((e) => e.type === "lost");
    expect(lost).toMatchObject({ process: "w", key: "job", token: 1n, reason: "deadline" });
    // Unchecked: it wrote on after SIGCONT with its old token, and the hold ended at the pause.
    expect(writes.some((x) => x.at > resumedAt && x.token === "1")).toBe(true);
    expect(certainHolds(history.entries).map((h) => h.endedBy)).toEqual(["pause"]);
    // Alone on the key, its stale writes hurt nobody: no violation.
    expect(checkHistory(history, { fencing: true })).toEqual([]);
  });
});
