import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { TcpProxy } from "@baton/conformance/faults";
import { describeBackend } from "@baton/conformance/harness";
import { createCoordinator } from "@baton/core";
import { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import { RedisBackend, RedlockBackend } from "../src/index.js";

function hostPort(address: string): { host: string; port: number } {
  const m = /^([^:/]+):(\d+)$/.exec(address);
  if (m === null) throw new Error(`unexpected address ${address}`);
  return { host: m[1] as string, port: Number(m[2]) };
}

/** Waits until `test()` holds, for at most `ms`; returns whether it did. */
async function eventually(test: () => boolean, ms = 3_000): Promise<boolean> {
  const until = performance.now() + ms;
  while (!test()) {
    if (performance.now() > until) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f().catch(() => undefined);
});

/** A lock taken, waited for (which opens the release subscriber), handed over and released. */
async function handOver(backend: RedisBackend | RedlockBackend, name: string): Promise<void> {
  // The backend's own close() is under test: the coordinators leave it open.
  const a = createCoordinator({ backend, ttlMs: 3_000, closeBackend: false });
  const b = createCoordinator({ backend, ttlMs: 3_000, closeBackend: false });
  cleanups.push(
    () => a.close(),
    () => b.close(),
  );
  const first = await a.acquire(name);
  const second = b.acquire(name, { waitMs: 10_000 });
  await new Promise((r) => setTimeout(r, 200));
  await first.release();
  await (await second).release();
  await a.close();
  await b.close();
}

describeBackend("redis", (url) => {
  describe("connections after close()", () => {
    it("a backend built from a URL closes every connection it opened", async () => {
      const proxy = await TcpProxy.start(hostPort(url.replace("redis://", "")));
      cleanups.push(() => proxy.close());
      const backend = new RedisBackend({ url: `redis://127.0.0.1:${proxy.port}?prefix=conn:` });
      cleanups.push(() => backend.close());
      await handOver(backend, `url-${Date.now()}`);
      expect(proxy.connections).toBe(2); // commands and the release subscriber
      await backend.close();
      expect(await eventually(() => proxy.connections === 0)).toBe(true);
    });

    it("with your own client: closes its duplicates, keeps your client open", async () => {
      const proxy = await TcpProxy.start(hostPort(url.replace("redis://", "")));
      cleanups.push(() => proxy.close());
      const client = new Redis({ host: "127.0.0.1", port: proxy.port });
      cleanups.push(async () => client.disconnect());
      const backend = new RedisBackend({ client, keyPrefix: "conn:" });
      cleanups.push(() => backend.close());
      await handOver(backend, `own-${Date.now()}`);
      expect(proxy.connections).toBe(2);
      await backend.close();
      expect(await eventually(() => proxy.connections === 1)).toBe(true);
      expect(client.status).toBe("ready");
      expect(await client.ping()).toBe("PONG");
    });
  });
});

describeBackend("redlock", (url) => {
  describe("connections after close()", () => {
    it("a backend built from a URL closes every connection it opened", async () => {
      const nodes = url.replace("redlock://", "").split(",").map(hostPort);
      const proxies = await Promise.all(nodes.map((n) => TcpProxy.start(n)));
      cleanups.push(() => Promise.all(proxies.map((p) => p.close())));
      const open = () => proxies.reduce((n, p) => n + p.connections, 0);
      const backend = new RedlockBackend({
        url: `redlock://${proxies.map((p) => `127.0.0.1:${p.port}`).join(",")}?prefix=conn:`,
      });
      cleanups.push(() => backend.close());
      await handOver(backend, `url-${Date.now()}`);
      expect(open()).toBe(proxies.length);
      await backend.close();
      expect(await eventually(() => open() === 0)).toBe(true);
    });
  });
});

/**
 * Runs the factory example in a child process; resolves with how long it lived on after
 * printing "closed" (`Infinity` when it was still running `graceMs` later).
 */
async function exitAfterClose(args: string[], graceMs = 5_000): Promise<number> {
  const script = fileURLToPath(new URL("./fixtures/factory-exit.ts", import.meta.url));
  const child = spawn(
    process.execPath,
    ["--conditions=@baton/source", "--import", "tsx", script, ...args],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  cleanups.push(async () => child.kill("SIGKILL"));
  let closedAt: number | undefined;
  child.stdout.on("data", (chunk: Buffer) => {
    if (chunk.toString().includes("closed")) closedAt ??= performance.now();
  });
  const exited = new Promise<number>((resolve) =>
    child.on("exit", () => resolve(performance.now())),
  );
  // Starting node with tsx can take a while on a busy machine: no bound on that part.
  while (closedAt === undefined && child.exitCode === null) {
    await Promise.race([exited, new Promise((r) => setTimeout(r, 50))]);
  }
  if (closedAt === undefined) throw new Error(`exited with ${child.exitCode} before closing`);
  const late = new Promise<number>((r) => setTimeout(() => r(Number.POSITIVE_INFINITY), graceMs));
  const at = await Promise.race([exited, late]);
  return at - closedAt;
}

describeBackend("redis", (url) => {
  it("the README's factory form exits once the coordinator is closed", async () => {
    expect(await exitAfterClose([url])).toBeLessThan(5_000);
  }, 60_000);
  it("the same with your own client, closed by you", async () => {
    expect(await exitAfterClose([url, "own-client"])).toBeLessThan(5_000);
  }, 60_000);
});

describeBackend("redlock", (url) => {
  it("the README's factory form exits once the coordinator is closed", async () => {
    expect(await exitAfterClose([url])).toBeLessThan(5_000);
  }, 60_000);
});
