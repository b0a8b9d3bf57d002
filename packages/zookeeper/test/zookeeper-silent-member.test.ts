import { randomUUID } from "node:crypto";
import { TcpProxy } from "@baton/conformance/faults";
import { describeBackend } from "@baton/conformance/harness";
import zookeeper from "node-zookeeper-client";
import { afterEach, describe, expect, it } from "vitest";
import { type ClientFactory, ZookeeperBackend } from "../src/index.js";

describeBackend("zookeeper", (url) => {
  const proxies: TcpProxy[] = [];
  afterEach(async () => {
    await Promise.all(proxies.splice(0).map((p) => p.close()));
  });

  /** A client whose way to every member but the last is silent: connections accepted, no byte through. */
  const onlyLastAnswers: ClientFactory = async (request) => {
    const own = await Promise.all(request.hosts.map((h) => TcpProxy.start(h)));
    proxies.push(...own);
    for (const p of own.slice(0, -1)) p.blackhole();
    return zookeeper.createClient(own.map((p) => `${p.host}:${p.port}`).join(","), {
      sessionTimeout: request.sessionTimeoutMs,
      spinDelay: 100,
      retries: 0,
    });
  };

  describe("members that accept connections and never answer", () => {
    it("a session still opens within the connect timeout, through the member that answers", async () => {
      // The client tries the members in a random order and would wait on a silent one for as
      // long as its connection stays open: six opens, two silent members of three.
      const took: number[] = [];
      for (let i = 0; i < 6; i++) {
        const backend = ZookeeperBackend.fromUrl(url, {
          prefix: `sm${randomUUID().slice(0, 8)}`,
          createClient: onlyLastAnswers,
        });
        try {
          const started = performance.now();
          const session = await backend.openSession({ ttlMs: 10_000, ownerId: `silent-${i}` });
          took.push(performance.now() - started);
          await session.close();
        } finally {
          await backend.close();
        }
      }
      expect(took).toHaveLength(6);
      // At least one open met a silent member first and moved on from it.
      expect(Math.max(...took)).toBeGreaterThan(500);
    });
  });
});
