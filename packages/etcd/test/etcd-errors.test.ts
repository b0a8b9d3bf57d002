import { BackendUnavailableError, ConfigError, SessionLostError } from "@baton/core";
import { EtcdPermissionDeniedError } from "etcd3";
import { describe, expect, it } from "vitest";
import { toBatonError } from "../src/etcd-errors.js";
import { EtcdBackend } from "../src/index.js";

describe("etcd errors say what failed, at which members, and what to check", () => {
  const client = {
    options: {
      hosts: ["10.0.0.1:2379", "https://ops:s3cret@10.0.0.2:2379", "https://ops:a/s3cret@10.0.0.3"],
    },
  };
  const members = "10.0.0.1:2379, https://***@10.0.0.2:2379, https://***@10.0.0.3";

  it("an open circuit breaker names the members and the last failure, never a credential", () => {
    const refused = new Error(
      "14 UNAVAILABLE: No connection established. Last error: Error: connect ECONNREFUSED 10.0.0.2:2379. Resolution note: ",
    );
    const first = toBatonError(refused, 'could not acquire "job"', client);
    expect(first).toBeInstanceOf(BackendUnavailableError);
    expect(first.message).toBe(
      `could not acquire "job": no connection (connect ECONNREFUSED 10.0.0.2:2379); etcd at ${members}: check that it runs there and is reachable`,
    );
    const open = Object.assign(
      new Error("Execution prevented because the circuit breaker is open"),
      { isBrokenCircuitError: true },
    );
    const later = toBatonError(open, 'could not acquire "job"', client);
    expect(later).toBeInstanceOf(BackendUnavailableError);
    expect(later.message).toContain("circuit breaker is open");
    expect(later.message).toContain("last failure: no connection (connect ECONNREFUSED");
    expect(later.message).toContain(`etcd at ${members}: check that it runs there`);
    expect(later.cause).toBe(open);
    for (const e of [first, later]) expect(e.message).not.toMatch(/s3cret|ops/);
  });

  it("a lost lease and refused credentials name the members too", () => {
    const lease = toBatonError(
      new Error("5 NOT_FOUND: etcdserver: requested lease not found"),
      "could not renew",
      client,
    );
    expect(lease).toBeInstanceOf(SessionLostError);
    expect(lease.message).toContain(`etcd at ${members}`);
    const denied = toBatonError(
      new EtcdPermissionDeniedError("etcdserver: permission denied"),
      'could not acquire "job"',
      client,
    );
    expect(denied).toBeInstanceOf(ConfigError);
    expect(denied.message).toContain(`etcd at ${members} refused them`);
    expect(denied.message).toContain("check the user name, password");
  });

  it("unreachable members: the first error and the ones after it name them", async () => {
    // Nothing listens on these ports (privileged, never bound by a test server).
    const backend = new EtcdBackend({
      hosts: ["127.0.0.1:1", "127.0.0.1:2"],
      requestTimeoutMs: 500,
    });
    try {
      const messages: string[] = [];
      for (let i = 0; i < 4; i++) {
        const error = await backend.openSession({ ttlMs: 5_000, ownerId: "x" }).catch((e) => e);
        expect(error).toBeInstanceOf(BackendUnavailableError);
        messages.push((error as Error).message);
      }
      for (const message of messages) {
        expect(message).toMatch(/^could not grant an etcd lease: /);
        expect(message).toContain("etcd at 127.0.0.1:1, 127.0.0.1:2: check that it runs there");
      }
    } finally {
      await backend.close();
    }
  });
});
