import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describeBackend, findOnPath } from "@baton/conformance/harness";
import { createCoordinator } from "@baton/core";
import { Etcd3 } from "etcd3";
import { afterEach, describe, expect, it } from "vitest";
import { EtcdBackend } from "../src/index.js";
import { hostsOf } from "./support/recording-client.js";

/** `etcdctl lock NAME` whose child prints ETCD_LOCK_REV, then holds until `flag` exists. */
class EtcdctlLock {
  readonly child: ChildProcess;
  output = "";
  readonly exited: Promise<number | null>;

  constructor(etcdctl: string, endpoints: string, name: string, flag: string) {
    const script = `echo "rev=$ETCD_LOCK_REV"; while [ ! -f '${flag}' ]; do sleep 0.05; done`;
    this.child = spawn(
      etcdctl,
      [`--endpoints=${endpoints}`, "lock", name, "--", "sh", "-c", script],
      {
        env: { ...process.env, ETCDCTL_API: "3" },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    this.child.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
      this.output += chunk;
    });
    this.child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
      this.output += chunk;
    });
    this.exited = new Promise((resolve) => this.child.on("exit", (code) => resolve(code)));
  }

  /** The revision once the child got the lock, or undefined while it waits. */
  get rev(): bigint | undefined {
    const m = /rev=(\d+)/.exec(this.output);
    return m ? BigInt(m[1] as string) : undefined;
  }

  async waitForRev(timeoutMs: number): Promise<bigint> {
    const until = performance.now() + timeoutMs;
    while (this.rev === undefined) {
      if (performance.now() > until) throw new Error(`etcdctl lock got no lock: ${this.output}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    return this.rev;
  }
}

describeBackend("etcd", (url) => {
  describe("interop with etcdctl lock (empty prefix)", () => {
    const etcdctl = findOnPath("etcdctl");
    const endpoints = hostsOf(url).join(",");
    const cleanups: (() => unknown)[] = [];
    let dir = "";
    afterEach(async () => {
      for (const f of cleanups.splice(0).reverse())
        await Promise.resolve(f()).catch(() => undefined);
    });
    const setup = () => {
      if (etcdctl === undefined)
        throw new Error("etcdctl is not on PATH (scripts/install-servers.sh)");
      dir = mkdtempSync(join(tmpdir(), "baton-etcdctl-"));
      cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
      const backend = new EtcdBackend({ hosts: hostsOf(url) });
      cleanups.push(() => backend.close());
      const coordinator = createCoordinator({ backend, ttlMs: 5_000, ownerId: "baton" });
      cleanups.push(() => coordinator.close());
      const start = (name: string, flag: string) => {
        const lock = new EtcdctlLock(etcdctl, endpoints, name, join(dir, flag));
        cleanups.push(() => {
          lock.child.kill("SIGKILL");
        });
        return lock;
      };
      /** A Baton owner of its own (its own session: one place in a queue each). */
      const baton = (ownerId: string) => {
        const own = new EtcdBackend({ hosts: hostsOf(url) });
        cleanups.push(() => own.close());
        const c = createCoordinator({ backend: own, ttlMs: 5_000, ownerId });
        cleanups.push(() => c.close());
        return c;
      };
      return { coordinator, start, baton };
    };

    it("a Baton holder keeps etcdctl lock waiting until it releases", async () => {
      const { coordinator, start } = setup();
      const name = `interop-baton-first-${Date.now()}`;
      const lock = await coordinator.acquire(name);
      const other = start(name, "release");
      await new Promise((r) => setTimeout(r, 1_500));
      expect(other.rev).toBeUndefined();
      expect(lock.held).toBe(true);
      await lock.release();
      const rev = await other.waitForRev(10_000);
      expect(rev).toBeGreaterThan(lock.token);
      writeFileSync(join(dir, "release"), "");
      expect(await other.exited).toBe(0);
    });

    it("an etcdctl holder excludes Baton; its ETCD_LOCK_REV is the token Baton sees; Baton gets it after", async () => {
      const { coordinator, start } = setup();
      const name = `interop-etcdctl-first-${Date.now()}`;
      const other = start(name, "release");
      const rev = await other.waitForRev(10_000);
      expect(await coordinator.tryAcquire(name)).toBeNull();
      const holder = await coordinator.holder(name);
      // Uncontended, etcdctl's ETCD_LOCK_REV is its key's create revision: Baton's token for it.
      expect(holder?.token).toBe(rev);
      expect(holder?.ownerId).toMatch(/^etcd-lease:[0-9a-f]+$/);
      const waiting = coordinator.acquire(name, { waitMs: 15_000 });
      await new Promise((r) => setTimeout(r, 500));
      expect(existsSync(join(dir, "release"))).toBe(false);
      writeFileSync(join(dir, "release"), "");
      const lock = await waiting;
      expect(lock.token).toBeGreaterThan(rev);
      expect(await other.exited).toBe(0);
      await lock.release();
    });

    // B: a Baton coordinator, E: an `etcdctl lock` process. Each queues behind the one before.
    const orders = ["BBB", "BBE", "BEB", "BEE", "EBB", "EBE", "EEB", "EEE"];
    it.each(orders)(
      "mixed queue %s: tokens rise strictly in grant order, Baton's and ETCD_LOCK_REV alike",
      async (order) => {
        const { coordinator, start, baton } = setup();
        const name = `interop-queue-${order}-${Date.now()}`;
        const inspect = new Etcd3({ hosts: hostsOf(url) });
        cleanups.push(() => inspect.close());
        const queued = async (count: number) => {
          const until = performance.now() + 10_000;
          for (;;) {
            const keys = await inspect.getAll().prefix(`${name}/`).keys();
            if (keys.length >= count) return;
            if (performance.now() > until) throw new Error(`${count} waiters never queued`);
            await new Promise((r) => setTimeout(r, 20));
          }
        };
        type Entry = { grant(): Promise<bigint>; release(): Promise<unknown> };
        const entries: Entry[] = [];
        for (const [i, kind] of [...order].entries()) {
          if (kind === "B") {
            const c = baton(`baton-${i}`);
            const acquiring = c.acquire(name, { waitMs: 30_000 });
            acquiring.catch(() => undefined);
            entries.push({
              grant: async () => {
                const lock = await acquiring;
                // What holder() shows is the token the holder got.
                expect(await coordinator.holder(name)).toMatchObject({
                  ownerId: `baton-${i}`,
                  token: lock.token,
                });
                return lock.token;
              },
              release: async () => (await acquiring).release(),
            });
          } else {
            const flag = `release-${i}`;
            const lock = start(name, flag);
            entries.push({
              grant: () => lock.waitForRev(30_000),
              release: async () => {
                writeFileSync(join(dir, flag), "");
                expect(await lock.exited).toBe(0);
              },
            });
          }
          // The next one queues only behind this one.
          await queued(i + 1);
        }
        const tokens: bigint[] = [];
        for (const entry of entries) {
          tokens.push(await entry.grant());
          await entry.release();
        }
        for (let i = 1; i < tokens.length; i++) {
          expect(tokens[i], `grant ${i + 1} of ${order}: ${tokens.join(", ")}`).toBeGreaterThan(
            tokens[i - 1] as bigint,
          );
        }
      },
      60_000,
    );
  });
});
