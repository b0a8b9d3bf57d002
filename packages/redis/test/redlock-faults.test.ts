import { proxyHosts } from "@baton/conformance/faults";
import { describeBackend, type ServerGroup, startServers } from "@baton/conformance/harness";
import {
  type AcquireOp,
  checkHistory,
  History,
  RecordedCoordinator,
} from "@baton/conformance/history";
import {
  BackendUnavailableError,
  createCoordinator,
  LockLostError,
  LockTimeoutError,
} from "@baton/core";
import { Redis } from "ioredis";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { RedlockBackend } from "../src/index.js";

describeBackend("redlock", (sharedUrl) => {
  describe("redlock validity", () => {
    it("a quorum that answers only after the validity ran out is a failure, never a lock", async () => {
      const { proxies, url: proxiedUrl } = await proxyHosts(sharedUrl);
      const backend = new RedlockBackend({
        url: `${proxiedUrl}?prefix=validity:`,
        nodeTimeoutMs: 3_000,
      });
      const session = await backend.openSession({ ttlMs: 300, ownerId: "slow" });
      const signal = new AbortController().signal;
      try {
        // Connected first; then every link slower than the TTL.
        expect(await session.acquire("warm-up", { wait: false, signal })).not.toBeNull();
        for (const p of proxies) p.delay(200);
        const error = await session
          .acquire("slow", { wait: false, signal })
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(BackendUnavailableError);
        expect((error as Error).message).toContain("validity");
      } finally {
        await session.close().catch(() => undefined);
        await backend.close();
        await Promise.all(proxies.map((p) => p.close()));
      }
    });
  });

  describe("redlock with killed nodes (private 5 nodes)", () => {
    let stop: (() => Promise<unknown>) | undefined;
    let group: ServerGroup;
    let url: string;
    beforeEach(async () => {
      const started = await startServers({ backends: ["redlock"] });
      stop = () => started.stop();
      group = started.groups.redlock as ServerGroup;
      url = started.servers.redlock as string;
    });
    afterEach(async () => {
      await stop?.();
    });

    const lockKeysOn = async (member: number): Promise<string[]> => {
      const [host, port] = (group.members[member]?.address ?? "").split(":");
      const raw = new Redis(Number(port), host as string);
      try {
        return await raw.keys("kill:*:lock");
      } finally {
        raw.disconnect();
      }
    };

    it("2 of 5 nodes killed: still grants, renews through 3 TTLs and releases", async () => {
      await group.kill(0);
      await group.kill(3);
      const c = createCoordinator({ url: `${url}?prefix=kill:`, ttlMs: 1_000 });
      const history = new History();
      const rc = new RecordedCoordinator(history, "c", c);
      try {
        const lock = await rc.acquire("two-down", { waitMs: 5_000 });
        // Two nodes refuse at once, three say "held": that is "held", never "unreachable".
        const other = createCoordinator({ url: `${url}?prefix=kill:`, ttlMs: 1_000 });
        try {
          for (let i = 0; i < 5; i++) expect(await other.tryAcquire("two-down")).toBeNull();
          const waited = await other.acquire("two-down", { waitMs: 300 }).catch((e: unknown) => e);
          expect(waited).toBeInstanceOf(LockTimeoutError);
        } finally {
          await other.close();
        }
        await new Promise((r) => setTimeout(r, 3_000));
        expect(lock.held).toBe(true);
        expect(await c.holder("two-down")).toMatchObject({ ownerId: c.ownerId, token: 0n });
        expect(await rc.release(lock)).toBe(true);
        // One hold, renewed on the quorum throughout, ended by the release.
        expect(checkHistory(history, { fencing: false })).toEqual([]);
        expect(history.entries.filter((e) => e.type === "lost")).toEqual([]);
      } finally {
        await c.close();
      }
      for (const m of [1, 2, 4]) expect(await lockKeysOn(m)).toEqual([]);
    });

    it("3 of 5 nodes killed: BackendUnavailableError within the wait, no key left on the survivors, the holder's signal aborts", async () => {
      const holder = createCoordinator({ url: `${url}?prefix=kill:`, ttlMs: 1_000 });
      const c = createCoordinator({ url: `${url}?prefix=kill:`, ttlMs: 1_000 });
      const history = new History();
      const rh = new RecordedCoordinator(history, "holder", holder);
      const rc = new RecordedCoordinator(history, "c", c);
      try {
        const held = await rh.acquire("held-before");
        // Open c's session while every node is up, so the failure below is the acquire's.
        expect(await c.tryAcquire("warm-up")).not.toBeNull();
        await group.kill(0);
        await group.kill(2);
        await group.kill(4);
        const started = performance.now();
        const error = await rc.acquire("three-down", { waitMs: 1_500 }).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(BackendUnavailableError);
        expect(performance.now() - started).toBeLessThan(1_500 + 1_000);
        const tried = await rc.tryAcquire("three-down-try").catch((e: unknown) => e);
        expect(tried).toBeInstanceOf(BackendUnavailableError);
        // The holder can no longer renew on a quorum: its signal aborts at its local deadline.
        await new Promise<void>((resolve) => {
          if (held.signal.aborted) resolve();
          held.signal.addEventListener("abort", () => resolve(), { once: true });
        });
        expect(held.signal.reason).toBeInstanceOf(LockLostError);
        // No acquire that failed left a key behind on the nodes that answered.
        for (const m of [1, 3]) {
          const keys = await lockKeysOn(m);
          expect(keys.filter((k) => k.includes("three-down"))).toEqual([]);
        }
        // No quorum is "unknown" in the history, never "failed"; the holder's hold ended with
        // its loss; nothing overlaps.
        const outcomes = history.entries
          .filter((e): e is AcquireOp => e.type === "acquire" && e.key.startsWith("three-down"))
          .map((e) => e.result?.status);
        expect(outcomes).toEqual(["unknown", "unknown"]);
        expect(history.entries.some((e) => e.type === "lost" && e.process === "holder")).toBe(true);
        expect(checkHistory(history, { fencing: false })).toEqual([]);
      } finally {
        await holder.close();
        await c.close();
      }
    });
  });
});
