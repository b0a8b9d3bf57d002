import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { promisify } from "node:util";
import { describeBackend, findOnPath } from "@baton/conformance/harness";
import { type BackendSession, BackendUnavailableError, createCoordinator } from "@baton/core";
import { Etcd3, type ITxnRequest, type ITxnResponse } from "etcd3";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { EtcdBackend } from "../src/index.js";
import { hostsOf } from "./support/recording-client.js";

const TTL = 4_000;
const never = new AbortController().signal;
const run = promisify(execFile);

/** A session's record calls (the optional pair of `BackendSession`). */
function records(session: BackendSession) {
  const { readRecord, writeRecord } = session;
  if (readRecord === undefined || writeRecord === undefined) {
    throw new Error("this etcd session keeps no records");
  }
  return {
    read: (key: string) => readRecord.call(session, key),
    write: (key: string, value: string, expected: string | null) =>
      writeRecord.call(session, key, value, expected),
  };
}

/** The record key a test's record lives at, as another client reads it (empty prefix). */
const recordKeyOf = (key: string) => `records:${key.replaceAll("%", "%25").replaceAll("/", "%2F")}`;

/** What a transaction of a record write does on its way: the reply is lost after `send`. */
type TxnFault = (send: () => Promise<ITxnResponse>) => Promise<ITxnResponse>;

/** A real etcd3 client whose record-write transactions go through `fault` while it is set. */
function faultyClient(hosts: string[]): { client: Etcd3; fault: TxnFault | undefined } {
  const client = new Etcd3({ hosts });
  const faulty: { client: Etcd3; fault: TxnFault | undefined } = { client, fault: undefined };
  const kv = client.kv;
  const txn = kv.txn.bind(kv);
  kv.txn = (request: ITxnRequest, options) => {
    const put = request.success?.[0]?.request_put?.key?.toString() ?? "";
    const fault = faulty.fault;
    if (fault === undefined || !put.startsWith("records:")) return txn(request, options);
    return fault(() => txn(request, options));
  };
  return faulty;
}

/** A connection reset after etcd applied the request: its reply never arrives. */
const resetAfter = async (send: () => Promise<ITxnResponse>): Promise<never> => {
  await send();
  throw new Error("14 UNAVAILABLE: read ECONNRESET");
};

