import { inspect } from "node:util";
import { SilentListener } from "@baton/conformance/faults";
import { describeBackend, type StartedServers, startServers } from "@baton/conformance/harness";
import { AuthenticationError, BatonError, createCoordinator } from "@baton/core";
import { Etcd3 } from "etcd3";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { EtcdBackend } from "../src/index.js";
import { hostsOf } from "./support/recording-client.js";

/** Generous: the machine may be busy; a hang would be minutes, not seconds. */
const BOUND_MS = 15_000;

describe("etcd against a store that accepts connections and never answers", () => {
  const cleanups: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const f of cleanups.splice(0).reverse()) await f().catch(() => undefined);
  });

  it.each([
    ["no credentials", ""],
    ["credentials in the URL", "baton:hunter2@"],
  ])("%s: acquire fails in bounded time naming the host, and close() settles", async (_, auth) => {
    const silent = await SilentListener.start();
    cleanups.push(() => silent.close());
    const host = `127.0.0.1:${silent.port}`;
    const lines: string[] = [];
    const note = (message: string, details?: unknown) =>
      lines.push(`${message} ${details instanceof Error ? details.message : String(details)}`);
    const coordinator = createCoordinator({
      url: `etcd://${auth}${host}?requestTimeoutMs=1000`,
      ttlMs: 3_000,
      logger: { debug: note, warn: note, error: note },
    });
    let started = performance.now();
    const error = await coordinator.acquire("silent", { waitMs: 5_000 }).catch((e: unknown) => e);
    const acquireMs = performance.now() - started;
    started = performance.now();
    await coordinator.close();
    const closeMs = performance.now() - started;
    console.log(
      `acquire failed after ${Math.round(acquireMs)} ms, close took ${Math.round(closeMs)} ms`,
    );
    expect(error).toBeInstanceOf(BatonError);
    expect((error as Error).message).toContain(host);
    expect(acquireMs).toBeLessThan(BOUND_MS);
    expect(closeMs).toBeLessThan(BOUND_MS);
    for (const text of [(error as Error).message, ...lines]) expect(text).not.toContain("hunter2");
  });

  it("a backend given only a silent member closes in bounded time, also while a session opens", async () => {
    const silent = await SilentListener.start();
    cleanups.push(() => silent.close());
    const backend = new EtcdBackend({ hosts: [`127.0.0.1:${silent.port}`] });
    const opening = backend.openSession({ ttlMs: 3_000, ownerId: "x" }).catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 200));
    const started = performance.now();
    await backend.close();
    const closeMs = performance.now() - started;
    const error = await opening;
    const openMs = performance.now() - started;
    console.log(
      `backend close took ${Math.round(closeMs)} ms, the open settled after ${Math.round(openMs)} ms`,
    );
    expect(closeMs).toBeLessThan(BOUND_MS);
    expect(openMs).toBeLessThan(BOUND_MS);
    expect(error).toBeInstanceOf(BatonError);
  });
});

describeBackend("etcd", () => {
  describe("etcd with authentication on (private cluster)", () => {
    let servers: StartedServers;
    let hosts: string[];
    beforeAll(async () => {
      servers = await startServers({ backends: ["etcd"] });
      const etcd = servers.groups.etcd;
      if (etcd === undefined) throw new Error("no etcd group");
      hosts = hostsOf(etcd.url);
      const admin = new Etcd3({ hosts });
      try {
        await admin.role("root").create();
        await admin.user("root").create("right-password");
        await admin.user("root").addRole("root");
        await admin.auth.authEnable();
      } finally {
        admin.close();
      }
    });
    afterAll(async () => {
      await servers?.stop();
    });

    it.each([
      ["a URL", () => ({ url: `etcd://root:wrong-password@${hosts.join(",")}` })],
      [
        "options",
        () => ({
          backend: new EtcdBackend({ hosts, username: "root", password: "wrong-password" }),
        }),
      ],
    ])(
      "a wrong password given in %s rejects at once with AuthenticationError, never retried",
      async (_, options) => {
        const coordinator = createCoordinator({ ...options(), ttlMs: 3_000 });
        try {
          const started = performance.now();
          const error = await coordinator
            .acquire("auth", { waitMs: 30_000 })
            .catch((e: unknown) => e);
          const tookMs = performance.now() - started;
          expect(error).toBeInstanceOf(AuthenticationError);
          expect((error as AuthenticationError).code).toBe("BATON_AUTH");
          expect((error as Error).message).toContain(hosts[0]);
          expect(inspect(error, { depth: 10 })).not.toContain("wrong-password");
          // Not retried until the 30 s wait runs out.
          expect(tookMs).toBeLessThan(10_000);
        } finally {
          await coordinator.close();
        }
      },
    );

    it("the right password locks", async () => {
      const coordinator = createCoordinator({
        url: `etcd://root:right-password@${hosts.join(",")}`,
        ttlMs: 3_000,
      });
      try {
        const lock = await coordinator.acquire("auth");
        expect(await lock.release()).toBe(true);
      } finally {
        await coordinator.close();
      }
    });
  });
});
