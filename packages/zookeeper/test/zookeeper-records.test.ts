import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import { type BackendSession, BackendUnavailableError } from "@baton/core";
import type { Client, Stat } from "node-zookeeper-client";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { encodeLockName, ZookeeperBackend } from "../src/index.js";
import { childrenOf, inspector, removeTree, waitUntil } from "./support/counting-clients.js";
import { ProxiedClients } from "./support/proxied-clients.js";

const TTL = 4_000;
const never = new AbortController().signal;

/** A session's record calls (the optional pair of `BackendSession`). */
function records(session: BackendSession) {
  const { readRecord, writeRecord } = session;
  if (readRecord === undefined || writeRecord === undefined) {
    throw new Error("this ZooKeeper session keeps no records");
  }
  return {
    read: (key: string) => readRecord.call(session, key),
    write: (key: string, value: string, expected: string | null) =>
      writeRecord.call(session, key, value, expected),
  };
}

/** Data and stat of `path` as a separate client sees them; `null` when there is no node. */
function node(client: Client, path: string): Promise<{ data: string; stat: Stat } | null> {
  return new Promise((resolve, reject) => {
    client.getData(path, (error, data, stat) => {
      if ((error as { getCode?: () => number } | null)?.getCode?.() === -101) resolve(null);
      else if (error) reject(error);
      else resolve({ data: (data ?? Buffer.alloc(0)).toString("utf8"), stat });
    });
  });
}

/** Whether a node is persistent: no ephemeral owner (ZooKeeper reports 0 for persistent). */
const persistent = (stat: Stat) => stat.ephemeralOwner.equals(Buffer.alloc(8));

