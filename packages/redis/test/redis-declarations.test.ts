import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { publishedDeclarationImports } from "@baton/conformance/harness";
import { Cluster, Redis } from "ioredis";
import { describe, expect, expectTypeOf, it } from "vitest";
import { RedisBackend, type RedisClientLike, RedlockBackend } from "../src/index.js";

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
});
