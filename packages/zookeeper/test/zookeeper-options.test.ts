import { randomUUID } from "node:crypto";
import { inspect } from "node:util";
import { describeBackend } from "@baton/conformance/harness";
import { ConfigError, createBackend, createCoordinator, type Grant } from "@baton/core";
import zookeeper, { type Client } from "node-zookeeper-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodeLockName, ZookeeperBackend, zookeeperOptionsFromUrl } from "../src/index.js";
import { childrenOf, inspector, removeTree } from "./support/counting-clients.js";

const never = new AbortController().signal;

function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error("expected a ConfigError");
}

describe("zookeeper options (no server)", () => {
  it("reads hosts, default port, chroot and parameters from the URL", () => {
    expect(
      zookeeperOptionsFromUrl(
        "zookeeper://a:2182,b/apps/billing?prefix=locks&connectTimeoutMs=500",
      ),
    ).toEqual({
      hosts: [
        { host: "a", port: 2182 },
        { host: "b", port: 2181 },
      ],
      chroot: "/apps/billing",
      prefix: "locks",
      connectTimeoutMs: 500,
    });
    const backend = ZookeeperBackend.fromUrl("zookeeper://a/apps/billing/");
    expect(backend.root).toBe("/apps/billing/baton");
    expect(backend.guarantees).toEqual({
      fencing: "monotonic",
      fifo: true,
      consensus: true,
      crossProcess: true,
      records: true,
      semaphores: true,
      inspection: true,
      forceRelease: "grant",
    });
  });

  it("refuses bad URLs and options with a ConfigError naming the field, before any I/O", () => {
    expect(configError(() => zookeeperOptionsFromUrl("zookeeper://")).field).toBe("url");
    expect(configError(() => zookeeperOptionsFromUrl("zookeeper://u:p@a")).message).toContain(
      "credentials",
    );
    expect(configError(() => zookeeperOptionsFromUrl("zookeeper://a?ttl=5")).message).toContain(
      '"ttl"',
    );
    expect(configError(() => zookeeperOptionsFromUrl("zookeeper://a/x/../y")).field).toBe("url");
    expect(configError(() => new ZookeeperBackend({})).field).toBe("hosts");
    expect(configError(() => new ZookeeperBackend({ hosts: [] })).field).toBe("hosts");
    expect(configError(() => new ZookeeperBackend({ hosts: ["a:99999"] })).field).toBe("hosts");
    expect(configError(() => new ZookeeperBackend({ hosts: ["a"], prefix: "a/b" })).field).toBe(
      "prefix",
    );
    expect(configError(() => new ZookeeperBackend({ hosts: ["a"], chroot: "rel" })).field).toBe(
      "chroot",
    );
    expect(
      configError(() => new ZookeeperBackend({ hosts: ["a"], connectTimeoutMs: 0 })).field,
    ).toBe("connectTimeoutMs");
    expect(
      configError(() => new ZookeeperBackend({ hosts: ["a"], createClient: 5 as never })).field,
    ).toBe("createClient");
  });

  it("createCoordinator refuses a URL's bad prefix or connect bound, naming the option", () => {
    for (const [query, field] of [
      ["prefix=a.b/c", "prefix"],
      ["prefix=..", "prefix"],
      ["connectTimeoutMs=soon", "connectTimeoutMs"],
      ["connectTimeoutMs=0", "connectTimeoutMs"],
    ] as const) {
      const url = `zookeeper://127.0.0.1:1/apps?${query}`;
      expect(configError(() => createCoordinator({ url })).field, query).toBe(field);
      expect(configError(() => zookeeperOptionsFromUrl(url)).field, query).toBe(field);
    }
  });

  it("says plainly that there is no TLS: ?tls=true is refused, ?tls=false accepted", () => {
    const error = configError(() => zookeeperOptionsFromUrl("zookeeper://a?tls=true"));
    expect(error.field).toBe("url");
    expect(error.message).toMatch(/cannot use TLS: node-zookeeper-client.*plain TCP only/);
    expect(zookeeperOptionsFromUrl("zookeeper://a?tls=false").hosts).toEqual([
      { host: "a", port: 2181 },
    ]);
  });

  it("reads hosts by WHATWG rules and never prints a credential in an error", () => {
    expect(
      zookeeperOptionsFromUrl("zookeeper://[::1]:2181,[fe80::2],h%33:2183/ch%2Droot").hosts,
    ).toEqual([
      { host: "::1", port: 2181 },
      { host: "fe80::2", port: 2181 },
      { host: "h3", port: 2183 },
    ]);
    for (const url of [
      "zookeeper://u:hunter2@a",
      "zookeeper://hunter2@a/apps",
      "zookeeper://u:hunter2/x@a",
      "zookeeper://u:hunter2@a:70000",
      "zookeeper://u:hunter2@a?prefx=1",
      "zookeeper://u:hunter2@a,,b",
    ]) {
      const error = configError(() => zookeeperOptionsFromUrl(url));
      expect(error.field, url).toBe("url");
      expect(inspect(error, { depth: 10 }), url).not.toContain("hunter2");
    }
    expect(configError(() => zookeeperOptionsFromUrl("zookeeper://a?prefx=1")).message).toContain(
      '"prefx"',
    );
  });

  it("encodes lock names as one node name", () => {
    expect(encodeLockName("jobs/nightly invoices")).toBe("jobs%2Fnightly%20invoices");
    expect(encodeLockName(".")).toBe("%2E");
    expect(encodeLockName("..")).toBe("%2E%2E");
  });
});

