import { randomUUID } from "node:crypto";
import { TcpProxy } from "@baton/conformance/faults";
import { describeBackend } from "@baton/conformance/harness";
import { type BackendSession, BackendUnavailableError } from "@baton/core";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { lockKeys, RedisBackend, recordKey } from "../src/index.js";

const TTL = 4_000;
const never = new AbortController().signal;

/** A session's record calls (the optional pair of `BackendSession`). */
function records(session: BackendSession) {
  const { readRecord, writeRecord } = session;
  if (readRecord === undefined || writeRecord === undefined) {
    throw new Error("this Redis session keeps no records");
  }
  return {
    read: (key: string) => readRecord.call(session, key),
    write: (key: string, value: string, expected: string | null) =>
      writeRecord.call(session, key, value, expected),
  };
}

function hostPort(url: string): { host: string; port: number } {
  const m = /^redis:\/\/([^:/]+):(\d+)/.exec(url);
  if (m === null) throw new Error(`unexpected url ${url}`);
  return { host: m[1] as string, port: Number(m[2]) };
}

async function waitUntil(check: () => Promise<boolean>, ms = 5_000): Promise<void> {
  const deadline = performance.now() + ms;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 10));
  }
}

describeBackend("redis", (url) => {
  describe("redis records", () => {
    const prefix = `rec-${randomUUID().slice(0, 8)}:`;
    let raw: Redis;
    const cleanups: (() => Promise<unknown>)[] = [];
    const backend = (options: { url?: string; client?: Redis } = {}) => {
      const b =
        options.client === undefined
          ? new RedisBackend({ url: options.url ?? url, keyPrefix: prefix })
          : new RedisBackend({ client: options.client, keyPrefix: prefix });
      cleanups.push(() => b.close());
      return b;
    };
    const session = async (b: RedisBackend, ownerId = "writer") => {
      const s = await b.openSession({ ttlMs: TTL, ownerId });
      cleanups.push(() => s.close());
      return s;
    };

    beforeAll(async () => {
      raw = new Redis(url, { lazyConnect: true });
      await raw.connect();
    });
    afterEach(async () => {
      for (const f of cleanups.splice(0).reverse()) await f().catch(() => undefined);
    });
    afterAll(() => raw.disconnect());

    it("keeps a record as a hash of value and version under the key prefix, with no expiry, read and written on by another process after the writer closed", async () => {
      const key = `nightly/slot/2026-12-01T02:00:00Z/${randomUUID()}`;
      const writer = backend();
      const s1 = await session(writer);
      const v1 = await records(s1).write(key, "running", null);
      expect(v1).toBe("1");
      // Holding the lock of the same name beside it, then letting it go, leaves the record.
      const grant = await s1.acquire(key, { wait: false, signal: never });
      expect(grant).not.toBeNull();
      const where = recordKey(prefix, key);
      expect(where).toBe(`${prefix}records:{${key}}`);
      expect(where).not.toBe(lockKeys(prefix, key).lock);
      expect(await raw.type(where)).toBe("hash");
      expect(await raw.hgetall(where)).toEqual({ value: "running", version: "1" });
      expect(await raw.pttl(where)).toBe(-1);
      await s1.close();
      await writer.close();

      const reader = backend();
      const s2 = await session(reader, "reader");
      expect(await records(s2).read(key)).toEqual({ value: "running", version: "1" });
      expect(await records(s2).write(key, "done", "1")).toBe("2");
      expect(await raw.hgetall(where)).toEqual({ value: "done", version: "2" });
      // A write keeps the key without expiry.
      expect(await raw.pttl(where)).toBe(-1);
      expect(await records(s2).read(`missing-${randomUUID()}`)).toBeNull();
    });

    it("a refused write writes nothing: a stale version, a record expected absent, versions no record has, a version of a missing record", async () => {
      const s = await session(backend());
      const { read, write } = records(s);
      const key = `refused-${randomUUID()}`;
      const where = recordKey(prefix, key);
      const v1 = (await write(key, "one", null)) as string;
      const v2 = (await write(key, "two", v1)) as string;
      expect(v2).toBe("2");
      for (const expected of [v1, null, "3", "", "0", "02", "-1", "2.0", " 2", "two"]) {
        expect(await write(key, "overwritten", expected), JSON.stringify(expected)).toBeNull();
      }
      expect(await raw.hgetall(where)).toEqual({ value: "two", version: "2" });
      expect(await read(key)).toEqual({ value: "two", version: "2" });
      // A version given for a record that does not exist: refused, and no key is created.
      const missing = `missing-${randomUUID()}`;
      for (const expected of ["1", ""]) {
        expect(await write(missing, "created?", expected)).toBeNull();
      }
      expect(await raw.exists(recordKey(prefix, missing))).toBe(0);
    });

    it("a write the client sends again after a connection reset (the server ran it, the reply was lost) resolves its version and writes once", async () => {
      const proxy = await TcpProxy.start(hostPort(url));
      cleanups.push(() => proxy.close());
      // An application's own client, with ioredis' default: unanswered commands are sent again
      // after a reconnect (as a Cluster client does for a command whose connection closed).
      const client = new Redis(proxy.port, proxy.host, { lazyConnect: true });
      cleanups.push(async () => client.disconnect());
      await client.connect();
      const s = await session(backend({ client }));
      const { write } = records(s);
      await write(`warm-${randomUUID()}`, "loads the script", null);
      const key = `resent-${randomUUID()}`;
      const where = recordKey(prefix, key);
      const v1 = (await write(key, "running", null)) as string;

      proxy.dropReplies();
      const writing = write(key, "done by writer", v1);
      writing.catch(() => undefined);
      await waitUntil(async () => (await raw.hget(where, "version")) === "2");
      proxy.cut();
      proxy.forward();
      expect(await writing).toBe("2");
      expect(await raw.hgetall(where)).toEqual({ value: "done by writer", version: "2" });
    });

    it("a write whose reply was lost with the connection resolves its version once the client is connected again", async () => {
      const proxy = await TcpProxy.start(hostPort(url));
      cleanups.push(() => proxy.close());
      // The backend's own client: a command is never sent again after a reconnect.
      const b = backend({ url: `redis://${proxy.host}:${proxy.port}?commandTimeoutMs=1000` });
      const s = await session(b);
      const { read, write } = records(s);
      await write(`warm-${randomUUID()}`, "loads the script", null);
      const key = `lost-reply-${randomUUID()}`;
      const where = recordKey(prefix, key);

      const lostReply = async (value: string, expected: string | null, version: string) => {
        proxy.dropReplies();
        const writing = write(key, value, expected);
        writing.catch(() => undefined);
        await waitUntil(async () => (await raw.hget(where, "version")) === version);
        proxy.cut();
        proxy.forward();
        return await writing;
      };
      expect(await lostReply("running", null, "1")).toBe("1");
      expect(await lostReply("done", "1", "2")).toBe("2");
      expect(await read(key)).toEqual({ value: "done", version: "2" });
    });

    it("a write whose outcome stays unknown fails with BackendUnavailableError; a record at its version with another value is not taken for it", async () => {
      const proxy = await TcpProxy.start(hostPort(url));
      cleanups.push(() => proxy.close());
      const b = backend({ url: `redis://${proxy.host}:${proxy.port}?commandTimeoutMs=1000` });
      const s = await session(b);
      const { read, write } = records(s);
      await write(`warm-${randomUUID()}`, "loads the script", null);
      const key = `unknown-${randomUUID()}`;
      const v1 = (await write(key, "running", null)) as string;
      // The write never reaches the server; another writer moves the record on to the version
      // this write would have given it; the connection breaks and comes back.
      proxy.blackhole();
      const writing = write(key, "done", v1);
      writing.catch(() => undefined);
      await raw.hset(recordKey(prefix, key), "value", "someone else's", "version", "2");
      proxy.cut();
      proxy.forward();
      const error = await writing.then(
        (version) => version,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(BackendUnavailableError);
      expect((error as Error).message).toContain(`redis record write of "${key}"`);
      expect(await read(key)).toEqual({ value: "someone else's", version: "2" });
    });
  });
});
