import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { cronCommand } from "../src/commands/cron.js";
import { EXIT } from "../src/exit-codes.js";
import { main } from "../src/main.js";
import { until } from "./cli-helpers.js";
import { linesOf } from "./support/lines-of.js";
import { useTempDir } from "./support/temp-dir.js";

// `baton cron` as its replicas run it, in one process: every `memory://NAME` of a process
// shares one store, so two calls are two replicas; `stop` stands in for SIGTERM.
describe("baton cron", () => {
  const dir = useTempDir("baton-cron-");
  const unique = () => Math.random().toString(36).slice(2, 10);

  it("two replicas on a per-second cron run each slot once between them, one line per slot each", async () => {
    const id = unique();
    const log = join(dir(), `${id}.log`);
    writeFileSync(log, "");
    const backend = `memory://cron-${id}`;
    const script = `echo "$BATON_SLOT $BATON_ATTEMPT $BATON_FENCING_TOKEN" >> ${log}; sleep 0.2`;
    const argv = ["* * * * * *", "tick", "--backend", backend, "--", "sh", "-c", script];
    const stop = new AbortController();
    const replicas = [0, 1].map(() =>
      capture((out, err) => cronCommand(argv, out, err, stop.signal)),
    );
    const slots = () => linesOf(log).map((l) => l.split(" ")[0] as string);
    await until(() => slots().length >= 3, 20_000, "three slots to run");
    stop.abort();
    const ended = await Promise.all(replicas.map((r) => r.done));
    expect(ended.map((e) => e.code)).toEqual([0, 0]);

    const ran = slots();
    expect(new Set(ran).size).toBe(ran.length); // no slot twice
    for (const slot of ran) expect(slot).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(linesOf(log).every((l) => l.split(" ")[1] === "1")).toBe(true); // first attempts
    // Per slot that ran, one replica printed "ran", and the other at most that it was done:
    // a replica skips the ticks that pass while it waits out the other's run (no catch-up),
    // which on a loaded host can take past the next second. At least once the other learned
    // that a slot was done without running it.
    const lines = ended.flatMap((e) => e.out);
    const seen = `the replicas printed:\n${lines.join("\n")}`;
    let learned = 0;
    for (const slot of ran.slice(0, -1)) {
      const about = lines.filter((l) => l.startsWith(`tick ${slot} `));
      expect(
        about.filter((l) => l.includes(" ran (attempt 1,")),
        seen,
      ).toHaveLength(1);
      const done = about.filter((l) => l.includes(" already done (attempt 1 by"));
      expect(done.length, seen).toBeLessThanOrEqual(1);
      learned += done.length;
      expect(about, seen).toHaveLength(1 + done.length);
    }
    expect(learned, seen).toBeGreaterThan(0);
    expect(ended[0]?.err).toContain('job "tick" on "* * * * * *" (UTC); next slot');
  });

  it("stopping while CMD runs sends it SIGTERM and records the attempt failed; then it exits 0", async () => {
    const id = unique();
    const log = join(dir(), `${id}.log`);
    writeFileSync(log, "");
    const script = `echo "run $BATON_SLOT" >> ${log}; trap 'echo got-term >> ${log}; exit 0' TERM; while true; do sleep 0.05; done`;
    const backend = `memory://cron-${id}`;
    const argv = ["* * * * * *", "long", "--backend", backend, "--grace", "5000"];
    const stop = new AbortController();
    const replica = capture((out, err) =>
      cronCommand([...argv, "--", "sh", "-c", script], out, err, stop.signal),
    );
    await until(() => linesOf(log).length >= 1, 20_000, "CMD to start");
    stop.abort();
    const { code, out } = await replica.done;
    expect(code).toBe(0);
    expect(linesOf(log)).toEqual([expect.stringMatching(/^run /), "got-term"]);
    const slot = (linesOf(log)[0] as string).slice(4);
    expect(out).toEqual([expect.stringMatching(new RegExp(`^long ${slot} failed \\(attempt 1,`))]);
    // Recorded failed, not done: the next call for that slot runs it as attempt 2.
    const retry = await capture((o, e) =>
      main(
        [
          "run-once",
          "long",
          slot,
          "--backend",
          backend,
          "--",
          "sh",
          "-c",
          `echo "attempt $BATON_ATTEMPT" >> ${log}`,
        ],
        o,
        e,
      ),
    ).done;
    expect(retry.code).toBe(0);
    expect(linesOf(log)[2]).toBe("attempt 2");
  });

  it("bad usage is exit 64 with a message naming what is wrong", async () => {
    const backend = `memory://cron-${unique()}`;
    const cases: [string[], string][] = [
      [["cron", "0 2 * * *", "--backend", backend, "--", "true"], "missing JOB"],
      [["cron", "0 2 * * *", "job", "--backend", backend], "missing CMD"],
      [["cron", "0 2 * *", "nightly", "--backend", backend, "--", "true"], "CRON"],
      [["cron", "0 99 * * *", "nightly", "--backend", backend, "--", "true"], "CRON"],
      [
        [
          "cron",
          "0 2 * * *",
          "nightly",
          "--backend",
          backend,
          "--timezone",
          "Mars/Base",
          "--",
          "true",
        ],
        "--timezone",
      ],
      [
        ["cron", "0 2 * * *", "nightly", "--backend", backend, "--catch-up", "x", "--", "true"],
        "--catch-up",
      ],
    ];
    for (const [argv, message] of cases) {
      const r = await capture((out, err) => main(argv, out, err)).done;
      expect(r.code, argv.join(" ")).toBe(EXIT.usage);
      expect(r.err, argv.join(" ")).toContain(message);
    }
    const help = await capture((out, err) => main(["cron", "--help"], out, err)).done;
    expect(help.code).toBe(0);
    expect(help.out.join("\n")).toContain("usage: baton cron CRON JOB");
  });
});

/** Runs a command with its stdout and stderr lines captured. */
function capture(
  command: (out: (s: string) => void, err: (s: string) => void) => Promise<number>,
): { done: Promise<{ code: number; out: string[]; err: string }> } {
  const out: string[] = [];
  const err: string[] = [];
  return {
    done: command(
      (s) => out.push(s),
      (s) => err.push(s),
    ).then((code) => ({ code, out, err: err.join("\n") })),
  };
}