describeBackend("etcd", (url) => {
  const hosts = hostsOf(url);
  let raw: Etcd3;
  const cleanups: (() => unknown)[] = [];
  const backend = (options: { client?: Etcd3 } = {}) => {
    const b = new EtcdBackend(
      options.client === undefined ? { hosts } : { client: options.client },
    );
    cleanups.push(() => b.close());
    return b;
  };
  const session = async (b: EtcdBackend, ownerId = "writer") => {
    const s = await b.openSession({ ttlMs: TTL, ownerId });
    cleanups.push(() => s.close());
    return s;
  };
  /** The record's key as etcd holds it: value, mod_revision and lease, or null. */
  const stored = async (key: string) => {
    const { kvs } = await raw.get(recordKeyOf(key)).exec();
    const kv = kvs[0];
    return kv === undefined
      ? null
      : { value: kv.value.toString(), modRevision: kv.mod_revision, lease: kv.lease };
  };

  beforeAll(() => {
    raw = new Etcd3({ hosts });
  });
  afterEach(async () => {
    for (const f of cleanups.splice(0).reverse()) await Promise.resolve(f()).catch(() => undefined);
  });
  afterAll(() => raw.close());

  describe("records", () => {
    it("keeps a record at records:<key> on no lease, its version the key's mod_revision", async () => {
      const s = await session(backend());
      const key = `nightly-${randomUUID()}/slot/2026-12-01T02:00:00Z`;
      const version = await records(s).write(key, "running", null);
      const kept = await stored(key);
      expect(kept).toEqual({ value: "running", modRevision: version, lease: "0" });
      const next = await records(s).write(key, "done", version);
      expect(BigInt(next as string)).toBeGreaterThan(BigInt(version as string));
      expect(await stored(key)).toEqual({ value: "done", modRevision: next, lease: "0" });
      expect(await records(s).read(key)).toEqual({ value: "done", version: next });
      expect(await records(s).read(`missing-${randomUUID()}`)).toBeNull();
    });

    it("a lock named like the record's path is free while the record exists", async () => {
      const s = await session(backend());
      const job = `billing-${randomUUID()}`;
      const key = `${job}/slot/2026-12-01T02:00:00Z`;
      await records(s).write(key, "done", null);
      // `records/<key>` would put the record among this lock's queue keys.
      const name = `records/${job}/slot`;
      const grant = await s.acquire(name, { wait: false, signal: never });
      expect(grant).not.toBeNull();
      expect(await s.holder(name)).toMatchObject({ ownerId: "writer" });
      // Nor does a lock named like the record's etcd key see it.
      expect(await s.holder(recordKeyOf(key))).toBeNull();
    });

    it("a write with a wrong version writes nothing: stale, 0, -1, not a number, or no record", async () => {
      const s = await session(backend());
      const { read, write } = records(s);
      const key = `refused-${randomUUID()}`;
      const v0 = (await write(key, "one", null)) as string;
      const v1 = (await write(key, "two", v0)) as string;
      const before = await stored(key);
      for (const expected of [v0, "0", "-1", "not-a-version", `${BigInt(v1) + 1000n}`, null]) {
        expect(await write(key, "overwritten", expected), `${expected}`).toBeNull();
      }
      expect(await stored(key)).toEqual(before);
      expect(await read(key)).toEqual({ value: "two", version: v1 });
      // A version given for a record that does not exist: refused, and no key is created.
      const missing = `missing-${randomUUID()}`;
      expect(await write(missing, "created?", v1)).toBeNull();
      expect(await write(missing, "created?", "0")).toBeNull();
      expect(await stored(missing)).toBeNull();
    });

    it("a record outlives the writer's lease: revoked, the record is read and written on", async () => {
      const writer = await session(backend());
      const key = `kept-${randomUUID()}`;
      const version = await records(writer).write(key, "running", null);
      const grant = await writer.acquire(key, { wait: false, signal: never });
      expect(grant).not.toBeNull();
      await raw.leaseClient.leaseRevoke({ ID: (writer as EtcdBackendSession).leaseId });
      // The lock went with the lease; the record stayed.
      expect(await raw.getAll().prefix(`${key}/`).keys()).toEqual([]);
      const reader = await session(backend(), "reader");
      expect(await records(reader).read(key)).toEqual({ value: "running", version });
      const next = await records(reader).write(key, "done", version);
      expect(await records(reader).read(key)).toEqual({ value: "done", version: next });
    });

    it("etcdctl get shows the record under its key", async () => {
      const etcdctl = findOnPath("etcdctl");
      if (etcdctl === undefined)
        throw new Error("etcdctl is not on PATH (scripts/install-servers.sh)");
      const s = await session(backend());
      const key = `shown-${randomUUID()}/slot/1`;
      await records(s).write(key, '{"state":"done"}', null);
      const { stdout } = await run(
        etcdctl,
        [`--endpoints=${hosts.join(",")}`, "get", recordKeyOf(key)],
        {
          env: { ...process.env, ETCDCTL_API: "3" },
        },
      );
      expect(stdout).toBe(`${recordKeyOf(key)}\n{"state":"done"}\n`);
    });

    it("a write whose reply was lost after etcd applied it resolves its version", async () => {
      const faulty = faultyClient(hosts);
      const s = await session(backend({ client: faulty.client }));
      const { read, write } = records(s);
      const key = `lost-reply-${randomUUID()}`;
      faulty.fault = resetAfter;
      const v0 = await write(key, "running", null);
      expect(await stored(key)).toMatchObject({ value: "running", modRevision: v0 });
      const v1 = await write(key, "done", v0);
      expect(await stored(key)).toMatchObject({ value: "done", modRevision: v1 });
      faulty.fault = undefined;
      expect(await read(key)).toEqual({ value: "done", version: v1 });
      // A refused write is still refused.
      expect(await write(key, "again", v0)).toBeNull();
    });

    it("a write applied once and resent by the client resolves its version, not a mismatch", async () => {
      const faulty = faultyClient(hosts);
      const s = await session(backend({ client: faulty.client }));
      const key = `resent-${randomUUID()}`;
      // The first reply is lost and the client sends the transaction again: its compare fails.
      faulty.fault = async (send) => {
        await send();
        return await send();
      };
      const v0 = await records(s).write(key, "running", null);
      expect(v0).not.toBeNull();
      const v1 = await records(s).write(key, "done", v0);
      expect(await stored(key)).toMatchObject({ value: "done", modRevision: v1 });
    });

    it("a write whose reply was lost, and whose record then changed, fails as unavailable", async () => {
      const faulty = faultyClient(hosts);
      const s = await session(backend({ client: faulty.client }));
      const other = await session(backend(), "other");
      const key = `lost-then-changed-${randomUUID()}`;
      const v0 = (await records(s).write(key, "running", null)) as string;
      faulty.fault = async (send) => {
        const applied = await send();
        // Another writer changes the record before this client hears back.
        await records(other).write(key, "taken over", applied.header.revision);
        throw new Error("14 UNAVAILABLE: read ECONNRESET");
      };
      await expect(records(s).write(key, "done", v0)).rejects.toBeInstanceOf(
        BackendUnavailableError,
      );
      expect((await stored(key))?.value).toBe("taken over");
    });

    it("a write whose request may not have reached etcd fails as unavailable, not as refused", async () => {
      const faulty = faultyClient(hosts);
      const s = await session(backend({ client: faulty.client }));
      const key = `unsent-${randomUUID()}`;
      const v0 = (await records(s).write(key, "running", null)) as string;
      faulty.fault = () => Promise.reject(new Error("14 UNAVAILABLE: read ECONNRESET"));
      const failed = await records(s)
        .write(key, "done", v0)
        .catch((error: unknown) => error);
      expect(failed).toBeInstanceOf(BackendUnavailableError);
      expect((failed as Error).message).toMatch(
        /could not write the record ".*" \(etcd at .*\): read ECONNRESET; check that etcd runs there and is reachable/,
      );
      expect(await stored(key)).toMatchObject({ value: "running", modRevision: v0 });
    });

    it("runOnce on etcd leaves the slot's record behind, done, after every lock has ended", async () => {
      const b = backend();
      const coordinator = createCoordinator({ backend: b, ttlMs: TTL, ownerId: "replica-1" });
      cleanups.push(() => coordinator.close());
      const job = `nightly-${randomUUID()}`;
      const result = await coordinator.runOnce(job, "2026-12-01", () => "billed");
      expect(result).toMatchObject({ outcome: "ran", value: "billed" });
      await coordinator.close();
      const kept = await stored(`${job}/slot/2026-12-01`);
      expect(kept?.lease).toBe("0");
      expect(JSON.parse(kept?.value ?? "{}")).toMatchObject({ state: "done", holder: "replica-1" });
      expect(await raw.getAll().prefix(`${job}/`).keys()).toEqual([]);
    });
  });
});

/** The etcd session's lease id (public on the adapter's session). */
interface EtcdBackendSession extends BackendSession {
  readonly leaseId: string;
}
