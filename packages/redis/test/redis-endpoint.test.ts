import { createBackend } from "@baton/core";
import { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { RedisBackend, RedlockBackend } from "../src/index.js";

// The constructors make their clients with lazyConnect: none of these tests connects.

describe("redis endpoint", () => {
  it("is the host:port of a redis:// URL, without its user or password", async () => {
    const backend = new RedisBackend({ url: "redis://user:secret@127.0.0.1:6390/2" });
    try {
      expect(backend.endpoint).toBe("127.0.0.1:6390");
    } finally {
      await backend.close();
    }
  });

  it("leaves out a password given as the whole user info, and takes the default port", async () => {
    const backend = new RedisBackend({ url: "rediss://s3cr3t-token@cache.example" });
    try {
      expect(backend.endpoint).toBe("cache.example:6379");
      expect(backend.endpoint).not.toContain("s3cr3t");
    } finally {
      await backend.close();
    }
  });

  it("lists every startup node of a cluster URL", async () => {
    const backend = new RedisBackend({ url: "redis://u:pw@10.0.0.1:7000,10.0.0.2:7001" });
    try {
      expect(backend.endpoint).toBe("10.0.0.1:7000, 10.0.0.2:7001");
    } finally {
      await backend.close();
    }
  });

  it("brackets an IPv6 host", async () => {
    const backend = new RedisBackend({ url: "redis://[::1]:6391" });
    try {
      expect(backend.endpoint).toBe("[::1]:6391");
    } finally {
      await backend.close();
    }
  });

  it("is the given client's host:port, not its password", async () => {
    const client = new Redis({
      host: "db.example",
      port: 6400,
      password: "hunter2",
      lazyConnect: true,
    });
    client.on("error", () => undefined);
    const backend = new RedisBackend({ client });
    try {
      expect(backend.endpoint).toBe("db.example:6400");
    } finally {
      await backend.close();
      client.disconnect();
    }
  });

  it("is set on a backend made from a URL by createBackend", async () => {
    const backend = await createBackend("redis://:pw@127.0.0.1:6392");
    try {
      expect(backend.endpoint).toBe("127.0.0.1:6392");
    } finally {
      await backend.close();
    }
  });
});

describe("redlock endpoint", () => {
  it("lists every node's host:port, without the user or password", async () => {
    const backend = new RedlockBackend({
      url: "redlock://user:secret@10.0.0.1:6379,10.0.0.2:6380,10.0.0.3",
    });
    try {
      expect(backend.endpoint).toBe("10.0.0.1:6379, 10.0.0.2:6380, 10.0.0.3:6379");
      expect(backend.endpoint).not.toContain("secret");
    } finally {
      await backend.close();
    }
  });

  it("lists the given clients' host:port", async () => {
    const clients = [6401, 6402, 6403].map((port) => {
      const c = new Redis({ host: "127.0.0.1", port, password: "hunter2", lazyConnect: true });
      c.on("error", () => undefined);
      return c;
    });
    const backend = new RedlockBackend({ clients });
    try {
      expect(backend.endpoint).toBe("127.0.0.1:6401, 127.0.0.1:6402, 127.0.0.1:6403");
    } finally {
      await backend.close();
      for (const c of clients) c.disconnect();
    }
  });
});
