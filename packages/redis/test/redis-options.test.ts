import { inspect } from "node:util";
import {
  type BackendUrl,
  ConfigError,
  createBackend,
  createCoordinator,
  MemoryFence,
  parseBackendUrl,
} from "@baton/core";
import type { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import {
  RedisBackend,
  RedlockBackend,
  redisOptionsFromUrl,
  redlockOptionsFromUrl,
} from "../src/index.js";

function configErrorOf(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error("expected a ConfigError");
}

describe("redis options", () => {
  it("bad redis options are a ConfigError naming the field, before any I/O", () => {
    expect(configErrorOf(() => new RedisBackend({})).field).toBe("url");
    expect(configErrorOf(() => new RedisBackend({ url: "etcd://x:1" })).field).toBe("url");
    expect(configErrorOf(() => new RedisBackend({ url: "redis://h:1?prefx=a" })).message).toContain(
      "prefx",
    );
    expect(configErrorOf(() => new RedisBackend({ url: "redis://h:1/abc" })).field).toBe("url");
    expect(
      configErrorOf(() => new RedisBackend({ url: "redis://h:1", keyPrefix: "a{b}" })).field,
    ).toBe("keyPrefix");
    expect(
      configErrorOf(() => new RedisBackend({ url: "redis://h:1", commandTimeoutMs: 0 })).field,
    ).toBe("commandTimeoutMs");
    expect(configErrorOf(() => new RedisBackend({ client: {} as never })).field).toBe("client");
    expect(
      configErrorOf(() => new RedisBackend({ url: "redis://h:1", ttl: 5 } as never)).field,
    ).toBe("options.ttl");
  });

  it("natMap: a Redis Cluster URL only, each entry an announced host:port to a { host, port }", () => {
    const cluster = "redis://10.0.0.5:6379,10.0.0.6:6379";
    const to = { host: "127.0.0.1", port: 7001 };
    const natMapError = (natMap: unknown, url = cluster) => {
      const error = configErrorOf(() => new RedisBackend({ url, natMap } as never));
      expect(error.field).toBe("natMap");
      return error.message;
    };
    expect(natMapError({ "10.0.0.5:6379": to }, "redis://10.0.0.5:6379")).toContain("Cluster only");
    expect(
      configErrorOf(() => new RedisBackend({ client: {} as never, natMap: { "h:1": to } })).field,
    ).toBe("client");
    expect(natMapError(null)).toContain("must be an object");
    expect(natMapError([["10.0.0.5:6379", to]])).toContain("must be an object");
    expect(natMapError({})).toContain("at least one");
    expect(natMapError({ "10.0.0.5": to })).toContain('"10.0.0.5"');
    expect(natMapError({ "10.0.0.5:0": to })).toContain("host:port");
    expect(natMapError({ "10.0.0.5:70000": to })).toContain("host:port");
    expect(natMapError({ ":6379": to })).toContain("host:port");
    expect(natMapError({ "[::1]:6379": to })).toContain("without brackets");
    expect(natMapError({ "10.0.0.5:6379": { host: "", port: 1 } })).toContain(".host");
    expect(natMapError({ "10.0.0.5:6379": { host: "h", port: 1.5 } })).toContain(".port");
    expect(natMapError({ "10.0.0.5:6379": { host: "h", port: "7001" } })).toContain(".port");
    expect(natMapError({ "10.0.0.5:6379": { host: "h", port: 1, tls: true } })).toContain(
      'unknown field "tls"',
    );
    expect(natMapError({ "10.0.0.5:6379": "127.0.0.1:7001" })).toContain("{ host, port }");
    // Accepted: several hosts, or one host with ?cluster=true; IPv6 keys without brackets.
    const ok = [
      new RedisBackend({ url: cluster, natMap: { "10.0.0.5:6379": to, "::1:6380": to } }),
      new RedisBackend({ url: "redis://127.0.0.1:7001?cluster=true", natMap: { "h:1": to } }),
    ];
    return Promise.all(ok.map((b) => b.close()));
  });

  it("bad redlock options: an even or too small node count, a path, a duplicate node", () => {
    const even = configErrorOf(() => new RedlockBackend({ url: "redlock://a:1,b:2,c:3,d:4" }));
    expect(even.field).toBe("url");
    expect(even.message).toContain("odd number");
    expect(configErrorOf(() => new RedlockBackend({ url: "redlock://a:1" })).field).toBe("url");
    expect(
      configErrorOf(() => new RedlockBackend({ url: "redlock://a:1,b:2,a:1" })).message,
    ).toContain("twice");
    expect(configErrorOf(() => new RedlockBackend({ url: "redlock://a:1,b:2,c:3/x" })).field).toBe(
      "url",
    );
    expect(
      configErrorOf(
        () => new RedlockBackend({ url: "redlock://a:1,b:2,c:3", retryMinMs: 50, retryMaxMs: 10 }),
      ).field,
    ).toBe("retryMaxMs");
    expect(configErrorOf(() => new RedlockBackend({ clients: [] })).field).toBe("clients");
  });

  it("correctness mode refuses a single Redis node, saying why, by URL and by instance", () => {
    const fence = new MemoryFence();
    const byUrl = configErrorOf(() =>
      createCoordinator({ url: "redis://127.0.0.1:1", mode: "correctness", fence }),
    );
    expect(byUrl.field).toBe("mode");
    expect(byUrl.message).toContain("one node");
    const backend = new RedisBackend({ url: "redis://127.0.0.1:1" });
    const byInstance = configErrorOf(() =>
      createCoordinator({ backend, mode: "correctness", fence }),
    );
    expect(byInstance.field).toBe("mode");
    expect(byInstance.message).toContain("redis");
    void backend.close();
  });

  it("correctness mode refuses Redlock: it has no fencing token", () => {
    const fence = new MemoryFence();
    const byUrl = configErrorOf(() =>
      createCoordinator({
        url: "redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3",
        mode: "correctness",
        fence,
      }),
    );
    expect(byUrl.field).toBe("mode");
    expect(byUrl.message).toContain("no ordered fencing token");
  });

  it("registers redis://, rediss:// and redlock:// on import", async () => {
    const redis = await createBackend("redis://127.0.0.1:1?prefix=app:");
    const tls = await createBackend("rediss://127.0.0.1:1");
    const redlock = await createBackend("redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3");
    expect(redis.kind).toBe("redis");
    expect(redis.guarantees.fencing).toBe("single-node");
    expect((redis as RedisBackend).keyPrefix).toBe("app:");
    expect(tls.kind).toBe("redis");
    expect(redlock.kind).toBe("redlock");
    expect(redlock.guarantees.fencing).toBe("none");
    await Promise.all([redis.close(), tls.close(), redlock.close()]);
  });

  it("an unreachable server is BackendUnavailableError from openSession, not a hang", async () => {
    const backend = new RedisBackend({ url: "redis://127.0.0.1:1", commandTimeoutMs: 300 });
    const started = performance.now();
    const error = await backend
      .openSession({ ttlMs: 1_000, ownerId: "x" })
      .catch((e: unknown) => e);
    expect((error as Error).name).toBe("BackendUnavailableError");
    expect(performance.now() - started).toBeLessThan(3_000);
    await backend.close();
  });
});

describe("redis URLs", () => {
  /** The connection options of the client a URL builds (first node for Redlock). */
  const clientOptions = async (url: string) => {
    const backend = await createBackend(url);
    const client =
      backend instanceof RedlockBackend ? backend.nodes[0] : (backend as RedisBackend).client;
    const { host, port, db, username, password, tls } = (client as Redis).options;
    await backend.close();
    return { host, port, db, username, password, tls };
  };

  it("reads credentials, hosts, database and TLS by WHATWG rules", async () => {
    expect(await clientOptions("redis://u:pa@ss@cache.internal:6380/2")).toEqual({
      host: "cache.internal",
      port: 6380,
      db: 2,
      username: "u",
      password: "pa@ss",
      tls: undefined,
    });
    expect(await clientOptions("rediss://app:p%2Fw%3F%23%25@[::1]:6379")).toMatchObject({
      host: "::1",
      port: 6379,
      username: "app",
      password: "p/w?#%",
      tls: {},
    });
    // A user info without ":" is the default user's password, as redis-cli -u reads it.
    expect(await clientOptions("redis://TOKEN-42@cache")).toMatchObject({
      host: "cache",
      port: 6379,
      username: null,
      password: "TOKEN-42",
    });
    expect(await clientOptions("redis://:only-pw@cache")).toMatchObject({
      username: null,
      password: "only-pw",
    });
    expect(await clientOptions("redlock://u:pa@ss@a:1,b:2,c:3")).toMatchObject({
      host: "a",
      port: 1,
      username: "u",
      password: "pa@ss",
    });
  });

  it("refuses hostile URLs with a ConfigError(url) that never prints the credential", () => {
    const hostile: ReadonlyArray<[url: string, secret: string]> = [
      ["redis://u:s3/cret@host:6379", "s3/cret"],
      ["redis://u:s3?cret@host:6379", "s3?cret"],
      ["redis://u:s3#cret@host:6379", "s3#cret"],
      ["redis://TOK/EN@host", "TOK"],
      ["redis://u:Qx%zz@host", "Qx"],
      ["redis://u:hunter2@host:99999", "hunter2"],
      ["redis://u:hunter2@host/notadb", "hunter2"],
      ["redis://u:hunter2@host?prefx=a", "hunter2"],
      ["redis://user:hunter2", "hunter2"],
      ["rediss://u:hunter2@a:1,b:2/0", "hunter2"],
      ["redlock://u:hunter2@a:1,b:2", "hunter2"],
      ["redlock://u:hunter2@a:1,b:2,c:3?retryMs=5", "hunter2"],
    ];
    for (const [url, secret] of hostile) {
      const make = () =>
        url.startsWith("redlock") ? new RedlockBackend({ url }) : new RedisBackend({ url });
      const error = configErrorOf(make);
      expect(error.field, url).toBe("url");
      expect(inspect(error, { depth: 10 }), url).not.toContain(secret);
    }
  });

  it("an unknown query parameter is a ConfigError naming it, for every scheme", () => {
    for (const url of [
      "redis://h:1?prefx=a",
      "rediss://h:1?prefx=a",
      "redis://h1:1,h2:2?prefx=a",
      "redlock://a:1,b:2,c:3?prefx=a",
    ]) {
      const make = () =>
        url.startsWith("redlock") ? new RedlockBackend({ url }) : new RedisBackend({ url });
      const error = configErrorOf(make);
      expect(error.field, url).toBe("url");
      expect(error.message, url).toContain('"prefx"');
    }
  });

  it("redisOptionsFromUrl and redlockOptionsFromUrl read a URL's options, without I/O", () => {
    const href = "redis://u:pw@h:1/2?prefix=app:&commandTimeoutMs=700";
    expect(redisOptionsFromUrl(parseBackendUrl(href))).toEqual({
      url: href,
      keyPrefix: "app:",
      commandTimeoutMs: 700,
    });
    expect(redisOptionsFromUrl(parseBackendUrl("redis://a:1,b:2"))).toEqual({
      url: "redis://a:1,b:2",
    });
    const nodes = "redlock://a:1,b:2,c:3?nodeTimeoutMs=90&retryMinMs=20&retryMaxMs=30";
    expect(redlockOptionsFromUrl(parseBackendUrl(nodes))).toEqual({
      url: nodes,
      nodeTimeoutMs: 90,
      retryMinMs: 20,
      retryMaxMs: 30,
    });
    /** A parsed URL with another query, as the registry's own check would not let it through. */
    const withQuery = (url: string, query: string): BackendUrl => ({
      ...parseBackendUrl(url),
      searchParams: new URLSearchParams(query),
    });
    const fieldOf = (fn: () => unknown) => configErrorOf(fn).field;
    expect(fieldOf(() => redisOptionsFromUrl(withQuery("redis://h:1", "commandTimeoutMs=x")))).toBe(
      "commandTimeoutMs",
    );
    expect(fieldOf(() => redisOptionsFromUrl(withQuery("redis://h:1", "cluster=yes")))).toBe("url");
    expect(fieldOf(() => redisOptionsFromUrl(withQuery("redis://h:1", "prefx=a")))).toBe("url");
    expect(
      fieldOf(() => redlockOptionsFromUrl(withQuery("redlock://a:1,b:2,c:3", "retryMaxMs=5"))),
    ).toBe("retryMaxMs");
    expect(fieldOf(() => redlockOptionsFromUrl(parseBackendUrl("redis://a:1,b:2,c:3")))).toBe(
      "url",
    );
    // Options given beside the URL win over its query.
    const backend = new RedisBackend({ url: "redis://h:1?prefix=url:", keyPrefix: "given:" });
    expect(backend.keyPrefix).toBe("given:");
    void backend.close();
  });
});
