import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { describeBackend } from "@baton/conformance/harness";
import { History, RecordedCoordinator } from "@baton/conformance/history";
import { type Coordinator, createCoordinator, type Holder } from "@baton/core";
import type { Client } from "node-zookeeper-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { touchSession } from "../src/client-calls.js";
import { encodeLockName, ZookeeperBackend } from "../src/index.js";
import {
  connectString,
  expectCleanHistory,
  INTEROP_TEST_MS,
  queuedCount,
  RecordedInteropWorker,
  stillPending,
} from "./interop/interop-steps.js";
import { type InteropWorker, spawnInteropWorker } from "./interop/spawn-interop-worker.js";
import { currentChildrenOf, inspector, removeTree, waitUntil } from "./support/counting-clients.js";

const BATON_BIN = fileURLToPath(new URL("../../cli/bin/baton.js", import.meta.url));

/** Runs `baton ...args` from the CLI's sources; resolves with its stdout once it exits 0. */
function batonCli(args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ["--conditions=@baton/source", "--import", "tsx", BATON_BIN, ...args],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => {
      out += d;
    });
    child.stderr.on("data", (d) => {
      err += d;
    });
    child.on("error", reject);
    child.on("exit", (code) =>
      code === 0
        ? resolve(out)
        : reject(new Error(`baton ${args.join(" ")}: ${code}\n${out}${err}`)),
    );
  });
}

/** The data of `path` as text, once `client` has caught up with the leader. */
async function dataOf(client: Client, path: string): Promise<string> {
  await touchSession(client);
  return new Promise((resolve, reject) => {
    client.getData(path, (error, data) => (error ? reject(error) : resolve(`${data ?? ""}`)));
  });
}