describeBackend("zookeeper", (url) => {
  const chroot = `/opt-${randomUUID().slice(0, 8)}`;
  let raw: Client;
  beforeAll(async () => {
    raw = await inspector(url.slice("zookeeper://".length));
  });
  afterAll(async () => {
    await removeTree(raw, chroot).catch(() => undefined);
    raw.close();
  });

  describe("zookeeper options (server)", () => {
    it("createBackend loads the adapter by URL; nodes live under the chroot and prefix", async () => {
      const backend = await createBackend(`${url}${chroot}/app?prefix=locks`);
      expect(backend.kind).toBe("zookeeper");
      const s = await backend.openSession({ ttlMs: 5_000, ownerId: "by-url" });
      try {
        const grant = (await s.acquire("a/b", { wait: false, signal: never })) as Grant;
        expect(grant).not.toBeNull();
        const dir = `${chroot}/app/locks/${encodeLockName("a/b")}`;
        expect(await childrenOf((s as unknown as { client: Client }).client, dir)).toHaveLength(1);
        expect(await s.release(grant)).toBe(true);
      } finally {
        await s.close();
        await backend.close();
      }
    });

    it("uses the session timeout the ensemble negotiated as the TTL, and core says so", async () => {
      const backend = ZookeeperBackend.fromUrl(`${url}${chroot}`);
      const warnings: string[] = [];
      const c = createCoordinator({
        backend,
        ttlMs: 300,
        logger: { warn: (message: string) => warnings.push(message) },
      });
      try {
        const sessionOpened = new Promise<number>((resolve) =>
          c.on("sessionOpened", ({ ttlMs }) => resolve(ttlMs)),
        );
        const lock = await c.acquire("negotiated");
        // The ensemble's minSessionTimeout is 1000 ms (2 x tickTime of 500 ms).
        expect(await sessionOpened).toBe(1_000);
        expect(warnings.some((w) => w.includes("1000 ms session instead of the 300 ms"))).toBe(
          true,
        );
        await lock.release();
      } finally {
        await c.close();
        await backend.close();
      }
    });

    it("a user-supplied client: sessions share it, still exclude each other, and Baton never closes it", async () => {
      const client = zookeeper.createClient(url.slice("zookeeper://".length), {
        sessionTimeout: 6_000,
      });
      const backend = new ZookeeperBackend({ client, chroot });
      try {
        const s1 = await backend.openSession({ ttlMs: 2_000, ownerId: "same" });
        const s2 = await backend.openSession({ ttlMs: 2_000, ownerId: "same" });
        expect(s1.ttlMs).toBe(6_000);
        const g1 = (await s1.acquire("shared", { wait: false, signal: never })) as Grant;
        expect(g1).not.toBeNull();
        expect(await s2.acquire("shared", { wait: false, signal: never })).toBeNull();
        expect(await s2.release(g1)).toBe(false);
        await s1.keepAlive();
        // Closing a Baton session deletes its nodes; the client stays connected.
        await s1.close();
        const g2 = (await s2.acquire("shared", { wait: false, signal: never })) as Grant;
        expect(g2.token).toBeGreaterThan(g1.token);
        await backend.close();
        expect(client.getState()).toBe(zookeeper.State.SYNC_CONNECTED);
        expect(await childrenOf(client, `${chroot}/baton/shared`)).toEqual([]);
      } finally {
        client.close();
      }
    });
  });
});
