import { describeBackend } from "@baton/conformance/harness";
import { ConfigError, createCoordinator } from "@baton/core";
import { Etcd3 } from "etcd3";
import { describe, expect, expectTypeOf, it } from "vitest";
import { EtcdBackend, type EtcdClient } from "../src/index.js";
import { hostsOf } from "./support/recording-client.js";

describe("the etcd client Baton takes, by shape (no server)", () => {
  it("an Etcd3 client of the etcd3 package fits EtcdClient", () => {
    // Checked by the type checker: a release of etcd3 that no longer fits fails the typecheck.
    expectTypeOf<Etcd3>().toMatchTypeOf<EtcdClient>();
    const client = new Etcd3({ hosts: ["127.0.0.1:1"] });
    try {
      const shaped: EtcdClient = client;
      expect(new EtcdBackend({ client: shaped }).kind).toBe("etcd");
    } finally {
      client.close();
    }
  });

  it("refuses an object without the members Baton calls, naming `client`", () => {
    const client = new Etcd3({ hosts: ["127.0.0.1:1"] });
    try {
      const partial = { ...client, kv: { txn: () => Promise.resolve({}) }, close: () => {} };
      let error: unknown;
      try {
        new EtcdBackend({ client: partial as unknown as EtcdClient });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).field).toBe("client");
    } finally {
      client.close();
    }
  });
});

describeBackend("etcd", (url) => {
  describe("a client passed as EtcdClient", () => {
    it("locks through it, and the backend leaves it open", async () => {
      const client: EtcdClient = new Etcd3({ hosts: hostsOf(url) });
      const backend = new EtcdBackend({ client });
      const coordinator = createCoordinator({ backend, ttlMs: 3_000 });
      try {
        const lock = await coordinator.acquire(`client-shape-${Date.now()}`);
        expect(lock.held).toBe(true);
        expect(await lock.release()).toBe(true);
      } finally {
        await coordinator.close();
        await backend.close();
      }
      // Still open: the backend closes only a client it built.
      const response = (await (client as Etcd3).kv.range({ key: Buffer.from("x") })) as {
        kvs: unknown[];
      };
      expect(Array.isArray(response.kvs)).toBe(true);
      client.close();
    });
  });
});
