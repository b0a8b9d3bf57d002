import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { publishedDeclarationImports } from "@baton/conformance/harness";
import { Cluster, Redis } from "ioredis";
import { createClient, createCluster } from "redis";
import { createClient as createClient4, createCluster as createCluster4 } from "redis-v4";
import { createClient as createClient5, createCluster as createCluster5 } from "redis-v5";
import { describe, expect, expectTypeOf, it } from "vitest";
import {
  type NodeRedisClientLike,
  RedisBackend,
  type RedisClientLike,
  RedlockBackend,
} from "../src/index.js";

const src = resolve(dirname(fileURLToPath(import.meta.url)), "../src");

describe("published declarations", () => {
  it("name only @baton/core, never the driver's own types", async () => {
    expect(await publishedDeclarationImports(src)).toEqual(["@baton/core"]);
    // Type-checking the package takes a few seconds, much longer on a loaded machine.
  }, 240_000);

  it("describe a client by its shape, which ioredis' Redis and Cluster have", () => {
    expectTypeOf<Redis>().toExtend<RedisClientLike>();
    expectTypeOf<Cluster>().toExtend<RedisClientLike>();
    const client: RedisClientLike = new Redis({ lazyConnect: true });
    const cluster: RedisClientLike = new Cluster([{ host: "127.0.0.1", port: 1 }], {
      lazyConnect: true,
    });
    const nodes: RedisClientLike[] = [1, 2, 3].map(() => new Redis({ lazyConnect: true }));
    expect(new RedisBackend({ client }).client).toBe(client);
    expect(new RedisBackend({ client: cluster }).client).toBe(cluster);
    expect(new RedlockBackend({ clients: nodes }).nodes).toEqual(nodes);
  });

  it("describe a node-redis client by its shape, which node-redis 4, 5 and 6 clients and clusters have", () => {
    const root = { rootNodes: [{ url: "redis://127.0.0.1:1" }] };
    const clients = [createClient4(), createClient5(), createClient(), createClient({ RESP: 3 })];
    const clusters = [createCluster4(root), createCluster5(root), createCluster(root)];
    for (const c of [...clients, ...clusters]) {
      // Type-checked: each one is accepted as it is, without a cast.
      const backend = new RedisBackend({ client: c });
      expect(backend.client).toBe(c);
    }
    expectTypeOf<ReturnType<typeof createClient4>>().toExtend<NodeRedisClientLike>();
    expectTypeOf<ReturnType<typeof createClient5>>().toExtend<NodeRedisClientLike>();
    expectTypeOf<ReturnType<typeof createClient>>().toExtend<NodeRedisClientLike>();
    expectTypeOf<ReturnType<typeof createCluster4>>().toExtend<NodeRedisClientLike>();
    expectTypeOf<ReturnType<typeof createCluster5>>().toExtend<NodeRedisClientLike>();
    expectTypeOf<ReturnType<typeof createCluster>>().toExtend<NodeRedisClientLike>();
    expect(new RedisBackend({ client: clusters[0] }).endpoint).toBe(undefined);
    expect(new RedisBackend({ client: clusters[2] }).endpoint).toBe("127.0.0.1:1");
    expect(new RedisBackend({ client: createClient({ url: "redis://h:7000" }) }).endpoint).toBe(
      "h:7000",
    );
  });
});
