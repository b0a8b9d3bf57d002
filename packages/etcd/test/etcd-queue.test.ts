import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import {
  type BackendSession,
  BackendUnavailableError,
  ConfigError,
  createBackend,
  createCoordinator,
  SessionLostError,
} from "@baton/core";
import type { Etcd3 } from "etcd3";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { EtcdBackend } from "../src/index.js";
import {
  flakyClient,
  hostsOf,
  type Recording,
  recordingClient,
} from "./support/recording-client.js";

const never = () => new AbortController().signal;

describeBackend("etcd", (url) => {
  describe("etcd queue", () => {
    let client: Etcd3;
    let recording: Recording;
    let backend: EtcdBackend;
    const sessions: BackendSession[] = [];
    const name = (label: string) => `etcd-queue-${randomUUID().slice(0, 8)}/${label}`;
    const open = async (ttlMs = 20_000, ownerId = "owner") => {
      const session = await backend.openSession({ ttlMs, ownerId });
      sessions.push(session);
      return session;
    };
    const keysUnder = async (prefix: string) =>
      (await client.getAll().prefix(prefix).keys()).sort();

    beforeAll(() => {
      ({ client, recording } = recordingClient(hostsOf(url)));
      backend = new EtcdBackend({ client });
    });
    afterEach(async () => {
      await Promise.allSettled(sessions.splice(0).map((s) => s.close()));
    });
    afterAll(async () => {
      await backend.close();
      client.close();
    });

    it("an uncontended acquire is one round trip, and a contended try is one too", async () => {
      const lock = name("one-rt");
      const a = await open();
      const b = await open();
      recording.reset();
      const grant = await a.acquire(lock, { wait: true, signal: never() });
      expect(grant).not.toBeNull();
      expect(recording.kvCalls).toEqual(["txn"]);
      recording.reset();
      expect(await b.acquire(lock, { wait: false, signal: never() })).toBeNull();
      expect(recording.kvCalls).toEqual(["txn"]);
      recording.reset();
      if (grant) expect(await a.release(grant)).toBe(true);
      expect(recording.kvCalls).toEqual(["txn"]);
      // The try left nothing behind.
      expect(await keysUnder(`${lock}/`)).toEqual([]);
    });

    it("keys are <name>/<lease hex> (etcdctl's layout) and the token is the key's create revision", async () => {
      const lock = name("layout");
      const a = (await open()) as BackendSession & { leaseId: string };
      const grant = await a.acquire(lock, { wait: false, signal: never(), value: "v" });
      const key = `${lock}/${BigInt(a.leaseId).toString(16)}`;
      expect(await keysUnder(`${lock}/`)).toEqual([key]);
      const raw = await client.kv.range({ key: Buffer.from(key) });
      expect(grant?.token).toBe(BigInt(raw.kvs[0]?.create_revision ?? -1));
      expect(await a.holder(lock)).toEqual({
        ownerId: "owner",
        token: grant?.token,
        value: "v",
        remainingMs: expect.any(Number),
      });
    });

    it("holder() tells the time left on the holder's lease, as etcd counts it down", async () => {
      const lock = name("time-left");
      const a = await open(4_000);
      const b = await open(20_000, "reader");
      await a.acquire(lock, { wait: false, signal: never() });
      const fresh = await b.holder(lock);
      expect(fresh?.ownerId).toBe("owner");
      // etcd reports whole seconds, rounded down: a 4 s lease just granted shows 3 or 4 s.
      expect(fresh?.remainingMs).toBeGreaterThanOrEqual(3_000);
      expect(fresh?.remainingMs).toBeLessThanOrEqual(4_000);
      // Not renewed for 2 s: etcd counts the lease down.
      await new Promise((r) => setTimeout(r, 2_100));
      expect((await b.holder(lock))?.remainingMs).toBeLessThanOrEqual(2_000);
      await a.keepAlive();
      expect((await b.holder(lock))?.remainingMs).toBeGreaterThanOrEqual(3_000);
    });

    it("each waiter watches only its predecessor, and 6 waiters are served in queue order", async () => {
      const lock = name("herd");
      const holder = (await open()) as BackendSession & { leaseId: string };
      const first = await holder.acquire(lock, { wait: true, signal: never() });
      const waiters: (BackendSession & { leaseId: string })[] = [];
      const granted: number[] = [];
      const pending: Promise<void>[] = [];
      recording.reset();
      for (let i = 0; i < 6; i++) {
        const w = (await open(20_000, `w${i}`)) as BackendSession & { leaseId: string };
        waiters.push(w);
        pending.push(
          w.acquire(lock, { wait: true, signal: never() }).then(async (g) => {
            granted.push(i);
            if (g) await w.release(g);
          }),
        );
        // Until its watch is created, so the queue order is the loop order.
        while (recording.watchedKeys.length < i + 1) await new Promise((r) => setTimeout(r, 5));
      }
      const keyOf = (s: { leaseId: string }) => `${lock}/${BigInt(s.leaseId).toString(16)}`;
      expect(recording.watchedKeys).toEqual([holder, ...waiters.slice(0, 5)].map(keyOf));
      recording.reset();
      if (first) await holder.release(first);
      await Promise.all(pending);
      expect(granted).toEqual([0, 1, 2, 3, 4, 5]);
      // Each handoff woke exactly one waiter: one new watch per waiter at most, never a herd.
      expect(recording.watchedKeys.length).toBe(0);
    });

    it("a waiter whose lease expired while it waited is not told it holds the lock", async () => {
      const lock = name("expired-waiter");
      const holder = await open();
      const grant = await holder.acquire(lock, { wait: true, signal: never() });
      const waiter = await open(2_000, "short");
      const waiting = waiter.acquire(lock, { wait: true, signal: never() }).then(
        () => "granted",
        (e: unknown) => e,
      );
      // The waiter is never renewed: its lease (and queue key) expire while the holder holds.
      await new Promise((r) => setTimeout(r, 3_500));
      await holder.keepAlive();
      if (grant) await holder.release(grant);
      const outcome = await waiting;
      expect(outcome).toBeInstanceOf(SessionLostError);
      expect(waiter.lost?.aborted).toBe(true);
    });

    it("a waiter whose key was deleted while its lease lives on keeps its session", async () => {
      const lock = name("deleted-waiter");
      const holder = await open();
      const grant = await holder.acquire(lock, { wait: true, signal: never() });
      const waiter = (await open(20_000, "waiter")) as BackendSession & { leaseId: string };
      const waiting = waiter.acquire(lock, { wait: true, signal: never() }).then(
        () => "granted",
        (e: unknown) => e,
      );
      const key = `${lock}/${BigInt(waiter.leaseId).toString(16)}`;
      while ((await keysUnder(`${lock}/`)).length < 2) await new Promise((r) => setTimeout(r, 20));
      // What the cleanup of an earlier, given-up attempt at the name does.
      await client.delete().key(key);
      if (grant) await holder.release(grant);
      const outcome = await waiting;
      // Not "lost": the lease lives, and so do the session's other locks.
      expect(outcome).toBeInstanceOf(BackendUnavailableError);
      expect(outcome).not.toBeInstanceOf(SessionLostError);
      expect(waiter.lost?.aborted).toBe(false);
      await waiter.keepAlive();
      const again = await waiter.acquire(lock, { wait: true, signal: never() });
      expect(again?.ownerId).toBe("waiter");
    });

    it("a retried release never deletes a newer grant of the same session", async () => {
      const lock = name("guarded-release");
      const a = await open();
      const g1 = await a.acquire(lock, { wait: true, signal: never() });
      if (g1 === null) throw new Error("not granted");
      expect(await a.release(g1)).toBe(true);
      const g2 = await a.acquire(lock, { wait: true, signal: never() });
      if (g2 === null) throw new Error("not granted");
      expect(g2.token).toBeGreaterThan(g1.token);
      expect(await a.release(g1)).toBe(false);
      expect(await a.holder(lock)).toMatchObject({ token: g2.token });
    });

    it("a release that could not reach etcd is followed by grants with greater tokens, try or wait", async () => {
      const lock = name("failed-release");
      const flaky = flakyClient(hostsOf(url));
      const own = new EtcdBackend({ client: flaky.client });
      try {
        const a = await own.openSession({ ttlMs: 20_000, ownerId: "a" });
        const g1 = await a.acquire(lock, { wait: true, signal: never() });
        if (g1 === null) throw new Error("not granted");
        flaky.failing = true;
        await expect(a.release(g1)).rejects.toBeInstanceOf(BackendUnavailableError);
        flaky.failing = false;
        // Nobody held the lock in between: still, the next grant is a new one.
        const g2 = await a.acquire(lock, { wait: false, signal: never() });
        if (g2 === null) throw new Error("not granted");
        expect(g2.token).toBeGreaterThan(g1.token);
        flaky.failing = true;
        await expect(a.release(g2)).rejects.toBeInstanceOf(BackendUnavailableError);
        flaky.failing = false;
        const g3 = await a.acquire(lock, { wait: true, signal: never() });
        if (g3 === null) throw new Error("not granted");
        expect(g3.token).toBeGreaterThan(g2.token);
        expect(await a.holder(lock)).toMatchObject({ ownerId: "a", token: g3.token });
        expect(await a.release(g3)).toBe(true);
        expect(await keysUnder(`${lock}/`)).toEqual([]);
      } finally {
        await own.close();
        flaky.client.close();
      }
    });

    it("a release that could not reach etcd frees the lock once etcd answers again", async () => {
      const lock = name("failed-release-frees");
      const flaky = flakyClient(hostsOf(url));
      const own = new EtcdBackend({ client: flaky.client });
      try {
        const a = await own.openSession({ ttlMs: 20_000, ownerId: "a" });
        const b = await open();
        const g1 = await a.acquire(lock, { wait: true, signal: never() });
        if (g1 === null) throw new Error("not granted");
        flaky.failing = true;
        await expect(a.release(g1)).rejects.toBeInstanceOf(BackendUnavailableError);
        flaky.failing = false;
        // The session lives on (its lease is shared by its other locks): the next renewal
        // finishes the release, instead of the key living as long as the session.
        await a.keepAlive();
        const waited = await b.acquire(lock, { wait: true, signal: AbortSignal.timeout(10_000) });
        expect(waited).not.toBeNull();
        expect(waited?.token).toBeGreaterThan(g1.token);
      } finally {
        await own.close();
        flaky.client.close();
      }
    });

    it("cancelling a waiting acquire deletes its queue key", async () => {
      const lock = name("cancel");
      const a = await open();
      const b = await open();
      await a.acquire(lock, { wait: true, signal: never() });
      const controller = new AbortController();
      const waiting = b.acquire(lock, { wait: true, signal: controller.signal }).catch((e) => e);
      while ((await keysUnder(`${lock}/`)).length < 2) await new Promise((r) => setTimeout(r, 10));
      const reason = new Error("gave up");
      controller.abort(reason);
      expect(await waiting).toBe(reason);
      expect(await keysUnder(`${lock}/`)).toHaveLength(1);
    });

    it("nested lock names do not queue behind each other", async () => {
      const parent = name("nest");
      const a = await open();
      const b = await open();
      expect(await a.acquire(`${parent}/child`, { wait: false, signal: never() })).not.toBeNull();
      expect(await b.acquire(parent, { wait: false, signal: never() })).not.toBeNull();
      expect(await a.holder(parent)).toMatchObject({ ownerId: "owner" });
      const waited = await a.acquire(`${parent}/other`, { wait: true, signal: never() });
      expect(waited).not.toBeNull();
    });

    it("a try sees the holder behind keys of nested lock names", async () => {
      const parent = name("nest-try");
      const a = await open();
      const b = await open();
      const c = await open();
      // Under `parent/`, by age: a nested key, the holder's key, another nested key.
      expect(await a.acquire(`${parent}/x`, { wait: false, signal: never() })).not.toBeNull();
      const held = await b.acquire(parent, { wait: false, signal: never() });
      expect(held).not.toBeNull();
      expect(await a.acquire(`${parent}/y`, { wait: false, signal: never() })).not.toBeNull();
      expect(await c.acquire(parent, { wait: false, signal: never() })).toBeNull();
      expect(await a.holder(parent)).toMatchObject({ token: held?.token });
      if (held) expect(await b.release(held)).toBe(true);
      const next = await c.acquire(parent, { wait: false, signal: never() });
      expect(next?.token).toBeGreaterThan(held?.token ?? 0n);
    });

    it("keepAlive renews the lease, and throws SessionLostError (aborting lost) once it is gone", async () => {
      const lock = name("keepalive");
      const a = (await open(2_000)) as BackendSession & { leaseId: string };
      await a.acquire(lock, { wait: false, signal: never() });
      for (let i = 0; i < 4; i++) {
        await new Promise((r) => setTimeout(r, 700));
        await a.keepAlive();
      }
      expect(await a.holder(lock)).toMatchObject({ ownerId: "owner" });
      await client.leaseClient.leaseRevoke({ ID: a.leaseId });
      await expect(a.keepAlive()).rejects.toBeInstanceOf(SessionLostError);
      expect(a.lost?.aborted).toBe(true);
      expect(a.lost?.reason).toBeInstanceOf(SessionLostError);
      expect(await a.holder(lock)).toBeNull();
    });

    it("TTLs are whole seconds of at least 2 s: anything else is a ConfigError naming ttlMs", async () => {
      for (const ttlMs of [1_000, 1_999, 2_500, 10]) {
        const error = await backend.openSession({ ttlMs, ownerId: "x" }).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(ConfigError);
        expect((error as ConfigError).field).toBe("ttlMs");
        expect((error as ConfigError).message).toMatch(/whole seconds.*2 s minimum/);
      }
      // The coordinator refuses it when it is created, before any I/O.
      expect(() => createCoordinator({ backend, ttlMs: 1_500 })).toThrow(ConfigError);
      const session = await open(3_000);
      expect(session.ttlMs).toBe(3_000);
    });

    it("etcd:// URLs: the registry loads this package; bad URLs are ConfigErrors before any I/O", async () => {
      const fromUrl = await createBackend(`${url}?prefix=${encodeURIComponent("baton-test/")}`);
      try {
        expect(fromUrl.kind).toBe("etcd");
        const c = createCoordinator({ backend: fromUrl, ttlMs: 2_000 });
        const lock = await c.acquire(name("url"));
        expect(await keysUnder(`baton-test/${lock.name}/`)).toHaveLength(1);
        await c.close();
      } finally {
        await fromUrl.close();
      }
      for (const bad of [
        "etcd://",
        "etcd://h:1/path",
        "etcd://h:1?nope=1",
        "etcd://h:1?requestTimeoutMs=x",
      ]) {
        await expect(createBackend(bad)).rejects.toBeInstanceOf(ConfigError);
      }
      expect(() => new EtcdBackend({})).toThrow(ConfigError);
      expect(() => new EtcdBackend({ hosts: ["h:1"], requestTimeoutMs: 5 })).toThrow(ConfigError);
    });
  });
});
