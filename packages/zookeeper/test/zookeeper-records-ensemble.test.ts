import { describeBackend } from "@baton/conformance/harness";
import { BackendUnavailableError, SessionLostError } from "@baton/core";
import zookeeper, { type Client } from "node-zookeeper-client";
import { afterEach, describe, expect, it } from "vitest";
import { ZookeeperBackend } from "../src/index.js";
import { recordPath, recordRoot } from "../src/zookeeper-keys.js";
import { ZookeeperRecords } from "../src/zookeeper-records.js";

/** Shaped as the client's exceptions: a message and getCode(). */
function zkError(name: string, code: number): Error {
  return Object.assign(new Error(`Exception: ${name}[${code}]`), { getCode: () => code });
}

/** Records over a client whose every call fails with `error`, and no server. */
function failingRecords(error: Error, ensemble: string | undefined): ZookeeperRecords {
  const fail = (...args: unknown[]) => (args.at(-1) as (e: Error) => void)(error);
  const multi = {
    create: () => multi,
    check: () => multi,
    setData: () => multi,
    commit: (callback: (e: Error) => void) => callback(error),
  };
  const client = {
    getData: fail,
    getChildren: fail,
    create: fail,
    setData: fail,
    mkdirp: fail,
    transaction: () => multi,
  };
  return new ZookeeperRecords({
    client: client as unknown as Client,
    lockRoot: "/baton",
    ensemble,
    call: (_what, pending) => pending,
    reconnected: () => Promise.reject(error),
    barrier: () => Promise.resolve(),
  });
}

async function failureOf(run: () => Promise<unknown>): Promise<Error> {
  const outcome = await run().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(outcome).toBeInstanceOf(Error);
  return outcome as Error;
}

describe("ZooKeeper record errors name the ensemble (no I/O)", () => {
  const noAuth = zkError("NO_AUTH", zookeeper.Exception.NO_AUTH);
  const loss = zkError("CONNECTION_LOSS", zookeeper.Exception.CONNECTION_LOSS);
  const expired = zkError("SESSION_EXPIRED", zookeeper.Exception.SESSION_EXPIRED);

  it("a failed read, create or update names the members", async () => {
    const records = failingRecords(noAuth, "zk1:2181, zk2:2181");
    const read = await failureOf(() => records.read("k"));
    expect(read).toBeInstanceOf(BackendUnavailableError);
    expect(read.message).toBe(
      'zookeeper record read of "k" failed (ensemble zk1:2181, zk2:2181): Exception: NO_AUTH[-102]',
    );
    const created = await failureOf(() => records.write("k", "v", null));
    expect(created.message).toBe(
      'zookeeper record write of "k" failed (ensemble zk1:2181, zk2:2181): Exception: NO_AUTH[-102]',
    );
    const updated = await failureOf(() => records.write("k", "v", "3"));
    expect(updated.message).toMatch(
      /^zookeeper record write of "k" failed \(ensemble zk1:2181, zk2:2181\): /,
    );
  });

  it("a write whose reply was lost, and an expired session, name the members", async () => {
    const lost = await failureOf(() => failingRecords(loss, "zk1:2181").write("k", "v", null));
    expect(lost).toBeInstanceOf(BackendUnavailableError);
    expect(lost.message).toBe(
      'zookeeper record write of "k" failed (ensemble zk1:2181): Exception: CONNECTION_LOSS[-4]',
    );
    const gone = await failureOf(() => failingRecords(expired, "zk1:2181").read("k"));
    expect(gone).toBeInstanceOf(SessionLostError);
    expect(gone.message).toBe(
      'zookeeper record read of "k": the ZooKeeper session expired (ensemble zk1:2181)',
    );
  });

  it("without members (a client of your own) the messages read as before", async () => {
    const read = await failureOf(() => failingRecords(noAuth, undefined).read("k"));
    expect(read.message).toBe('zookeeper record read of "k" failed: Exception: NO_AUTH[-102]');
  });
});

describeBackend("zookeeper", (url) => {
  const closers: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
  });

  it("a record the session may not read names the ensemble", async () => {
    const hosts = url.slice("zookeeper://".length).split(/[/?]/)[0] ?? "";
    const backend = new ZookeeperBackend({
      hosts: hosts.split(","),
      prefix: `records-ensemble-${process.pid}-${Date.now()}`,
    });
    closers.push(() => backend.close());
    // A record node whose ACL lets anyone write it but nobody read it.
    const path = recordPath(recordRoot(backend.root), "sealed");
    const admin = zookeeper.createClient(hosts);
    closers.push(async () => admin.close());
    await new Promise<void>((resolve, reject) => {
      admin.once("connected", () => resolve());
      admin.connect();
      setTimeout(() => reject(new Error("the admin client did not connect")), 20_000).unref();
    });
    const writeOnly = new zookeeper.ACL(
      zookeeper.Permission.WRITE | zookeeper.Permission.DELETE | zookeeper.Permission.ADMIN,
      new zookeeper.Id("world", "anyone"),
    );
    await new Promise<void>((resolve, reject) =>
      admin.mkdirp(recordRoot(backend.root), (e) => (e ? reject(e) : resolve())),
    );
    await new Promise<void>((resolve, reject) =>
      admin.create(path, Buffer.from("x"), [writeOnly], zookeeper.CreateMode.PERSISTENT, (e) =>
        e ? reject(e) : resolve(),
      ),
    );
    const session = await backend.openSession({ ttlMs: 4_000, ownerId: "records-ensemble" });
    const error = await failureOf(() => session.readRecord?.("sealed") ?? Promise.resolve());
    expect(error).toBeInstanceOf(BackendUnavailableError);
    expect(error.message).toMatch(/^zookeeper record read of "sealed" failed \(ensemble /);
    expect(error.message).toContain(`(ensemble ${backend.endpoint})`);
    expect(error.message).toContain("NO_AUTH");
  }, 60_000);
});
