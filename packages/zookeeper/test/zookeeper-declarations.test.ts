import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { publishedDeclarationImports } from "@baton/conformance/harness";
import zookeeper, { type Client } from "node-zookeeper-client";
import { describe, expect, expectTypeOf, it } from "vitest";
import {
  type ClientFactory,
  ZookeeperBackend,
  type ZookeeperClientLike,
  type ZookeeperSession,
} from "../src/index.js";

const src = resolve(dirname(fileURLToPath(import.meta.url)), "../src");

describe("published declarations", () => {
  it("name only @baton/core, never node-zookeeper-client's types", async () => {
    expect(await publishedDeclarationImports(src)).toEqual(["@baton/core"]);
  }, 180_000);

  it("describe a client by its shape, which node-zookeeper-client's Client has", async () => {
    expectTypeOf<Client>().toExtend<ZookeeperClientLike>();
    const client: ZookeeperClientLike = zookeeper.createClient("127.0.0.1:1");
    const factory: ClientFactory = () => zookeeper.createClient("127.0.0.1:1");
    const shared = new ZookeeperBackend({ client });
    const built = new ZookeeperBackend({ hosts: ["127.0.0.1:1"], createClient: factory });
    expectTypeOf<ZookeeperSession["client"]>().toEqualTypeOf<ZookeeperClientLike>();
    await shared.close();
    await built.close();
  });
});
