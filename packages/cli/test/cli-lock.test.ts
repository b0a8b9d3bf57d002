import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { TcpProxy } from "@baton/conformance/faults";
import { describeBackend } from "@baton/conformance/harness";
import { createCoordinator } from "@baton/core";
import { expect, it } from "vitest";
import { EXIT } from "../src/exit-codes.js";
import { type BatonRun, HOLD_UNTIL_TERM, until } from "./cli-helpers.js";
import { useBatonRuns } from "./support/baton-runs.js";
import { useTempDir } from "./support/temp-dir.js";

describeBackend("redis", (url) => {
  const dir = useTempDir("baton-cli-");
  const run = useBatonRuns();
  const name = () => `cli-${Math.random().toString(36).slice(2, 10)}`;

  it("two runs of the same NAME never overlap, and CMD gets a rising token", async () => {
    const lock = name();
    const log = join(dir(), `${lock}.log`);
    writeFileSync(log, "");
    const script = `echo "start $BATON_FENCING_TOKEN $(date +%s%N)" >> ${log}; sleep 0.4; echo "end $BATON_FENCING_TOKEN $(date +%s%N)" >> ${log}`;
    const a = run(["lock", lock, "--backend", url, "--ttl", "2000", "--", "sh", "-c", script]);
    const b = run(["lock", lock, "--backend", url, "--ttl", "2000", "--", "sh", "-c", script]);
    expect(await a.exited).toBe(0);
    expect(await b.exited).toBe(0);
    const lines = readFileSync(log, "utf8")
      .trim()
      .split("\n")
      .map((l) => l.split(" "));
    expect(lines.map((l) => l[0])).toEqual(["start", "end", "start", "end"]);
    const [s1, e1, s2] = lines.map((l) => BigInt(l[2] as string));
    expect(s2 as bigint).toBeGreaterThan(e1 as bigint);
    expect(s1 as bigint).toBeLessThan(e1 as bigint);
    const tokens = lines.map((l) => BigInt(l[1] as string));
    expect(tokens[0]).toBe(tokens[1]);
    expect(tokens[2] as bigint).toBeGreaterThan(tokens[0] as bigint);
  });

  it("--no-wait exits with the held code at once while another run holds the lock", async () => {
    const lock = name();
    const holder = run([
      "lock",
      lock,
      "--backend",
      url,
      "--",
      "sh",
      "-c",
      "echo holding; sleep 30",
    ]);
    await until(() => holder.output().includes("holding"), 20_000, "the first run to hold");
    const started = performance.now();
    const second = run(["lock", lock, "--backend", url, "--no-wait", "--", "true"]);
    expect(await second.exited).toBe(EXIT.held);
    expect(performance.now() - started).toBeLessThan(10_000);
    expect(second.output()).toContain("held by someone else");
  });

  it("SIGTERM to baton ends CMD and frees the lock at once", async () => {
    const lock = name();
    const holder = run([
      "lock",
      lock,
      "--backend",
      url,
      "--ttl",
      "30000",
      "--",
      "sh",
      "-c",
      "echo holding; sleep 30",
    ]);
    await until(() => holder.output().includes("holding"), 20_000, "the run to hold");
    holder.child.kill("SIGTERM");
    const code = await holder.exited;
    expect(code).toBe(143); // CMD's own end by SIGTERM: 128 + 15
    const c = createCoordinator({ url, ttlMs: 5_000 });
    try {
      expect(await c.tryAcquire(lock)).not.toBeNull(); // freed at once, not after the 30 s TTL
    } finally {
      await c.close();
    }
  });

  it("a lost lock (store cut off through a proxy) stops CMD and exits with the lost code", async () => {
    const port = Number(new URL(url.replace(/^redis:/, "http:")).port);
    const proxy = await TcpProxy.start({ host: "127.0.0.1", port });
    try {
      const lock = name();
      const holder = run([
        "lock",
        lock,
        "--backend",
        `redis://127.0.0.1:${proxy.port}`,
        "--ttl",
        "1000",
        "--grace",
        "500",
        "--",
        ...HOLD_UNTIL_TERM,
      ]);
      await until(() => holder.output().includes("holding"), 20_000, "the run to hold");
      proxy.blackhole();
      expect(await holder.exited).toBe(EXIT.lost);
      expect(holder.output()).toContain("got-term");
    } finally {
      await proxy.close();
    }
  });

  it("bad usage is exit 64 with a message naming what is wrong", async () => {
    const noBackend = run(["lock", "x", "--", "true"], { BATON_BACKEND: "" });
    expect(await noBackend.exited).toBe(EXIT.usage);
    expect(noBackend.output()).toContain("--backend");
    const badTtl = run(["lock", "x", "--backend", url, "--ttl", "soon", "--", "true"]);
    expect(await badTtl.exited).toBe(EXIT.usage);
    expect(badTtl.output()).toContain("--ttl");
    const noCmd = run(["lock", "x", "--backend", url]);
    expect(await noCmd.exited).toBe(EXIT.usage);
    expect(noCmd.output()).toContain("missing CMD");
  });

  it("baton elect with 3 instances runs CMD on exactly one; another takes over when it is killed", async () => {
    const election = name();
    const log = join(dir(), `${election}.leaders`);
    writeFileSync(log, "");
    const script = `echo "$BATON_FENCING_TOKEN" >> ${log}; exec sleep 60`;
    const instances = [0, 1, 2].map(() =>
      run(["elect", election, "--backend", url, "--ttl", "1000", "--", "sh", "-c", script]),
    );
    const leaders = () => readFileSync(log, "utf8").trim().split("\n").filter(Boolean);
    await until(() => leaders().length >= 1, 20_000, "a leader");
    await new Promise((r) => setTimeout(r, 1_500));
    expect(leaders()).toHaveLength(1);
    // Find the leading instance through the store and kill that baton process.
    const c = createCoordinator({ url, ttlMs: 5_000 });
    const holder = await c.holder(election);
    await c.close();
    expect(holder).not.toBeNull();
    const firstTerm = BigInt(leaders()[0] as string);
    const leaderRun = instances.find((i) =>
      holder?.ownerId.includes(`/${i.child.pid}/`),
    ) as BatonRun;
    expect(leaderRun).toBeDefined();
    leaderRun.child.kill("SIGKILL");
    await until(() => leaders().length >= 2, 15_000, "a second leader");
    expect(BigInt(leaders()[1] as string)).toBeGreaterThan(firstTerm);
  });
  it("status shows the holder, token and value; --watch --json follows changes", async () => {
    const lock = name();
    const c = createCoordinator({ url, ttlMs: 5_000, ownerId: "status-owner" });
    try {
      const held = await c.acquire(lock, { value: "10.0.0.7" });
      const once = run(["status", lock, "--backend", url, "--json"]);
      expect(await once.exited).toBe(0);
      const line = JSON.parse(once.output().trim().split("\n")[0] as string);
      expect(line).toMatchObject({
        name: lock,
        held: true,
        owner: "status-owner",
        token: `${held.token}`,
        value: "10.0.0.7",
      });
      const watch = run(["status", lock, "--backend", url, "--json", "--watch"]);
      await until(
        () => watch.output().includes('"held":true'),
        20_000,
        "the watch to show the holder",
      );
      await held.release();
      await until(
        () => watch.output().includes('"held":false'),
        20_000,
        "the watch to show the release",
      );
      watch.child.kill("SIGTERM");
      expect(await watch.exited).toBe(0);
    } finally {
      await c.close();
    }
  });
});
