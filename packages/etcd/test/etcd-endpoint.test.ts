import { createBackend } from "@baton/core";
import { Etcd3 } from "etcd3";
import { describe, expect, it } from "vitest";
import { EtcdBackend } from "../src/index.js";

// The etcd3 client dials on its first call: none of these tests connects.

describe("etcd endpoint (no server)", () => {
  it("lists the hosts of an etcd:// URL, without the user or password", async () => {
    const backend = await createBackend("etcd://user:secret@10.0.0.1:2379,10.0.0.2:2380,[::1]");
    try {
      expect(backend.endpoint).toBe("10.0.0.1:2379, 10.0.0.2:2380, [::1]:2379");
      expect(backend.endpoint).not.toContain("secret");
      expect(backend.endpoint).not.toContain("user");
    } finally {
      await backend.close();
    }
  });

  it("is the hosts option as written, without a scheme or user info", async () => {
    const backend = new EtcdBackend({
      hosts: ["etcd1.example:2379", "http://etcd2.example:2379/", "http://u:pw@etcd3.example:2379"],
      username: "root",
      password: "hunter2",
    });
    try {
      expect(backend.endpoint).toBe("etcd1.example:2379, etcd2.example:2379, etcd3.example:2379");
    } finally {
      await backend.close();
    }
  });

  it("names the hosts, not https://, with tls on", async () => {
    const backend = new EtcdBackend({ hosts: ["etcd1.example:2379"], tls: true });
    try {
      expect(backend.endpoint).toBe("etcd1.example:2379");
    } finally {
      await backend.close();
    }
  });

  it("is undefined for a given client, which does not say where it connects", async () => {
    const client = new Etcd3({ hosts: ["127.0.0.1:2379"] });
    const backend = new EtcdBackend({ client });
    try {
      expect(backend.endpoint).toBeUndefined();
    } finally {
      await backend.close();
      client.close();
    }
  });
});
