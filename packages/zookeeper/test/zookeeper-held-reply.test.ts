import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import type { BackendSession } from "@baton/core";
import type { Client } from "node-zookeeper-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ClientFactory, ZookeeperBackend } from "../src/index.js";
import { inspector, removeTree } from "./support/counting-clients.js";
import { ProxiedClients } from "./support/proxied-clients.js";

const never = new AbortController().signal;
/** Replies this late wait far longer than the 100 ms after which a quiet session sends a read. */
const REPLY_DELAY_MS = 300;

describeBackend("zookeeper", (url) => {
  const prefix = `hr${randomUUID().slice(0, 8)}`;
  let raw: Client;
  const proxied = new ProxiedClients();
  /** Reads of `/` the session sent on its own (what it sends to set a held reply free). */
  let rootReads = 0;
  const factory: ClientFactory = async (request) => {
    const client = (await proxied.factory(request)) as Client;
    const exists = client.exists.bind(client) as (...args: unknown[]) => void;
    (client as unknown as Record<string, unknown>).exists = (path: string, ...rest: unknown[]) => {
      if (path === "/") rootReads++;
      exists(path, ...rest);
    };
    return client;
  };
  const backend = ZookeeperBackend.fromUrl(url, { prefix, createClient: factory });
  let session: BackendSession;

  beforeAll(async () => {
    raw = await inspector(url.slice("zookeeper://".length));
    session = await backend.openSession({ ttlMs: 10_000, ownerId: "held-reply" });
  });
  afterAll(async () => {
    await backend.close();
    await proxied.close();
    await removeTree(raw, `/${prefix}`).catch(() => undefined);
    raw.close();
  });

  const lockLoop = async (name: string) => {
    const grant = await session.acquire(name, { wait: true, signal: never });
    if (grant === null) throw new Error(`${name} was not granted`);
    expect(await session.release(grant)).toBe(true);
  };

  describe("replies slower than 100 ms", () => {
    it("a quiet session with a call pending sends one read to set a held reply free", async () => {
      // Longer still, so timers that run late under load still run before the reply comes.
      for (const p of proxied.proxiesOf(session)) p.delayReplies(1_000);
      try {
        const before = rootReads;
        await lockLoop("quiet/one");
        // Three calls (create; list + stat; delete), each waiting alone for its reply.
        expect(rootReads - before).toBeGreaterThanOrEqual(1);
      } finally {
        for (const p of proxied.proxiesOf(session)) p.forward();
      }
    });

    it("a session serving many callers sends no read per call: its own requests set replies free", async () => {
      for (const p of proxied.proxiesOf(session)) p.delayReplies(REPLY_DELAY_MS);
      try {
        const callers = 128;
        const rounds = 3;
        const before = rootReads;
        await Promise.all(
          Array.from({ length: callers }, async (_, i) => {
            for (let r = 0; r < rounds; r++) await lockLoop(`busy/${i}`);
          }),
        );
        const locks = callers * rounds;
        // Every call waits longer than 100 ms for its reply: one read per call would be three
        // per lock. With traffic flowing, at most one read per quiet 100 ms of the session.
        expect((rootReads - before) / locks).toBeLessThan(0.5);
      } finally {
        for (const p of proxied.proxiesOf(session)) p.forward();
      }
    });
  });
});
