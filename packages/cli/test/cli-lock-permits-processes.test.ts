import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { proxyHosts } from "@baton/conformance/faults";
import { type BackendKind, describeBackend } from "@baton/conformance/harness";
import { expect, it } from "vitest";
import { EXIT } from "../src/exit-codes.js";
import { baton, HOLD_UNTIL_TERM, maxAtOnce, neverBesideAWrite, until } from "./cli-helpers.js";
import { useBatonRuns } from "./support/baton-runs.js";
import { linesOf } from "./support/lines-of.js";
import { useTempDir } from "./support/temp-dir.js";

/** `baton lock --permits / --read / --write` as separate processes run it against a real store. */
const permitsSuite = (url: string) => {
  const dir = useTempDir("baton-cli-permits-");
  const run = useBatonRuns();
  const name = () => `cli-permits-${Math.random().toString(36).slice(2, 10)}`;
  /** A log CMD appends to, and a file whose creation lets every CMD end. */
  const world = (id: string) => {
    const log = join(dir(), `${id}.log`);
    writeFileSync(log, "");
    const go = join(dir(), `${id}.go`);
    const lines = () => linesOf(log);
    return { log, go, lines, starts: () => lines().filter((l) => l.startsWith("start")) };
  };
  /** CMD: logs `start WHO TOKEN`, waits for `gate`, logs `end WHO TOKEN`. */
  const cmd = (who: string, log: string, gate: string) => [
    "sh",
    "-c",
    `echo "start ${who} $BATON_FENCING_TOKEN" >> ${log}; while [ ! -e ${gate} ]; do sleep 0.02; done; echo "end ${who} $BATON_FENCING_TOKEN" >> ${log}`,
  ];

  it("two baton lock --permits 2 run their CMDs at once; a third waits until one ends", async () => {
    const sem = name();
    const { log, go, lines, starts } = world(sem);
    const lock = (who: string) =>
      run(["lock", sem, "--permits", "2", "--backend", url, "--", ...cmd(who, log, go)]);
    const a = lock("a");
    const b = lock("b");
    await until(() => starts().length === 2, 30_000, "two runs to hold a permit");
    const c = lock("c");
    await new Promise((r) => setTimeout(r, 1_500)); // c has had the time to start, were it let in
    expect(starts()).toHaveLength(2);
    writeFileSync(go, "");
    expect(await Promise.all([a.exited, b.exited, c.exited])).toEqual([0, 0, 0]);
    expect(maxAtOnce(lines())).toBe(2);
    const order = lines().map((l) => l.split(" ").slice(0, 2).join(" "));
    expect(order.indexOf("start c")).toBeGreaterThan(order.findIndex((l) => l.startsWith("end")));
    const tokens = starts().map((l) => BigInt(l.split(" ")[2] as string));
    expect(new Set(tokens).size).toBe(3);
  });

  it("a --read runs beside another --read but not beside a --write", async () => {
    const rw = name();
    const { log, go, starts, lines } = world(rw);
    const lock = (who: string, side: "--read" | "--write", gate: string) =>
      run(["lock", rw, side, "--backend", url, "--", ...cmd(who, log, gate)]);
    const r1 = lock("r1", "--read", go);
    const r2 = lock("r2", "--read", go);
    await until(() => starts().length === 2, 30_000, "two readers at once");
    const writeGo = `${go}.write`;
    const w = lock("w", "--write", writeGo);
    await new Promise((r) => setTimeout(r, 1_500)); // w has had the time to start, were it let in
    expect(starts()).toHaveLength(2);
    writeFileSync(go, "");
    expect(await Promise.all([r1.exited, r2.exited])).toEqual([0, 0]);
    await until(() => starts().length === 3, 30_000, "the write to start");
    const r3 = lock("r3", "--read", go);
    await new Promise((r) => setTimeout(r, 1_500)); // r3 has had the time to start, were it let in
    expect(starts()).toHaveLength(3);
    writeFileSync(writeGo, "");
    expect(await w.exited).toBe(0);
    expect(await r3.exited).toBe(0);
    expect(neverBesideAWrite(lines())).toBe(true);
    const token = (who: string) =>
      BigInt(
        starts()
          .find((l) => l.startsWith(`start ${who} `))
          ?.split(" ")[2] as string,
      );
    expect(token("w")).toBeGreaterThan(token("r1"));
    expect(token("r3")).toBe(token("w"));
  });

  it("a lost permit (store cut off through a proxy) stops CMD and exits with the lost code", async () => {
    const proxied = await proxyHosts(url);
    try {
      const holder = run([
        "lock",
        name(),
        "--permits",
        "3",
        "--backend",
        proxied.url,
        "--ttl",
        "2000", // the shortest TTL every backend takes: etcd leases are whole seconds, at least 2 s
        "--grace",
        "500",
        "--",
        ...HOLD_UNTIL_TERM,
      ]);
      await until(() => holder.output().includes("holding"), 30_000, "the run to hold");
      for (const proxy of proxied.proxies) proxy.blackhole();
      expect(await holder.exited).toBe(EXIT.lost);
      expect(holder.output()).toContain("got-term");
    } finally {
      await proxied.close();
    }
  });

  it("a bad flag combination is a usage error, and CMD does not run", async () => {
    const r = run([
      "lock",
      name(),
      "--permits",
      "2",
      "--read",
      "--backend",
      url,
      "--",
      "echo",
      "ran",
    ]);
    expect(await r.exited).toBe(EXIT.usage);
    expect(r.output()).toContain("--permits and --read exclude each other");
    expect(r.output()).not.toMatch(/^ran$/m);
  });
};

/** Backends of the CLI's own process tests whose guarantees declare semaphores. */
const WITH_SEMAPHORES: readonly BackendKind[] = ["redis", "postgres", "zookeeper", "etcd"];
for (const kind of WITH_SEMAPHORES) describeBackend(kind, permitsSuite);

describeBackend("redlock", (url) => {
  it("--permits, --read and --write on a backend without semaphores are a usage error", async () => {
    for (const kind of [["--permits", "2"], ["--read"], ["--write"]]) {
      const r = baton(["lock", "x", ...kind, "--backend", url, "--", "echo", "ran"]);
      expect(await r.exited, kind.join(" ")).toBe(EXIT.usage);
      expect(r.output()).toContain("has no semaphores or read-write locks");
      expect(r.output()).not.toMatch(/^ran$/m);
    }
  });
});
