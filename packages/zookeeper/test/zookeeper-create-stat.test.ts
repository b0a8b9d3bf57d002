import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import type { BackendSession } from "@baton/core";
import type { Client } from "node-zookeeper-client";
import zookeeper from "node-zookeeper-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ClientFactory, ZookeeperBackend } from "../src/index.js";
import { inspector, removeTree } from "./support/counting-clients.js";

const never = new AbortController().signal;

/** The operation code of ZooKeeper's ping, which the connection sends on its own when idle. */
const PING = 11;
/** The operation code of a create that answers with the new node's stat (ZooKeeper 3.5+). */
const CREATE2 = 15;

/** Clients that count the requests they send (pings aside), and can refuse create2 as 3.4 did. */
class Clients {
  requests = 0;
  refuseCreate2 = false;
  refused = 0;

  readonly factory: ClientFactory = (request) => {
    const client = zookeeper.createClient(
      request.hosts.map((h) => `${h.host}:${h.port}`).join(","),
      { sessionTimeout: request.sessionTimeoutMs, spinDelay: 100, retries: 0 },
    );
    const manager = (client as unknown as { connectionManager: Record<string, unknown> })
      .connectionManager;
    const queue = (manager.queue as (...args: unknown[]) => unknown).bind(manager);
    manager.queue = (...args: unknown[]) => {
      const sent = args[0] as { header?: { type?: number }; toBuffer?: () => Buffer };
      if (sent.header?.type === PING) return queue(...args);
      this.requests++;
      // The op code as it goes on the wire: after the length and the xid.
      const op = sent.toBuffer?.().readInt32BE(8);
      if (op === CREATE2 && this.refuseCreate2) {
        this.refused++;
        const callback = args[1] as (error: unknown) => void;
        // The client's own error for the code, as it gives every refused request.
        const create = (zookeeper.Exception as unknown as { create: (code: number) => Error })
          .create;
        setImmediate(() => callback(create(zookeeper.Exception.UNIMPLEMENTED)));
        return undefined;
      }
      return queue(...args);
    };
    return client;
  };
}

describeBackend("zookeeper", (url) => {
  const prefix = `cs${randomUUID().slice(0, 8)}`;
  let raw: Client;
  const clients = new Clients();
  const backend = ZookeeperBackend.fromUrl(url, { prefix, createClient: clients.factory });
  let session: BackendSession;

  beforeAll(async () => {
    raw = await inspector(url.slice("zookeeper://".length));
    session = await backend.openSession({ ttlMs: 10_000, ownerId: "create-stat" });
  });
  afterAll(async () => {
    await backend.close();
    await removeTree(raw, `/${prefix}`).catch(() => undefined);
    raw.close();
  });

  /** Acquire + release of `name` (its parent already there); the requests it sent. */
  const lockOnce = async (name: string) => {
    const before = clients.requests;
    const grant = await session.acquire(name, { wait: true, signal: never });
    if (grant === null) throw new Error(`${name} was not granted`);
    const holder = await session.holder(name);
    expect(holder?.token).toBe(grant.token);
    const counted = clients.requests - before;
    expect(await session.release(grant)).toBe(true);
    return { token: grant.token, requests: counted };
  };

  describe("an uncontended acquire", () => {
    it("creates its node and learns its token in one request: create, list of waiters", async () => {
      await lockOnce("stat/a");
      const { requests } = await lockOnce("stat/a");
      // create (with the stat), list of waiters; then the holder read: a session check, the
      // list, the holder's data.
      expect(requests).toBe(2 + 3);
    });

    it("on a ZooKeeper that refuses create2, creates and reads the stat, tokens still ordered", async () => {
      clients.refuseCreate2 = true;
      try {
        const first = await lockOnce("stat/b");
        expect(clients.refused).toBe(1);
        const second = await lockOnce("stat/b");
        // Refused once per session: the refused create2, then create, list + stat.
        expect(clients.refused).toBe(1);
        expect(second.requests).toBe(3 + 3);
        expect(second.token).toBeGreaterThan(first.token);
      } finally {
        clients.refuseCreate2 = false;
      }
    });
  });
});
