import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { type BackendKind, describeBackend } from "@baton/conformance/harness";
import { expect, it } from "vitest";
import { EXIT } from "../src/exit-codes.js";
import { type BatonRun, baton, until } from "./cli-helpers.js";
import { useBatonRuns } from "./support/baton-runs.js";
import { linesOf } from "./support/lines-of.js";
import { useTempDir } from "./support/temp-dir.js";

// `baton run-once` and `baton cron` as separate processes (replicas) sharing a real store.
// Each backend whose adapter keeps job records is listed here and runs them all.
const WITH_RECORDS: readonly BackendKind[] = ["redis", "etcd", "zookeeper", "postgres"];

for (const kind of WITH_RECORDS) {
  describeBackend(kind, (url) => {
    const dir = useTempDir("baton-run-once-");
    const run = useBatonRuns();
    const unique = () => `cli-${Math.random().toString(36).slice(2, 10)}`;
    const logFile = () => {
      const log = join(dir(), `${unique()}.log`);
      writeFileSync(log, "");
      return log;
    };
    // etcd leases are whole seconds, at least 2.
    const ttl = ["--ttl", "2000"];
    const record = (log: string) =>
      `echo "$BATON_SLOT $BATON_ATTEMPT $BATON_FENCING_TOKEN" >> ${log}`;

    it("two run-once processes for one slot: one runs CMD, the other exits with the done code", async () => {
      const job = unique();
      const log = logFile();
      const args = ["run-once", job, "2026-12-01", "--backend", url, ...ttl, "--wait", "30000"];
      const cmd = ["--", "sh", "-c", `${record(log)}; sleep 0.5`];
      const [a, b] = [run([...args, ...cmd]), run([...args, ...cmd])];
      const codes = [await a.exited, await b.exited].sort((x, y) => x - y);
      expect(codes).toEqual([0, EXIT.alreadyDone]);
      expect(linesOf(log)).toHaveLength(1);
      expect(linesOf(log)[0]).toMatch(/^2026-12-01 1 \d+$/);
    }, 60_000);

    it("a failing CMD exits with its code; the next run-once retries it as attempt 2", async () => {
      const job = unique();
      const log = logFile();
      const args = ["run-once", job, "s", "--backend", url, ...ttl, "--"];
      const cmd = ["sh", "-c", `${record(log)}; [ "$BATON_ATTEMPT" -ge 2 ] || exit 7`];
      expect(await run([...args, ...cmd]).exited).toBe(7);
      expect(await run([...args, ...cmd]).exited).toBe(0);
      expect(await run([...args, ...cmd]).exited).toBe(EXIT.alreadyDone);
      const attempts = linesOf(log).map((l) => l.split(" ")[1]);
      expect(attempts).toEqual(["1", "2"]);
    }, 60_000);

    it("a replica killed mid-run: the next run-once takes the slot over as attempt 2", async () => {
      const job = unique();
      const log = logFile();
      const args = ["run-once", job, "s", "--backend", url, ...ttl];
      const first = run([...args, "--", "sh", "-c", `${record(log)}; sleep 60`]);
      await until(() => linesOf(log).length === 1, 20_000, "the first attempt to start");
      first.child.kill("SIGKILL"); // baton and, through its death signal, CMD
      await first.exited;
      const second = run([...args, "--wait", "30000", "--", "sh", "-c", record(log)]);
      expect(await second.exited).toBe(0);
      expect(linesOf(log).map((l) => l.split(" ")[1])).toEqual(["1", "2"]);
    }, 60_000);

    it("two cron processes on a per-second cron run each slot once between them; SIGTERM stops both", async () => {
      const job = unique();
      const log = logFile();
      const args = ["cron", "* * * * * *", job, "--backend", url, ...ttl];
      const cmd = ["--", "sh", "-c", `${record(log)}; sleep 0.2`];
      const replicas = [run([...args, ...cmd]), run([...args, ...cmd])];
      await until(() => linesOf(log).length >= 4, 40_000, "four slots to run");
      for (const r of replicas) r.child.kill("SIGTERM");
      expect(await Promise.all(replicas.map((r) => r.exited))).toEqual([0, 0]);
      const slots = linesOf(log).map((l) => l.split(" ")[0]);
      expect(new Set(slots).size).toBe(slots.length);
      // Each slot shows one "ran" line across both replicas (the last one may have been
      // stopped by the SIGTERM instead).
      const output = replicas.map((r) => r.output()).join("\n");
      const ran = (slot: string | undefined) => output.split(`${job} ${slot} ran (`).length - 1;
      for (const slot of slots.slice(0, -1)) expect(ran(slot)).toBe(1);
      expect(ran(slots.at(-1))).toBeLessThanOrEqual(1);
    }, 60_000);

    it("a cron replica killed mid-run: the other replica takes the slot over as attempt 2", async () => {
      const job = unique();
      const log = logFile();
      // One tick, a few seconds from now; a replica that starts after it still runs it
      // (--catch-up), so both address this slot whatever their start-up takes.
      const tick = new Date(Math.ceil((Date.now() + 3_000) / 1_000) * 1_000);
      const cron = [tick.getUTCSeconds(), tick.getUTCMinutes(), tick.getUTCHours()].join(" ");
      const expression = `${cron} ${tick.getUTCDate()} ${tick.getUTCMonth() + 1} *`;
      const args = ["cron", expression, job, "--backend", url, ...ttl, "--catch-up", "60000"];
      // The first attempt hangs; the retry ends at once. $PPID is the baton process.
      const script = `echo "$BATON_SLOT $BATON_ATTEMPT $PPID" >> ${log}; [ "$BATON_ATTEMPT" -ge 2 ] || sleep 60`;
      const replicas = [0, 1].map(() => run([...args, "--", "sh", "-c", script]));
      await until(() => linesOf(log).length >= 1, 30_000, "the first attempt to start");
      const [slot, attempt, pid] = (linesOf(log)[0] as string).split(" ");
      expect(slot).toBe(tick.toISOString().replace(".000Z", "Z"));
      expect(attempt).toBe("1");
      const first = replicas.find((r) => `${r.child.pid}` === pid) as BatonRun;
      const other = replicas.find((r) => r !== first) as BatonRun;
      expect(first).toBeDefined();
      // The other replica is up: it takes the slot up at its tick, or at start (--catch-up).
      await until(() => other.output().includes("next slot"), 30_000, "the other replica to start");
      first.child.kill("SIGKILL"); // baton, and CMD through its death signal
      await until(
        () => other.output().includes(`${job} ${slot} ran (attempt 2,`),
        30_000,
        "the other replica to run the slot as attempt 2",
      );
      expect(linesOf(log).map((l) => l.split(" ").slice(0, 2).join(" "))).toEqual([
        `${slot} 1`,
        `${slot} 2`,
      ]);
    }, 90_000);
  });
}

describeBackend("redlock", (url) => {
  it("run-once and cron on redlock:// are usage errors: it keeps no records", async () => {
    const once = baton(["run-once", "job", "s", "--backend", url, "--", "true"]);
    expect(await once.exited).toBe(EXIT.usage);
    expect(once.output()).toContain("--backend: the redlock backend keeps no durable records");
    const cron = baton(["cron", "* * * * * *", "job", "--backend", url, "--", "true"]);
    expect(await cron.exited).toBe(EXIT.usage);
    expect(cron.output()).toContain("--backend: the redlock backend keeps no durable records");
  }, 30_000);
});