// Baton, Curator 5.4 (InterProcessMutex, in a JVM) and kazoo 2.8 (Lock with
// extra_lock_patterns=['-lock-'], in Python) on one lock: `/<prefix>/interop-a`.
describeBackend("zookeeper", (url) => {
  const prefix = `ia${randomUUID().slice(0, 8)}`;
  const name = "interop-a";
  const dir = `/${prefix}/${encodeLockName(name)}`;
  let raw: Client;
  let backend: ZookeeperBackend;
  let curator: InteropWorker;
  let kazoo: InteropWorker;
  const coordinators: Coordinator[] = [];
  const coordinator = (ownerId: string) => {
    const c = createCoordinator({ backend, closeBackend: false, ttlMs: 10_000, ownerId });
    coordinators.push(c);
    return c;
  };

  beforeAll(async () => {
    const connect = connectString(url);
    raw = await inspector(connect);
    backend = ZookeeperBackend.fromUrl(url, { prefix });
    [curator, kazoo] = await Promise.all([
      spawnInteropWorker({
        library: "curator",
        recipe: "lock",
        connect,
        path: dir,
        id: "java-billing",
      }),
      spawnInteropWorker({
        library: "kazoo",
        recipe: "lock",
        connect,
        path: dir,
        id: "python-reports",
      }),
    ]);
  }, 120_000);
  afterAll(async () => {
    await Promise.allSettled([curator, kazoo].map((w) => w?.stop()));
    await Promise.allSettled(coordinators.map((c) => c.close()));
    await backend?.close();
    await removeTree(raw, `/${prefix}`).catch(() => undefined);
    raw?.close();
  });

  describe("one lock shared by Baton, Curator and kazoo", { timeout: INTEROP_TEST_MS }, () => {
    it("a queue of Baton, Curator, kazoo and Baton again hands the lock on in order", async () => {
      const history = new History();
      const first = new RecordedCoordinator(history, "baton", coordinator("baton-1"));
      const last = new RecordedCoordinator(history, "baton-2", coordinator("baton-2"));
      const c = new RecordedInteropWorker(history, curator, name);
      const k = new RecordedInteropWorker(history, kazoo, name);
      const lock = await first.acquire(name);
      const curatorTurn = c.acquire(30_000);
      await queuedCount(raw, dir, 2, "Curator queues behind Baton");
      const kazooTurn = k.acquire(30_000);
      await kazoo.queued();
      const batonTurn = last.acquire(name, { waitMs: 30_000 });
      await queuedCount(raw, dir, 4, "Baton queues behind kazoo");
      expect(await stillPending(curatorTurn, 300)).toBe(true);

      await first.release(lock);
      await curatorTurn;
      expect(await stillPending(Promise.race([kazooTurn, batonTurn]), 300)).toBe(true);
      await c.release();
      await kazooTurn;
      expect(await stillPending(batonTurn, 300)).toBe(true);
      await k.release();
      await last.release(await batonTurn);

      expectCleanHistory(history);
      const grants = history.entries.flatMap((e) =>
        e.type === "acquire" && e.result?.status === "ok" ? [e.process] : [],
      );
      expect(grants).toEqual(["baton", "java-billing", "python-reports", "baton-2"]);
      expect(await currentChildrenOf(raw, dir)).toEqual([]);
    });

    it("holder() and watch() name a Curator holder (its address) and a kazoo holder (its identifier)", async () => {
      const baton = coordinator("baton-watcher");
      const seen: (Holder | null)[] = [];
      const stop = new AbortController();
      const watching = (async () => {
        for await (const h of baton.watch(name, { signal: stop.signal })) seen.push(h);
      })();
      await waitUntil(() => seen.length > 0, 30_000, "watch() reports the free lock");

      const held = await curator.acquire(30_000);
      // Curator's node data is the client's address, as Curator writes it.
      const address = await dataOf(raw, `${dir}/${held.node}`);
      expect(address).not.toBe("");
      const curatorHolder = { ownerId: address, token: held.token, foreign: "curator" };
      expect(await baton.holder(name)).toEqual(curatorHolder);
      await waitUntil(
        () => seen.some((h) => h?.foreign === "curator" && h.token === held.token),
        30_000,
        "watch() reports Curator's holder",
      );
      await curator.release();

      const kazooHeld = await kazoo.acquire(30_000);
      const kazooHolder = { ownerId: "python-reports", token: kazooHeld.token, foreign: "kazoo" };
      expect(await baton.holder(name)).toEqual(kazooHolder);
      await waitUntil(
        () => seen.some((h) => h?.foreign === "kazoo" && h.token === kazooHeld.token),
        30_000,
        "watch() reports kazoo's holder",
      );
      await kazoo.release();
      await waitUntil(() => seen.at(-1) === null, 30_000, "watch() reports the lock free again");
      stop.abort();
      await watching;
      expect(seen.filter((h) => h !== null)).toEqual([curatorHolder, kazooHolder]);
    });

    it("baton status names a Curator holder and a kazoo holder", async () => {
      const backendUrl = `${url}?prefix=${prefix}`;
      const held = await curator.acquire(30_000);
      const address = await dataOf(raw, `${dir}/${held.node}`);
      const status = async () =>
        JSON.parse(await batonCli(["status", name, "--backend", backendUrl, "--json"]));
      const [curatorText, curatorJson] = await Promise.all([
        batonCli(["status", name, "--backend", backendUrl]),
        status(),
      ]);
      expect(curatorText).toContain(
        `${name}: held by a curator client ${JSON.stringify(address)}, token ${held.token}`,
      );
      expect(curatorJson).toMatchObject({
        held: true,
        owner: address,
        token: `${held.token}`,
        foreign: "curator",
      });
      await curator.release();

      const kazooHeld = await kazoo.acquire(30_000);
      const kazooText = await batonCli(["status", name, "--backend", backendUrl]);
      expect(kazooText).toContain(
        `${name}: held by a kazoo client "python-reports", token ${kazooHeld.token}`,
      );
      await kazoo.release();
    });
  });
});
