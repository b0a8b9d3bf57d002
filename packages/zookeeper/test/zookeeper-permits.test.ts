import { randomUUID } from "node:crypto";
import { readPermits, semaphorePermits, track, writePermits } from "@baton/conformance";
import { describeBackend } from "@baton/conformance/harness";
import { type BackendSession, type Grant, PermitLimitError, READ_WRITE_LIMIT } from "@baton/core";
import type { Client } from "node-zookeeper-client";
import zookeeper from "node-zookeeper-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ClientFactory, encodeLockName, ZookeeperBackend } from "../src/index.js";
import {
  childrenOf,
  currentChildrenOf,
  inspector,
  removeTree,
  waitUntil,
} from "./support/counting-clients.js";
import { ProxiedClients } from "./support/proxied-clients.js";

const never = new AbortController().signal;

type Session = Required<
  Pick<BackendSession, "acquirePermits" | "permitHolders" | "downgrade" | "release">
> &
  BackendSession;

/** Long enough for a waiter that would (wrongly) be granted to be granted. */
const SETTLE_MS = 400;
const settle = () => new Promise((r) => setTimeout(r, SETTLE_MS));

/** The operation code of ZooKeeper's ping, which the connection sends on its own when idle. */
const PING = 11;

/** Clients that count every request they send but pings (the session's heartbeat). */
class RequestCountingClients {
  requests = 0;
  readonly factory: ClientFactory = (request) => {
    const client = zookeeper.createClient(
      request.hosts.map((h) => `${h.host}:${h.port}`).join(","),
      { sessionTimeout: request.sessionTimeoutMs, spinDelay: 100, retries: 0 },
    );
    const manager = (client as unknown as { connectionManager: Record<string, unknown> })
      .connectionManager;
    const queue = (manager.queue as (...args: unknown[]) => unknown).bind(manager);
    manager.queue = (...args: unknown[]) => {
      const type = (args[0] as { header?: { type?: number } }).header?.type;
      if (type !== PING) this.requests++;
      return queue(...args);
    };
    return client;
  };
}

