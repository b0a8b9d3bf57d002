import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import type { BackendSession } from "@baton/core";
import type { Client } from "node-zookeeper-client";
import zookeeper from "node-zookeeper-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ClientFactory, ZookeeperBackend } from "../src/index.js";
import { inspector, removeTree } from "./support/counting-clients.js";

const never = new AbortController().signal;

/** The socket writes a client makes, each as the number of requests (buffers) it carries. */
class WriteLog {
  readonly writes: number[] = [];
  #client: Client | undefined;

  readonly factory: ClientFactory = (request) => {
    const client = zookeeper.createClient(
      request.hosts.map((h) => `${h.host}:${h.port}`).join(","),
      { sessionTimeout: request.sessionTimeoutMs, spinDelay: 100, retries: 0 },
    );
    this.#client = client;
    return client;
  };

  /** Counts the writes the client's current connection hands to the operating system. */
  watch(): void {
    const manager = (this.#client as unknown as { connectionManager: { socket: unknown } })
      .connectionManager;
    const handle = (manager.socket as { _handle: Record<string, unknown> })._handle;
    const writeBuffer = handle.writeBuffer as (...args: unknown[]) => unknown;
    const writev = handle.writev as (...args: unknown[]) => unknown;
    handle.writeBuffer = (...args: unknown[]) => {
      this.writes.push(1);
      return writeBuffer.apply(handle, args);
    };
    handle.writev = (...args: unknown[]) => {
      const chunks = args[1] as unknown[];
      // Without all-buffers, chunks alternate data and encoding.
      this.writes.push(args[2] === true ? chunks.length : chunks.length / 2);
      return writev.apply(handle, args);
    };
  }
}

describeBackend("zookeeper", (url) => {
  const prefix = `wb${randomUUID().slice(0, 8)}`;
  let raw: Client;
  const log = new WriteLog();
  const backend = ZookeeperBackend.fromUrl(url, { prefix, createClient: log.factory });
  let session: BackendSession;

  beforeAll(async () => {
    raw = await inspector(url.slice("zookeeper://".length));
    session = await backend.openSession({ ttlMs: 10_000, ownerId: "write-batching" });
    log.watch();
  });
  afterAll(async () => {
    await backend.close();
    await removeTree(raw, `/${prefix}`).catch(() => undefined);
    raw.close();
  });

  describe("socket writes", () => {
    it("the requests of acquires started together leave in one write, in order", async () => {
      const callers = 8;
      // The lock's parents first, so each acquire is one create, then list + stat, then done.
      for (let i = 0; i < callers; i++) {
        const grant = await session.acquire(`batch/${i}`, { wait: true, signal: never });
        if (grant !== null) await session.release(grant);
      }
      log.writes.length = 0;
      const grants = await Promise.all(
        Array.from({ length: callers }, (_, i) =>
          session.acquire(`batch/${i}`, { wait: true, signal: never }),
        ),
      );
      // The eight creates were made in one tick: one write carries them all.
      expect(log.writes[0]).toBe(callers);
      for (const grant of grants) {
        expect(grant).not.toBeNull();
        if (grant !== null) expect(await session.release(grant)).toBe(true);
      }
      // Fewer writes than requests (8 creates, 8 lists and stats, 8 deletes).
      expect(log.writes.length).toBeLessThan(callers * 4);
      // Tokens follow the order of the creates, as the requests left in order.
      const tokens = grants.map((g) => g?.token ?? 0n);
      expect([...tokens].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))).toEqual(tokens);
    });
  });
});
