import type { EventEmitter } from "node:events";
import { TcpProxy } from "@baton/conformance/faults";
import { describeBackend } from "@baton/conformance/harness";
import { BackendUnavailableError, SessionLostError } from "@baton/core";
import zookeeper from "node-zookeeper-client";
import { afterEach, describe, expect, it } from "vitest";
import { ZookeeperBackend } from "../src/index.js";
import { toBatonError } from "../src/zookeeper-errors.js";
import type { ZookeeperSession } from "../src/zookeeper-session.js";

describe("ZooKeeper call errors name the ensemble (no I/O)", () => {
  it("a failed call and an expired session name the members given", () => {
    // Shaped as the client's exceptions: a message and getCode().
    const zkError = (name: string, code: number) =>
      Object.assign(new Error(`Exception: ${name}[${code}]`), { getCode: () => code });
    const loss = zkError("CONNECTION_LOSS", zookeeper.Exception.CONNECTION_LOSS);
    const failed = toBatonError(loss, 'zookeeper acquire of "x"', "zk1:2181, zk2:2181");
    expect(failed).toBeInstanceOf(BackendUnavailableError);
    expect(failed.message).toMatch(
      /^zookeeper acquire of "x" failed \(ensemble zk1:2181, zk2:2181\): .*CONNECTION_LOSS/,
    );
    const expired = zkError("SESSION_EXPIRED", zookeeper.Exception.SESSION_EXPIRED);
    const lost = toBatonError(expired, 'zookeeper release of "x"', "zk1:2181");
    expect(lost).toBeInstanceOf(SessionLostError);
    expect(lost.message).toBe(
      'zookeeper release of "x": the ZooKeeper session expired (ensemble zk1:2181)',
    );
    // Without members (a client of your own), as before.
    expect(toBatonError(loss, 'zookeeper acquire of "x"').message).toMatch(
      /^zookeeper acquire of "x" failed: /,
    );
  });

  it("the backend's endpoint lists the members, and nothing for a client of your own", () => {
    expect(new ZookeeperBackend({ hosts: ["zk1:2181", "zk2:2182"] }).endpoint).toBe(
      "zk1:2181, zk2:2182",
    );
    const client = zookeeper.createClient("127.0.0.1:1");
    expect(new ZookeeperBackend({ client }).endpoint).toBeUndefined();
  });
});

describeBackend("zookeeper", (url) => {
  const closers: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
  });

  it("a session that expires is lost naming the ensemble", async () => {
    const backend = new ZookeeperBackend({ hosts: url.slice("zookeeper://".length).split(",") });
    closers.push(() => backend.close());
    const session = await backend.openSession({ ttlMs: 4_000, ownerId: "ensemble-expiry" });
    // What the client reports when the ensemble expired the session.
    ((session as ZookeeperSession).client as unknown as EventEmitter).emit(
      "state",
      zookeeper.State.EXPIRED,
    );
    const lost = session.lost;
    expect(lost?.aborted).toBe(true);
    expect(lost?.reason).toBeInstanceOf(SessionLostError);
    expect((lost?.reason as Error | undefined)?.message).toBe(
      `the ZooKeeper session expired (ensemble ${backend.endpoint})`,
    );
    expect(backend.endpoint).toMatch(/^127\.0\.0\.1:\d+(, 127\.0\.0\.1:\d+)*$/);
  });

  it("an acquire on a member that stopped answering names it", async () => {
    // One member of the test ensemble, behind a proxy that stops answering on demand.
    const [host, port] = (url.slice("zookeeper://".length).split(/[,/?]/)[0] ?? "").split(":");
    const proxy = await TcpProxy.start({ host: host ?? "127.0.0.1", port: Number(port) });
    closers.push(() => proxy.close());
    const backend = new ZookeeperBackend({ hosts: [`127.0.0.1:${proxy.port}`] });
    closers.push(() => backend.close());
    const session = await backend.openSession({ ttlMs: 4_000, ownerId: "ensemble-errors" });
    proxy.blackhole();
    const error = await session
      .acquire(`silent-${Date.now()}`, { wait: false, signal: new AbortController().signal })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(error).toBeInstanceOf(BackendUnavailableError);
    expect((error as Error).message).toContain(`(ensemble 127.0.0.1:${proxy.port})`);
  }, 30_000);
});