describeBackend("zookeeper", (url) => {
  const chroot = `r${randomUUID().slice(0, 8)}`;
  let raw: Client;
  const cleanups: (() => Promise<unknown>)[] = [];
  const backend = (options: { prefix?: string; proxied?: ProxiedClients } = {}) => {
    const b = ZookeeperBackend.fromUrl(`${url}/${chroot}/apps`, {
      ...(options.prefix === undefined ? {} : { prefix: options.prefix }),
      ...(options.proxied === undefined ? {} : { createClient: options.proxied.factory }),
    });
    cleanups.push(() => b.close());
    return b;
  };

  beforeAll(async () => {
    raw = await inspector(url.slice("zookeeper://".length));
  });
  afterEach(async () => {
    for (const f of cleanups.splice(0).reverse()) await f().catch(() => undefined);
  });
  afterAll(async () => {
    await removeTree(raw, `/${chroot}`).catch(() => undefined);
    raw.close();
  });

  describe("records", () => {
    it("keeps a record as a persistent node beside the locks root, under the URL's chroot, with persistent parents", async () => {
      const b = backend({ prefix: "billing" });
      const s = await b.openSession({ ttlMs: TTL, ownerId: "writer" });
      const key = "nightly/slot/2026-12-01T02:00:00Z";
      const version = await records(s).write(key, "done", null);
      const grant = await s.acquire(key, { wait: false, signal: never });
      expect(grant).not.toBeNull();
      const recordsRoot = `/${chroot}/apps/billing-records`;
      const record = await node(raw, `${recordsRoot}/${encodeLockName(key)}`);
      expect(record?.data).toBe("done");
      // The version: the node's data version and the digits of its incarnation child.
      expect(version).toMatch(/^1\.[0-9a-f]{16}$/);
      expect(`${record?.stat.version}.${version?.slice(2)}`).toBe(version);
      expect(await childrenOf(raw, `${recordsRoot}/${encodeLockName(key)}`)).toEqual([
        `incarnation-${version?.slice(2)}`,
      ]);
      // The lock of the same name lives under the locks root, its sibling.
      expect(
        (await node(raw, `/${chroot}/apps/billing/${encodeLockName(key)}`))?.stat.numChildren,
      ).toBe(1);
      await s.close();
      await b.close();
      // Every node on the record's path outlives the session that created it.
      for (const path of [`/${chroot}`, `/${chroot}/apps`, recordsRoot]) {
        const parent = await node(raw, path);
        expect(parent, path).not.toBeNull();
        expect(persistent((parent as { stat: Stat }).stat), path).toBe(true);
      }
      const kept = await node(raw, `${recordsRoot}/${encodeLockName(key)}`);
      expect(kept?.data).toBe("done");
      expect(persistent((kept as { stat: Stat }).stat)).toBe(true);
    });

    it("a record written by one session is read, and written on, by a new client once the writer's session has ended", async () => {
      const key = `shared-${randomUUID()}`;
      const writer = backend();
      const s1 = await writer.openSession({ ttlMs: TTL, ownerId: "writer" });
      const v1 = await records(s1).write(key, "running", null);
      expect(v1).toMatch(/^1\.[0-9a-f]{16}$/);
      await s1.close();
      await writer.close();
      const reader = backend();
      const s2 = await reader.openSession({ ttlMs: TTL, ownerId: "reader" });
      expect(await records(s2).read(key)).toEqual({ value: "running", version: v1 });
      const v2 = await records(s2).write(key, "done", v1);
      expect(v2).toBe(`2${v1?.slice(1)}`);
      expect(await records(s2).read(key)).toEqual({ value: "done", version: v2 });
      expect(await records(s2).read(`missing-${randomUUID()}`)).toBeNull();
    });

    it("a refused write writes nothing: a stale version, ZooKeeper's -1 (any version), a version of a missing record", async () => {
      const b = backend();
      const s = await b.openSession({ ttlMs: TTL, ownerId: "writer" });
      const { read, write } = records(s);
      const key = `refused-${randomUUID()}`;
      const path = `/${chroot}/apps/baton-records/${encodeLockName(key)}`;
      const v0 = (await write(key, "one", null)) as string;
      const v1 = (await write(key, "two", v0)) as string;
      const before = await node(raw, path);
      expect(before?.data).toBe("two");
      // A version without the incarnation, or with another one, or data version 0 with it.
      const other = `${v1.slice(0, 2)}${"0".repeat(16)}`;
      for (const expected of [v0, "-1", "not-a-version", null, "2", other, `0${v0.slice(1)}`]) {
        expect(await write(key, "overwritten", expected), `${expected}`).toBeNull();
      }
      const after = await node(raw, path);
      expect(after?.data).toBe("two");
      expect(after?.stat.version).toBe(before?.stat.version);
      expect(after?.stat.mzxid.equals((before as { stat: Stat }).stat.mzxid)).toBe(true);
      expect(await read(key)).toEqual({ value: "two", version: v1 });
      // A version given for a record that does not exist: refused, and no node is created.
      const missing = `missing-${randomUUID()}`;
      expect(await write(missing, "created?", "0")).toBeNull();
      expect(await write(missing, "created?", v0)).toBeNull();
      expect(
        await node(raw, `/${chroot}/apps/baton-records/${encodeLockName(missing)}`),
      ).toBeNull();
    });

    it("a record node without an incarnation (written by an older release) is written by its data version, until it is created again", async () => {
      const b = backend();
      const s = await b.openSession({ ttlMs: TTL, ownerId: "writer" });
      const { read, write } = records(s);
      const key = `older-${randomUUID()}`;
      const path = `/${chroot}/apps/baton-records/${encodeLockName(key)}`;
      await write(`root-${randomUUID()}`, "makes the records root", null);
      await new Promise<void>((resolve, reject) =>
        raw.create(path, Buffer.from("running"), (e) => (e ? reject(e) : resolve())),
      );
      expect(await read(key)).toEqual({ value: "running", version: "0" });
      expect(await write(key, "done", "0")).toBe("1");
      expect(await read(key)).toEqual({ value: "done", version: "1" });
      await removeTree(raw, path);
      const fresh = (await write(key, "newer", null)) as string;
      expect(fresh).toMatch(/^1\.[0-9a-f]{16}$/);
      // The data version matches, but the node is not the one that version was read from.
      expect(await write(key, "older", "1")).toBeNull();
      expect(await read(key)).toEqual({ value: "newer", version: fresh });
    });

    it("a write whose reply was lost with the connection resolves its version once the client reconnects", async () => {
      const proxied = new ProxiedClients();
      cleanups.push(() => proxied.close());
      const b = backend({ proxied });
      const s = await b.openSession({ ttlMs: TTL, ownerId: "writer" });
      const { read, write } = records(s);
      const key = `lost-reply-${randomUUID()}`;
      const path = `/${chroot}/apps/baton-records/${encodeLockName(key)}`;
      // The server acts on the write, its reply never arrives, then the connection breaks.
      const lostReply = async (value: string, expected: string | null, version: number) => {
        for (const p of proxied.proxiesOf(s)) p.dropReplies();
        const writing = write(key, value, expected);
        writing.catch(() => undefined);
        await waitUntil(
          async () => (await node(raw, path))?.stat.version === version,
          10_000,
          "the server applied the write",
        );
        for (const p of proxied.proxiesOf(s)) {
          p.cut();
          p.forward();
        }
        return await writing;
      };
      const created = (await lostReply("running", null, 1)) as string;
      expect(created).toMatch(/^1\.[0-9a-f]{16}$/);
      const updated = `2${created.slice(1)}`;
      expect(await lostReply("done", created, 2)).toBe(updated);
      expect(await read(key)).toEqual({ value: "done", version: updated });
      // A refused write is still refused after the reconnect.
      expect(await write(key, "again", created)).toBeNull();
    });

    it("a write whose reply was lost, and whose node then changed, fails as unavailable", async () => {
      const proxied = new ProxiedClients();
      cleanups.push(() => proxied.close());
      const b = backend({ proxied });
      const s = await b.openSession({ ttlMs: TTL, ownerId: "writer" });
      const other = await backend().openSession({ ttlMs: TTL, ownerId: "other" });
      const key = `lost-then-changed-${randomUUID()}`;
      const path = `/${chroot}/apps/baton-records/${encodeLockName(key)}`;
      const created = (await records(s).write(key, "running", null)) as string;
      expect(created).toMatch(/^1\.[0-9a-f]{16}$/);
      for (const p of proxied.proxiesOf(s)) p.dropReplies();
      const writing = records(s).write(key, "done", created);
      writing.catch(() => undefined);
      await waitUntil(
        async () => (await node(raw, path))?.stat.version === 2,
        10_000,
        "the server applied the write",
      );
      // Another writer changes the record before this client hears back: the outcome of the
      // lost write cannot be told from the record, so it is reported unknown, not refused.
      expect(await records(other).write(key, "taken over", `2${created.slice(1)}`)).toBe(
        `3${created.slice(1)}`,
      );
      for (const p of proxied.proxiesOf(s)) {
        p.cut();
        p.forward();
      }
      await expect(writing).rejects.toBeInstanceOf(BackendUnavailableError);
    });
  });
});
