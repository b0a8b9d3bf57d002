import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EXIT } from "../src/exit-codes.js";
import { until } from "./cli-helpers.js";
import { linesOf } from "./support/lines-of.js";
import { runMain } from "./support/run-main.js";
import { useTempDir } from "./support/temp-dir.js";

// `baton run-once` as its replicas run it, in one process: every `memory://NAME` of a process
// shares one store, so two calls of `main` are two replicas. CMD is a real child process.
describe("baton run-once", () => {
  const dir = useTempDir("baton-run-once-");

  const unique = () => Math.random().toString(36).slice(2, 10);
  /** A fresh store and a log file CMD appends one line per run to. */
  const world = () => {
    const id = unique();
    const log = join(dir(), `${id}.log`);
    writeFileSync(log, "");
    return { backend: `memory://run-once-${id}`, log, lines: () => linesOf(log) };
  };
  const record = (log: string) =>
    `echo "$BATON_JOB $BATON_SLOT attempt=$BATON_ATTEMPT token=$BATON_FENCING_TOKEN" >> ${log}`;

  it("two replicas for the same slot: one runs CMD, the other waits and exits with the done code", async () => {
    const { backend, log, lines } = world();
    const cmd = ["sh", "-c", `${record(log)}; sleep 0.3`];
    const args = ["run-once", "invoices", "2026-12-01", "--backend", backend, "--wait", "20000"];
    const [a, b] = await Promise.all([
      runMain([...args, "--", ...cmd]),
      runMain([...args, "--", ...cmd]),
    ]);
    expect([a.code, b.code].sort((x, y) => x - y)).toEqual([0, EXIT.alreadyDone]);
    expect(lines()).toHaveLength(1);
    expect(lines()[0]).toMatch(/^invoices 2026-12-01 attempt=1 token=\d+$/);
    const skipped = a.code === 0 ? b : a;
    expect(skipped.err).toContain('job "invoices" slot "2026-12-01": already done');
    // Later calls, long after every lock is gone, find it done too.
    const later = await runMain([...args.slice(0, 5), "--", ...cmd]);
    expect(later.code).toBe(EXIT.alreadyDone);
    expect(lines()).toHaveLength(1);
  });

  it("without --wait, a replica whose slot runs elsewhere exits with the running-elsewhere code", async () => {
    const { backend, log, lines } = world();
    const started = join(dir(), `${unique()}.started`);
    const first = runMain([
      "run-once",
      "report",
      "s1",
      "--backend",
      backend,
      "--",
      "sh",
      "-c",
      `touch ${started}; ${record(log)}; sleep 1`,
    ]);
    await until(() => exists(started), 20_000, "the first CMD to start");
    const second = await runMain(["run-once", "report", "s1", "--backend", backend, "--", "true"]);
    expect(second.code).toBe(EXIT.runningElsewhere);
    expect(second.err).toContain("running elsewhere (held by");
    expect((await first).code).toBe(0);
    expect(lines()).toHaveLength(1);
  });

  it("a failing CMD exits with its own code; the next call retries it as attempt 2, then it is done", async () => {
    const { backend, log, lines } = world();
    const base = ["run-once", "export", "2026-12-01", "--backend", backend, "--"];
    // Fails on its first attempt, succeeds on the next.
    const cmd = ["sh", "-c", `${record(log)}; [ "$BATON_ATTEMPT" -ge 2 ] || exit 3`];
    const failed = await runMain([...base, ...cmd]);
    expect(failed.code).toBe(3);
    expect(failed.err).toContain("failed (attempt 1,");
    expect(failed.err).toContain("2 attempts left");
    expect(failed.err).toContain("exited with code 3");
    const retried = await runMain([...base, ...cmd]);
    expect(retried.code).toBe(0);
    const done = await runMain([...base, ...cmd]);
    expect(done.code).toBe(EXIT.alreadyDone);
    const runs = lines();
    expect(runs.map((l) => l.split(" ")[2])).toEqual(["attempt=1", "attempt=2"]);
    // Each attempt ran under its own lock: the retry's token is greater.
    const [t1, t2] = runs.map((l) => BigInt(l.split("token=")[1] as string));
    expect(t2 as bigint).toBeGreaterThan(t1 as bigint);
  });

  it("after --max-attempts failures the slot is not run again: the attempts-exhausted code", async () => {
    const { backend, log, lines } = world();
    const base = ["run-once", "sync", "s", "--backend", backend, "--max-attempts", "2", "--"];
    const cmd = ["sh", "-c", `${record(log)}; exit 1`];
    expect((await runMain([...base, ...cmd])).code).toBe(1);
    expect((await runMain([...base, ...cmd])).code).toBe(1);
    const exhausted = await runMain([...base, ...cmd]);
    expect(exhausted.code).toBe(EXIT.attemptsExhausted);
    expect(exhausted.err).toContain(
      "attempts exhausted (2 failed; the last: sh exited with code 1)",
    );
    expect(lines()).toHaveLength(2);
  });

  it("CMD past --at-most gets SIGTERM, the attempt is recorded failed and baton exits with the overran code", async () => {
    const { backend, log, lines } = world();
    const script = `${record(log)}; trap 'echo got-term >> ${log}; exit 0' TERM; while true; do sleep 0.05; done`;
    const base = ["run-once", "slow", "s", "--backend", backend];
    const over = await runMain([
      ...base,
      "--at-most",
      "300",
      "--grace",
      "5000",
      "--",
      "sh",
      "-c",
      script,
    ]);
    expect(over.code).toBe(EXIT.overran);
    expect(over.err).toContain("ran past --at-most 300 ms");
    // CMD exited 0 on SIGTERM, yet the slot is not done: the next call runs attempt 2.
    expect(lines()).toEqual([expect.stringContaining("attempt=1"), "got-term"]);
    expect((await runMain([...base, "--", "sh", "-c", record(log)])).code).toBe(0);
    expect(lines()[2]).toContain("attempt=2");
  });

  it("an unreachable store is the unavailable code, and CMD does not run", async () => {
    const { log, lines } = world();
    const r = await runMain([
      "run-once",
      "job",
      "s",
      "--backend",
      "redis://127.0.0.1:1",
      "--ttl",
      "1000",
      "--",
      "sh",
      "-c",
      record(log),
    ]);
    expect(r.code).toBe(EXIT.unavailable);
    expect(r.err).toContain("127.0.0.1:1");
    expect(lines()).toEqual([]);
  });

  it("bad usage is exit 64 with a message naming what is wrong", async () => {
    const backend = `memory://run-once-${unique()}`;
    const cases: [string[], string][] = [
      [["run-once", "job", "--backend", backend, "--", "true"], "missing SLOT"],
      [["run-once", "--backend", backend, "--", "true"], "missing JOB and SLOT"],
      [["run-once", "job", "slot", "--backend", backend], "missing CMD"],
      [
        ["run-once", "job", "slot", "--backend", backend, "--max-attempts", "0", "--", "true"],
        "--max-attempts",
      ],
      [
        ["run-once", "job", "slot", "--backend", backend, "--at-most", "soon", "--", "true"],
        "--at-most",
      ],
      [["run-once", "job", "slot", "--backend", backend, "--wait", "-1", "--", "true"], "--wait"],
      [["run-once", "job", "", "--backend", backend, "--", "true"], "SLOT: must not be empty"],
    ];
    for (const [argv, message] of cases) {
      const r = await runMain(argv);
      expect(r.code, argv.join(" ")).toBe(EXIT.usage);
      expect(r.err, argv.join(" ")).toContain(message);
    }
    const help = await runMain(["run-once", "--help"]);
    expect(help.code).toBe(0);
    expect(help.out).toContain("usage: baton run-once JOB SLOT");
    expect(help.out).toContain(`${EXIT.alreadyDone} already done`);
  });
});

function exists(file: string): boolean {
  try {
    readFileSync(file);
    return true;
  } catch {
    return false;
  }
}
