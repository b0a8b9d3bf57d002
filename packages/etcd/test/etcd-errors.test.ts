import { BackendUnavailableError, ConfigError, SessionLostError } from "@baton/core";
import { EtcdPermissionDeniedError } from "etcd3";
import { describe, expect, it } from "vitest";
import { etcdContext, membersOf, toBatonError } from "../src/etcd-errors.js";
import { EtcdBackend } from "../src/index.js";

describe("etcd errors say what failed, at which members, and what to check", () => {
  const client = {
    options: {
      hosts: ["10.0.0.1:2379", "https://ops:s3cret@10.0.0.2:2379", "https://ops:a/s3cret@10.0.0.3"],
    },
  };
  const members = "10.0.0.1:2379, https://***@10.0.0.2:2379, https://***@10.0.0.3";
  const acquiring = etcdContext('could not acquire "job"', membersOf(client));

  it("names the members a client talks to, without credentials", () => {
    expect(membersOf(client)).toBe(members);
    expect(acquiring).toBe(`could not acquire "job" (etcd at ${members})`);
  });

  it("an open circuit breaker names the members and the last failure, never a credential", () => {
    const refused = new Error(
      "14 UNAVAILABLE: No connection established. Last error: Error: connect ECONNREFUSED 10.0.0.2:2379. Resolution note: ",
    );
    const first = toBatonError(refused, acquiring);
    expect(first).toBeInstanceOf(BackendUnavailableError);
    expect(first.message).toBe(
      `could not acquire "job" (etcd at ${members}): no connection (connect ECONNREFUSED 10.0.0.2:2379); check that etcd runs there and is reachable`,
    );
    const open = Object.assign(
      new Error("Execution prevented because the circuit breaker is open"),
      { isBrokenCircuitError: true },
    );
    const later = toBatonError(open, etcdContext("could not read the lock holder", members));
    expect(later).toBeInstanceOf(BackendUnavailableError);
    expect(later.message).toContain("circuit breaker is open");
    expect(later.message).toContain("last failure: no connection (connect ECONNREFUSED");
    expect(later.message).toMatch(
      /^could not read the lock holder \(etcd at .*\): the etcd client holds off .*; check that etcd runs there and is reachable$/,
    );
    expect(later.cause).toBe(open);
    for (const e of [first, later]) expect(e.message).not.toMatch(/s3cret|ops/);
  });

  it("a lost lease and refused credentials name the members too", () => {
    const lease = toBatonError(
      new Error("5 NOT_FOUND: etcdserver: requested lease not found"),
      etcdContext("could not renew", members),
    );
    expect(lease).toBeInstanceOf(SessionLostError);
    expect(lease.message).toBe(
      `could not renew (etcd at ${members}): the etcd lease is gone (etcdserver: requested lease not found); its locks are lost, the next acquire opens a new one`,
    );
    const denied = toBatonError(
      new EtcdPermissionDeniedError("etcdserver: permission denied"),
      acquiring,
    );
    expect(denied).toBeInstanceOf(ConfigError);
    expect(denied.message).toBe(
      `credentials: could not acquire "job" (etcd at ${members}): etcd refused them (etcdserver: permission denied); check the user name, password and the user's roles`,
    );
  });

  it("a Baton error passes through unchanged", () => {
    const lost = new SessionLostError("gone");
    expect(toBatonError(lost, acquiring)).toBe(lost);
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
        expect(message).toMatch(
          /^could not grant an etcd lease \(etcd at 127\.0\.0\.1:1, 127\.0\.0\.1:2\): .*; check that etcd runs there and is reachable$/,
        );
      }
    } finally {
      await backend.close();
    }
  });
});
