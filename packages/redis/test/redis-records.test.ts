import { randomUUID } from "node:crypto";
import { TcpProxy } from "@baton/conformance/faults";
import { describeBackend, type StartedServers, startServers } from "@baton/conformance/harness";
import { type BackendSession, BackendUnavailableError, createCoordinator } from "@baton/core";
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
      const v1 = (await records(s1).write(key, "running", null)) as string;
      // Versions come from the server's clock in microseconds.
      expect(v1).toMatch(/^[1-9]\d{15}$/);
      // Holding the lock of the same name beside it, then letting it go, leaves the record.
      const grant = await s1.acquire(key, { wait: false, signal: never });
      expect(grant).not.toBeNull();
      const where = recordKey(prefix, key);
      expect(where).toBe(`${prefix}records:{${key}}`);
      expect(where).not.toBe(lockKeys(prefix, key).lock);
      expect(await raw.type(where)).toBe("hash");
      expect(await raw.hgetall(where)).toEqual({ value: "running", version: v1 });
      expect(await raw.pttl(where)).toBe(-1);
      await s1.close();
      await writer.close();

      const reader = backend();
      const s2 = await session(reader, "reader");
      expect(await records(s2).read(key)).toEqual({ value: "running", version: v1 });
      const v2 = (await records(s2).write(key, "done", v1)) as string;
      expect(BigInt(v2) > BigInt(v1)).toBe(true);
      expect(await raw.hgetall(where)).toEqual({ value: "done", version: v2 });
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
      expect(BigInt(v2) > BigInt(v1)).toBe(true);
      const after = String(BigInt(v2) + 1n);
      const never = [v1, null, after, "", "0", `0${v2}`, "-1", `${v2}.0`, ` ${v2}`, "two"];
      for (const expected of [...never, "99999999999999999"]) {
        expect(await write(key, "overwritten", expected), JSON.stringify(expected)).toBeNull();
      }
      expect(await raw.hgetall(where)).toEqual({ value: "two", version: v2 });
      expect(await read(key)).toEqual({ value: "two", version: v2 });
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
      await waitUntil(async () => (await raw.hget(where, "version")) !== v1);
      const v2 = (await raw.hget(where, "version")) as string;
      proxy.cut();
      proxy.forward();
      expect(await writing).toBe(v2);
      expect(await raw.hgetall(where)).toEqual({ value: "done by writer", version: v2 });
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

      const lostReply = async (value: string, expected: string | null) => {
        proxy.dropReplies();
        const writing = write(key, value, expected);
        writing.catch(() => undefined);
        await waitUntil(async () => (await raw.hget(where, "version")) !== expected);
        const version = (await raw.hget(where, "version")) as string;
        proxy.cut();
        proxy.forward();
        expect(await writing).toBe(version);
        return version;
      };
      const v1 = await lostReply("running", null);
      const v2 = await lostReply("done", v1);
      expect(BigInt(v2) > BigInt(v1)).toBe(true);
      expect(await read(key)).toEqual({ value: "done", version: v2 });
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
      const v2 = String(BigInt(v1) + 1n);
      await raw.hset(recordKey(prefix, key), "value", "someone else's", "version", v2);
      proxy.cut();
      proxy.forward();
      const error = await writing.then(
        (version) => version,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(BackendUnavailableError);
      expect((error as Error).message).toContain(`redis record write of "${key}"`);
      expect(await read(key)).toEqual({ value: "someone else's", version: v2 });
    });
  });
});

describeBackend("redis", () => {
  describe("redis records across a restart without persistence (private server)", () => {
    let started: StartedServers;
    let url: string;
    const cleanups: (() => Promise<unknown>)[] = [];
    beforeAll(async () => {
      started = await startServers({ backends: ["redis"] });
      url = started.servers.redis as string;
    });
    afterEach(async () => {
      for (const f of cleanups.splice(0).reverse()) await f().catch(() => undefined);
    });
    afterAll(async () => {
      await started?.stop();
    });
    const restart = async () => {
      const group = started.groups.redis;
      if (group === undefined) throw new Error("no private redis server");
      await group.restart(0);
    };

    it("a record lost with the server's data starts again above every version it had: a write expecting an old version never matches the newer writer's record", async () => {
      const b = new RedisBackend({ url });
      cleanups.push(() => b.close());
      const older = await b.openSession({ ttlMs: TTL, ownerId: "older" });
      cleanups.push(() => older.close());
      const key = `lost-${randomUUID()}`;
      const v1 = (await records(older).write(key, "running by older", null)) as string;
      expect(v1).toMatch(/^[1-9]\d*$/);
      const v2 = (await records(older).write(key, "still older", v1)) as string;
      expect(BigInt(v2) > BigInt(v1)).toBe(true);
      await restart();
      const newer = await b.openSession({ ttlMs: TTL, ownerId: "newer" });
      cleanups.push(() => newer.close());
      await waitUntil(
        async () =>
          (await records(newer)
            .read(key)
            .catch(() => undefined)) === null,
      );
      const fresh = (await records(newer).write(key, "running by newer", null)) as string;
      expect(BigInt(fresh) > BigInt(v2)).toBe(true);
      // The older writer's retried write, expecting either version it saw: refused.
      for (const expected of [v1, v2]) {
        expect(await records(older).write(key, "done by older", expected)).toBeNull();
      }
      expect(await records(newer).read(key)).toEqual({ value: "running by newer", version: fresh });
      const done = await records(newer).write(key, "done by newer", fresh);
      expect(done).not.toBeNull();
      expect(await records(newer).read(key)).toEqual({ value: "done by newer", version: done });
    });

    it("runOnce: the slot's holder before a restart cannot overwrite the newer attempt's record, and the newer one is not told its lock was lost", async () => {
      const job = `restart-${randomUUID().slice(0, 8)}`;
      const slot = "2026-12-01T02:00:00Z";
      // A long TTL: the first holder learns its key is gone only at a renewal, seconds later.
      const first = createCoordinator({ url, ttlMs: 30_000, ownerId: "first" });
      const second = createCoordinator({ url, ttlMs: 30_000, ownerId: "second" });
      cleanups.push(
        () => first.close(),
        () => second.close(),
      );
      const firstGate = gate();
      const secondGate = gate();
      const firstRun = first.runOnce(job, slot, async () => {
        firstGate.started();
        await firstGate.closed;
        return "first";
      });
      await firstGate.running;
      await restart();
      const secondRun = second.runOnce(job, slot, async ({ attempt }) => {
        secondGate.started();
        await secondGate.closed;
        return `second, attempt ${attempt}`;
      });
      await secondGate.running;
      // The first attempt finishes now and writes its outcome against the version it saw.
      firstGate.open();
      const firstResult = await firstRun;
      secondGate.open();
      const secondResult = await secondRun;
      expect(firstResult.outcome).toBe("failed");
      expect(secondResult).toMatchObject({ outcome: "ran", value: "second, attempt 1" });
      const audit = await first.runOnce(job, slot, () => {
        throw new Error("the slot ran again");
      });
      expect(audit).toMatchObject({
        outcome: "already-done",
        record: { state: "done", holder: "second" },
      });
    }, 60_000);
  });
});

/** A job that reports when it runs and waits until the test opens the gate. */
function gate() {
  let started: () => void = () => undefined;
  let open: () => void = () => undefined;
  const running = new Promise<void>((resolve) => {
    started = resolve;
  });
  const closed = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { running, closed, started: () => started(), open: () => open() };
}
