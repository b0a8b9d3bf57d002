import { randomUUID } from "node:crypto";
import { proxyHosts } from "@baton/conformance/faults";
import { describeBackend } from "@baton/conformance/harness";
import {
  type BackendSession,
  BackendUnavailableError,
  createCoordinator,
  type Grant,
  LockLostError,
} from "@baton/core";
import { afterEach, describe, expect, it } from "vitest";
import { RedlockBackend } from "../src/index.js";

const never = new AbortController().signal;

type Session = BackendSession &
  Required<Pick<BackendSession, "listKeys" | "inspectKey" | "forceRelease">>;

/**
 * Inspection and forced release over Redlock's independent nodes, at the BackendSession level
 * and through the coordinator. Each test uses its own key prefix.
 */
describeBackend("redlock", (url) => {
  describe("redlock inspection", () => {
    let backend: RedlockBackend;
    const closers: (() => Promise<unknown>)[] = [];
    const fresh = () => {
      backend = new RedlockBackend({ url, keyPrefix: `ri-${randomUUID().slice(0, 8)}:` });
      closers.push(() => backend.close());
    };
    afterEach(async () => {
      for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
    });
    const open = async (ownerId: string, ttlMs = 10_000): Promise<Session> => {
      const s = (await backend.openSession({ ttlMs, ownerId })) as Session;
      closers.push(() => s.close());
      return s;
    };
    const take = async (s: Session, name: string, value?: string): Promise<Grant> => {
      const g = await s.acquire(name, {
        wait: false,
        signal: never,
        ...(value === undefined ? {} : { value }),
      });
      if (g === null) throw new Error(`"${name}" is taken`);
      return g;
    };

    it("lists each held lock once, though every node has it, over several pages", async () => {
      fresh();
      const s = await open("lister");
      const names = Array.from({ length: 7 }, (_, i) => `jobs/${i}`);
      for (const name of names) await take(s, name);
      await take(s, "other/1");
      const keys: string[] = [];
      let pages = 0;
      let cursor: string | undefined;
      do {
        const page = await s.listKeys({
          space: "lock",
          prefix: "jobs/",
          limit: 3,
          signal: never,
          ...(cursor === undefined ? {} : { cursor }),
        });
        expect(page.keys.length).toBeLessThanOrEqual(3);
        keys.push(...page.keys);
        cursor = page.cursor;
        pages++;
      } while (cursor !== undefined);
      expect(pages).toBeGreaterThan(1);
      expect(keys.sort()).toEqual(names);
      expect(await s.listKeys({ space: "permit", prefix: "", limit: 10, signal: never })).toEqual({
        keys: [],
      });
    });

    it("inspects the holder a quorum names, with its remaining lease; a free lock is null", async () => {
      fresh();
      const s = await open("holder-a", 5_000);
      await take(s, "held", "payload");
      const state = await s.inspectKey("lock", "held");
      expect(state?.holders).toEqual([
        expect.objectContaining({ ownerId: "holder-a", token: 0n, value: "payload" }),
      ]);
      expect(state?.holders[0]?.remainingMs).toBeGreaterThan(0);
      expect(state?.holders[0]?.remainingMs).toBeLessThanOrEqual(5_000);
      expect(await s.inspectKey("lock", "free")).toBeNull();
      expect(await s.inspectKey("permit", "held")).toBeNull();
    });

    it("a forced release frees the grant on every node; the holder's renewal reports it revoked with the reason", async () => {
      fresh();
      const holder = await open("holder");
      const operator = await open("operator");
      await take(holder, "stuck");
      const kept = await take(holder, "kept");
      expect(
        await operator.forceRelease("lock", "stuck", { token: 5n, reason: "no", signal: never }),
      ).toBe(false);
      expect(
        await operator.forceRelease("lock", "stuck", { token: 0n, reason: "hung", signal: never }),
      ).toBe(true);
      expect(await operator.inspectKey("lock", "stuck")).toBeNull();
      expect(
        await operator.forceRelease("lock", "stuck", { token: 0n, reason: "again", signal: never }),
      ).toBe(false);
      // Free on every node: another session takes it at once.
      await take(operator, "stuck");
      expect(await holder.keepAlive()).toEqual({
        revoked: [{ space: "lock", key: "stuck", token: 0n, reason: "hung" }],
      });
      expect(await holder.keepAlive()).toBeUndefined();
      expect((await operator.inspectKey("lock", "stuck"))?.holders[0]?.ownerId).toBe("operator");
      expect(await holder.release(kept)).toBe(true);
    });

    it("through the coordinator: the holder's lock aborts as revoked with the reason", async () => {
      fresh();
      const holder = createCoordinator({
        backend,
        closeBackend: false,
        ttlMs: 3_000,
        ownerId: "w1",
      });
      const ops = createCoordinator({ backend, closeBackend: false, ttlMs: 3_000, ownerId: "ops" });
      closers.push(
        () => holder.close(),
        () => ops.close(),
      );
      const lock = await holder.acquire("billing/invoices");
      const listed = [];
      for await (const item of ops.list({ prefix: "billing/" })) listed.push(item);
      expect(listed).toEqual([
        expect.objectContaining({
          kind: "lock",
          name: "billing/invoices",
          holders: [expect.objectContaining({ ownerId: "w1" })],
        }),
      ]);
      const result = await ops.forceRelease("billing/invoices", { reason: "stuck" });
      expect(result).toMatchObject({ released: true });
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error("the holder never learned")), 5_000);
        const done = () => {
          clearTimeout(timer);
          resolve();
        };
        if (lock.signal.aborted) done();
        else lock.signal.addEventListener("abort", done, { once: true });
      });
      const reason = lock.signal.reason as LockLostError;
      expect(reason).toBeInstanceOf(LockLostError);
      expect(reason.reason).toBe("revoked");
      expect(reason.detail).toBe("stuck");
    });

    it("a listing right after the session opens waits for a node still connecting; an unreachable node fails it, named", async () => {
      const proxied = await proxyHosts(url);
      closers.push(() => proxied.close());
      const last = proxied.proxies.length - 1;
      // The last node answers its connection's first exchange late: the session opens on the
      // quorum before that node is ready.
      proxied.proxies[last]?.delay(300);
      const slow = new RedlockBackend({
        url: proxied.url,
        keyPrefix: `ri-${randomUUID().slice(0, 8)}:`,
        nodeTimeoutMs: 3_000,
      });
      closers.push(() => slow.close());
      const s = (await slow.openSession({ ttlMs: 10_000, ownerId: "early" })) as Session;
      closers.push(() => s.close());
      expect(slow.nodes[last]?.status).not.toBe("ready");
      expect(await s.listKeys({ space: "lock", prefix: "", limit: 10, signal: never })).toEqual({
        keys: [],
      });
      await take(s, "jobs/1");
      proxied.proxies[last]?.cut();
      // Cut mid-call or known to be down: either way the listing fails naming the node, within
      // the node timeout.
      const failed = async () => {
        const at = performance.now();
        const error = await s
          .listKeys({ space: "lock", prefix: "", limit: 10, signal: never })
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(BackendUnavailableError);
        expect((error as Error).message).toContain(proxied.hosts[last]);
        expect(performance.now() - at).toBeLessThan(3_000 + 2_000);
      };
      await failed();
      await expect.poll(() => slow.nodes[last]?.status).not.toBe("ready");
      await failed();
    });
  });
});