describeBackend("zookeeper", (url) => {
  const prefix = `p${randomUUID().slice(0, 8)}`;
  let raw: Client;
  const backends: ZookeeperBackend[] = [];
  const backend = (extra: object = {}) => {
    const b = ZookeeperBackend.fromUrl(url, { prefix, ...extra });
    backends.push(b);
    return b;
  };
  const dirOf = (name: string) => `/${prefix}-permits/${encodeLockName(name)}`;
  const open = async (b: ZookeeperBackend, ownerId: string, ttlMs = 10_000) =>
    (await b.openSession({ ttlMs, ownerId })) as Session;
  const queued = async (name: string, count: number) =>
    await waitUntil(
      async () => (await childrenOf(raw, dirOf(name))).length === count,
      10_000,
      `${count} entries are queued on "${name}"`,
    );

  beforeAll(async () => {
    raw = await inspector(url.slice("zookeeper://".length));
  });
  afterAll(async () => {
    await Promise.allSettled(backends.map((b) => b.close()));
    await removeTree(raw, `/${prefix}-permits`).catch(() => undefined);
    raw.close();
  });

  describe("permits", () => {
    it("keeps a semaphore's entries in a key space of their own, named like Curator's leases", async () => {
      const b = backend();
      const s = await open(b, "layout");
      try {
        const lock = (await s.acquire("shared-name", { wait: false, signal: never })) as Grant;
        const permit = (await s.acquirePermits(
          "shared-name",
          semaphorePermits(5, 3, { wait: false }),
        )) as Grant;
        expect(lock).not.toBeNull();
        expect(permit).not.toBeNull();
        const [entry] = await childrenOf(raw, dirOf("shared-name"));
        expect(entry).toMatch(/^_c_[0-9a-f-]{36}-lease-3-of-5-\d{10}$/);
        expect(await childrenOf(raw, `/${prefix}/shared-name`)).toHaveLength(1);
        expect(await s.release(permit)).toBe(true);
        expect(await s.release(lock)).toBe(true);
      } finally {
        await s.close();
      }
    });

    it("never lets a request overtake a waiting one: a 3-permit request is not starved by 1-permit ones", async () => {
      const b = backend();
      const name = "fifo";
      const [s1, s2, s3, s4] = (await Promise.all(["a", "b", "c", "d"].map((o) => open(b, o)))) as [
        Session,
        Session,
        Session,
        Session,
      ];
      try {
        const a = (await s1.acquirePermits(name, semaphorePermits(3, 1, { wait: false }))) as Grant;
        const b1 = (await s2.acquirePermits(
          name,
          semaphorePermits(3, 1, { wait: false }),
        )) as Grant;
        expect(a.token).toBeLessThan(b1.token);
        const big = track(s3.acquirePermits(name, semaphorePermits(3, 3)));
        await queued(name, 3);
        // One permit is free, but the 3-permit request waits ahead: the small one must wait.
        expect(await s4.acquirePermits(name, semaphorePermits(3, 1, { wait: false }))).toBeNull();
        const small = track(s4.acquirePermits(name, semaphorePermits(3, 1)));
        await queued(name, 4);
        await settle();
        expect(big.settled()).toBe(false);
        expect(small.settled()).toBe(false);
        expect(await s1.release(a)).toBe(true);
        await settle();
        expect(big.settled()).toBe(false);
        expect(small.settled()).toBe(false);
        expect(await s2.release(b1)).toBe(true);
        const g = (await big.promise) as Grant;
        expect(g.token).toBeGreaterThan(b1.token);
        await settle();
        expect(small.settled()).toBe(false);
        expect((await s1.permitHolders(name)).map((h) => [h.ownerId, h.permits])).toEqual([
          ["c", 3],
        ]);
        expect(await s3.release(g)).toBe(true);
        const last = (await small.promise) as Grant;
        expect(last.token).toBeGreaterThan(g.token);
        expect(await s4.release(last)).toBe(true);
      } finally {
        await Promise.allSettled([s1, s2, s3, s4].map((s) => s.close()));
      }
    });

    it("holds readers that come behind a waiting writer until the writer has had its turn", async () => {
      const b = backend();
      const name = "writer-preference";
      const [s1, s2, s3] = (await Promise.all(["r1", "w", "r2"].map((o) => open(b, o)))) as [
        Session,
        Session,
        Session,
      ];
      try {
        const r1 = (await s1.acquirePermits(name, readPermits({ wait: false }))) as Grant;
        expect(r1).not.toBeNull();
        const w = track(s2.acquirePermits(name, writePermits()));
        await queued(name, 2);
        expect(await s3.acquirePermits(name, readPermits({ wait: false }))).toBeNull();
        const r2 = track(s3.acquirePermits(name, readPermits()));
        await queued(name, 3);
        await settle();
        expect(w.settled()).toBe(false);
        expect(r2.settled()).toBe(false);
        expect(await s1.release(r1)).toBe(true);
        const write = (await w.promise) as Grant;
        expect(write.token).toBeGreaterThan(r1.token);
        await settle();
        expect(r2.settled()).toBe(false);
        expect(await s2.release(write)).toBe(true);
        const read = (await r2.promise) as Grant;
        expect(read.token).toBe(write.token);
        expect(await s3.release(read)).toBe(true);
      } finally {
        await Promise.allSettled([s1, s2, s3].map((s) => s.close()));
      }
    });

    it("gives permits and writes rising tokens, and a read the newest write's, even after the key had no holders", async () => {
      const b = backend();
      const name = "tokens";
      const s = await open(b, "tokens");
      const other = await open(b, "other");
      try {
        const firstRead = (await s.acquirePermits(name, readPermits({ wait: false }))) as Grant;
        expect(firstRead.token).toBe(0n);
        expect(await s.release(firstRead)).toBe(true);
        const w1 = (await s.acquirePermits(name, writePermits({ wait: false }))) as Grant;
        expect(w1.token).toBeGreaterThan(0n);
        expect(await s.release(w1)).toBe(true);
        expect(await currentChildrenOf(raw, dirOf(name))).toEqual([]);
        // Another session, on a key with no holder left: the newest write's token still.
        const r1 = (await other.acquirePermits(name, readPermits({ wait: false }))) as Grant;
        expect(r1.token).toBe(w1.token);
        const r2 = (await s.acquirePermits(name, readPermits({ wait: false }))) as Grant;
        expect(r2.token).toBe(w1.token);
        const holders = await s.permitHolders(name);
        expect(holders.map((h) => [h.ownerId, h.mode, h.permits, h.token])).toEqual([
          ["other", "read", 1, w1.token],
          ["tokens", "read", 1, w1.token],
        ]);
        expect(await other.release(r1)).toBe(true);
        expect(await s.release(r2)).toBe(true);
        const w2 = (await other.acquirePermits(name, writePermits({ wait: false }))) as Grant;
        expect(w2.token).toBeGreaterThan(w1.token);
        expect(await other.release(w2)).toBe(true);
        const r3 = (await s.acquirePermits(name, readPermits({ wait: false }))) as Grant;
        expect(r3.token).toBe(w2.token);
        expect(await s.release(r3)).toBe(true);
        // A semaphore's permits: each grant a new, greater token.
        let last = 0n;
        for (let i = 0; i < 5; i++) {
          const g = (await s.acquirePermits(
            "tokens-sem",
            semaphorePermits(2, 1, { wait: false }),
          )) as Grant;
          expect(g.token).toBeGreaterThan(last);
          last = g.token;
          expect(await s.release(g)).toBe(true);
        }
      } finally {
        await Promise.allSettled([s.close(), other.close()]);
      }
    });

    it("gives a permit noticed late a greater token than one granted and released meanwhile", async () => {
      const proxied = new ProxiedClients();
      try {
        const b = backend();
        const slowBackend = backend({ createClient: proxied.factory });
        const name = "late-notice";
        const holder = await open(b, "holder");
        const slow = await open(slowBackend, "slow");
        const fast = await open(b, "fast");
        const held = (await holder.acquirePermits(
          name,
          semaphorePermits(2, 2, { wait: false }),
        )) as Grant;
        // The slow session queues first, then hears everything 300 ms late.
        const slowGrant = track(slow.acquirePermits(name, semaphorePermits(2, 1)));
        await queued(name, 2);
        const fastGrant = fast.acquirePermits(name, semaphorePermits(2, 1));
        await queued(name, 3);
        await settle();
        for (const proxy of proxied.proxiesOf(slow)) proxy.delayReplies(300);
        expect(await holder.release(held)).toBe(true);
        // Both are let in by that release; the fast one notices first and is done at once.
        const quick = (await fastGrant) as Grant;
        expect(await fast.release(quick)).toBe(true);
        expect(slowGrant.settled()).toBe(false);
        const late = (await slowGrant.promise) as Grant;
        expect(late.token).toBeGreaterThan(quick.token);
        expect(quick.token).toBeGreaterThan(held.token);
        for (const proxy of proxied.proxiesOf(slow)) proxy.forward();
        expect(await slow.release(late)).toBe(true);
        await Promise.allSettled([holder.close(), slow.close(), fast.close()]);
      } finally {
        await proxied.close();
      }
    });

    it("frees the permits of a session that died without releasing them within its timeout", async () => {
      const proxied = new ProxiedClients();
      try {
        const b = backend({ createClient: proxied.factory });
        const name = "dead-holder";
        const doomed = await open(b, "doomed", 2_000);
        const waiter = await open(b, "waiter", 10_000);
        const held = (await doomed.acquirePermits(
          name,
          semaphorePermits(2, 2, { wait: false }),
        )) as Grant;
        expect(held).not.toBeNull();
        const started = performance.now();
        const wait = waiter.acquirePermits(name, semaphorePermits(2, 1));
        await queued(name, 2);
        proxied.blackhole(doomed);
        const granted = (await wait) as Grant;
        const tookMs = performance.now() - started;
        expect(granted.token).toBeGreaterThan(held.token);
        // The ensemble expires the silent session after its timeout (2 s), not before.
        expect(tookMs).toBeGreaterThan(1_500);
        expect(tookMs).toBeLessThan(doomed.ttlMs + 8_000);
        expect(await waiter.release(granted)).toBe(true);
        await Promise.allSettled([doomed.close(), waiter.close()]);
      } finally {
        await proxied.close();
      }
    });

    it("leaves no entry behind when a wait is aborted, or a try finds too few permits free", async () => {
      const b = backend();
      const name = "aborted";
      const holder = await open(b, "holder");
      const waiter = await open(b, "waiter");
      try {
        const held = (await holder.acquirePermits(
          name,
          semaphorePermits(2, 2, { wait: false }),
        )) as Grant;
        expect(
          await waiter.acquirePermits(name, semaphorePermits(2, 1, { wait: false })),
        ).toBeNull();
        expect(await currentChildrenOf(raw, dirOf(name))).toHaveLength(1);
        const controller = new AbortController();
        const reason = new Error("gave up");
        const wait = waiter.acquirePermits(
          name,
          semaphorePermits(2, 1, { signal: controller.signal }),
        );
        wait.catch(() => undefined);
        await queued(name, 2);
        controller.abort(reason);
        await expect(wait).rejects.toBe(reason);
        expect(await currentChildrenOf(raw, dirOf(name))).toHaveLength(1);
        // An aborted read behind a write leaves nothing behind either.
        const write = (await holder.acquirePermits(
          "aborted-rw",
          writePermits({ wait: false }),
        )) as Grant;
        const readStop = new AbortController();
        const read = waiter.acquirePermits("aborted-rw", readPermits({ signal: readStop.signal }));
        read.catch(() => undefined);
        await queued("aborted-rw", 2);
        readStop.abort(reason);
        await expect(read).rejects.toBe(reason);
        expect(await currentChildrenOf(raw, dirOf("aborted-rw"))).toHaveLength(1);
        expect(await holder.release(write)).toBe(true);
        expect(await holder.release(held)).toBe(true);
      } finally {
        await Promise.allSettled([holder.close(), waiter.close()]);
      }
    });

    it("rejects another number of permits while the key has holders, and forgets it once they are gone", async () => {
      const b = backend();
      const name = "limit";
      const s1 = await open(b, "first");
      const s2 = await open(b, "second");
      try {
        const held = (await s1.acquirePermits(
          name,
          semaphorePermits(3, 1, { wait: false }),
        )) as Grant;
        const refused = s2.acquirePermits(name, semaphorePermits(5, 1));
        await expect(refused).rejects.toBeInstanceOf(PermitLimitError);
        await expect(refused).rejects.toMatchObject({ key: name, stored: 3, requested: 5 });
        await expect(s2.acquirePermits(name, writePermits({ wait: false }))).rejects.toMatchObject({
          stored: 3,
          requested: READ_WRITE_LIMIT,
        });
        expect(await currentChildrenOf(raw, dirOf(name))).toHaveLength(1);
        expect(await s1.release(held)).toBe(true);
        const five = (await s2.acquirePermits(
          name,
          semaphorePermits(5, 5, { wait: false }),
        )) as Grant;
        expect(five).not.toBeNull();
        expect(await s2.release(five)).toBe(true);
      } finally {
        await Promise.allSettled([s1.close(), s2.close()]);
      }
    });

    it("never grants two limits at once when requests with different limits race", async () => {
      const b = backend();
      const sessions = await Promise.all(
        Array.from({ length: 12 }, (_, i) => open(b, `racer-${i}`)),
      );
      try {
        for (let round = 0; round < 3; round++) {
          const name = `limit-race-${round}`;
          const outcomes = await Promise.allSettled(
            sessions.map((s, i) =>
              s.acquirePermits(name, semaphorePermits(i % 2 === 0 ? 20 : 30, 1, { wait: false })),
            ),
          );
          const limits = new Set<number>();
          outcomes.forEach((o, i) => {
            if (o.status === "fulfilled" && o.value !== null) limits.add(i % 2 === 0 ? 20 : 30);
            if (o.status === "rejected") expect(o.reason).toBeInstanceOf(PermitLimitError);
          });
          expect(limits.size).toBeLessThanOrEqual(1);
          await Promise.all(
            outcomes.map(async (o, i) => {
              if (o.status === "fulfilled" && o.value !== null) {
                expect(await sessions[i]?.release(o.value)).toBe(true);
              }
            }),
          );
          expect(await currentChildrenOf(raw, dirOf(name))).toEqual([]);
        }
      } finally {
        await Promise.allSettled(sessions.map((s) => s.close()));
      }
    });

    it("downgrades a write to a read with its token in one step: queued readers start, a queued writer still waits", async () => {
      const b = backend();
      const name = "downgrade";
      const [sw, sr1, sw2, sr2] = (await Promise.all(
        ["writer", "reader-1", "writer-2", "reader-2"].map((o) => open(b, o)),
      )) as [Session, Session, Session, Session];
      try {
        const write = (await sw.acquirePermits(name, writePermits({ wait: false }))) as Grant;
        const r1 = track(sr1.acquirePermits(name, readPermits()));
        await queued(name, 2);
        const w2 = track(sw2.acquirePermits(name, writePermits()));
        await queued(name, 3);
        const r2 = track(sr2.acquirePermits(name, readPermits()));
        await queued(name, 4);
        await settle();
        expect([r1.settled(), w2.settled(), r2.settled()]).toEqual([false, false, false]);
        const read = (await sw.downgrade(write)) as Grant;
        expect(read.token).toBe(write.token);
        const first = (await r1.promise) as Grant;
        expect(first.token).toBe(write.token);
        await settle();
        // The second writer stays behind the downgraded read; the reader behind it waits.
        expect(w2.settled()).toBe(false);
        expect(r2.settled()).toBe(false);
        const holders = await sw.permitHolders(name);
        expect(holders.map((h) => [h.ownerId, h.mode, h.token])).toEqual([
          ["writer", "read", write.token],
          ["reader-1", "read", write.token],
        ]);
        // The write is gone: it cannot be downgraded or released again.
        expect(await sw.downgrade(write)).toBeNull();
        expect(await sw.release(write)).toBe(false);
        expect(await sw.release(read)).toBe(true);
        await settle();
        expect(w2.settled()).toBe(false);
        expect(await sr1.release(first)).toBe(true);
        const second = (await w2.promise) as Grant;
        expect(second.token).toBeGreaterThan(write.token);
        expect(await sw2.release(second)).toBe(true);
        expect(((await r2.promise) as Grant).token).toBe(second.token);
      } finally {
        await Promise.allSettled([sw, sr1, sw2, sr2].map((s) => s.close()));
      }
    });

    it("a waiter keeps its place in the queue across a connection drop", async () => {
      const proxied = new ProxiedClients();
      try {
        const b = backend();
        const name = "reconnect";
        const holder = await open(b, "holder");
        const dropped = await open(backend({ createClient: proxied.factory }), "dropped", 8_000);
        const later = await open(b, "later");
        const held = (await holder.acquirePermits(
          name,
          semaphorePermits(1, 1, { wait: false }),
        )) as Grant;
        const first = track(dropped.acquirePermits(name, semaphorePermits(1, 1)));
        await queued(name, 2);
        const second = track(later.acquirePermits(name, semaphorePermits(1, 1)));
        await queued(name, 3);
        for (const proxy of proxied.proxiesOf(dropped)) proxy.cut();
        await new Promise((r) => setTimeout(r, 300));
        for (const proxy of proxied.proxiesOf(dropped)) proxy.forward();
        expect(await holder.release(held)).toBe(true);
        const granted = (await first.promise) as Grant;
        expect(granted.token).toBeGreaterThan(held.token);
        await settle();
        expect(second.settled()).toBe(false);
        expect(await dropped.release(granted)).toBe(true);
        expect(((await second.promise) as Grant).token).toBeGreaterThan(granted.token);
        await Promise.allSettled([holder.close(), dropped.close(), later.close()]);
      } finally {
        await proxied.close();
      }
    });

    it("a downgrade whose reply is lost on a connection drop still gives the read, and only one", async () => {
      const proxied = new ProxiedClients();
      try {
        const b = backend({ createClient: proxied.factory });
        const name = "lost-downgrade";
        const s = await open(b, "downgrader", 8_000);
        const write = (await s.acquirePermits(name, writePermits({ wait: false }))) as Grant;
        const proxies = proxied.proxiesOf(s);
        // Requests and replies each arrive 500 ms late; cut while the multi's reply is in flight.
        for (const proxy of proxies) proxy.delay(500);
        const downgrading = s.downgrade(write);
        await waitUntil(
          async () => (await childrenOf(raw, dirOf(name))).some((c) => c.includes("__READ__at-")),
          5_000,
          "the downgrade reached the server",
        );
        for (const proxy of proxies) proxy.cut();
        await new Promise((r) => setTimeout(r, 200));
        for (const proxy of proxies) proxy.forward();
        const read = (await downgrading) as Grant;
        expect(read.token).toBe(write.token);
        const children = await currentChildrenOf(raw, dirOf(name));
        expect(children).toHaveLength(1);
        expect((read.handle as { path: string }).path.endsWith(children[0] as string)).toBe(true);
        expect(await s.permitHolders(name)).toMatchObject([
          { ownerId: "downgrader", mode: "read", token: write.token },
        ]);
        expect(await s.release(read)).toBe(true);
        await s.close();
      } finally {
        await proxied.close();
      }
    });

    it("renews 10,000 permits of one session with the session alone: no request per permit", async () => {
      const counting = new RequestCountingClients();
      const b = backend({ createClient: counting.factory });
      const name = "many";
      const s = await open(b, "many", 2_000);
      const other = await open(b, "other", 2_000);
      try {
        const grants: Grant[] = [];
        for (let i = 0; i < 1_000; i++) {
          grants.push(
            (await s.acquirePermits(name, semaphorePermits(10_000, 10, { wait: false }))) as Grant,
          );
        }
        expect(grants.every((g) => g !== null)).toBe(true);
        // Three session timeouts with only the keepalive loop's calls: each is one request.
        const before = counting.requests;
        const deadline = performance.now() + 3 * s.ttlMs;
        let renewals = 0;
        while (performance.now() < deadline) {
          await s.keepAlive();
          await other.keepAlive();
          renewals++;
          await new Promise((r) => setTimeout(r, s.ttlMs / 3));
        }
        expect(counting.requests - before).toBe(2 * renewals);
        expect(
          await other.acquirePermits(name, semaphorePermits(10_000, 1, { wait: false })),
        ).toBeNull();
        const holders = await other.permitHolders(name);
        expect(holders.reduce((sum, h) => sum + h.permits, 0)).toBe(10_000);
        expect(new Set(holders.map((h) => h.ownerId))).toEqual(new Set(["many"]));
      } finally {
        await Promise.allSettled([s.close(), other.close()]);
      }
      expect(await currentChildrenOf(raw, dirOf(name))).toEqual([]);
    }, 120_000);
  });
});
