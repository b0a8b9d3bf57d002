import { type ChildProcess, spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { describeBackend } from "@baton/conformance/harness";
import { afterEach, expect, it } from "vitest";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../../..");
const SCRIPT = join(ROOT, "examples/node-cron/replica.ts");

const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  }
});

/** A replica of the example, started as its README says, and what it printed. */
class Replica {
  readonly child: ChildProcess;
  readonly exit: Promise<number | null>;
  output = "";

  constructor(
    url: string,
    readonly name: string,
  ) {
    this.child = spawn(
      process.execPath,
      ["--conditions=@baton/source", "--import", "tsx", SCRIPT],
      {
        cwd: ROOT,
        env: { ...process.env, BATON_URL: url, REPLICA: name },
      },
    );
    children.push(this.child);
    this.exit = new Promise((resolve) => this.child.once("exit", resolve));
    const collect = (chunk: string) => {
      this.output += chunk;
    };
    this.child.stdout?.setEncoding("utf8").on("data", collect);
    this.child.stderr?.setEncoding("utf8").on("data", collect);
  }
}

describeBackend("redis", (url) => {
  it("examples/node-cron: three replicas run each fire once and stop cleanly on SIGTERM", async () => {
    const replicas = ["a", "b", "c"].map((name) => new Replica(url, name));
    const ranLines = () =>
      replicas.flatMap((r) => [
        ...r.output.matchAll(/^replica (\w) ran (\S+) \(attempt (\d+), token (\d+)\)$/gm),
      ]);
    const deadline = Date.now() + 60_000;
    while (
      (replicas.some((r) => !r.output.includes("scheduled")) || ranLines().length < 5) &&
      Date.now() < deadline
    ) {
      await delay(200);
    }
    for (const r of replicas) r.child.kill("SIGTERM");
    const codes = await Promise.all(replicas.map((r) => r.exit));
    const all = replicas.map((r) => `--- ${r.name}\n${r.output}`).join("\n");
    const slots = ranLines().map((m) => m[2]);
    console.info(
      `[examples/node-cron] ${slots.length} fires run by ${new Set(ranLines().map((m) => m[1])).size} replicas`,
    );
    expect(slots.length, all).toBeGreaterThanOrEqual(5);
    expect(new Set(slots).size, all).toBe(slots.length);
    for (const r of replicas) {
      expect(r.output, all).toMatch(new RegExp(`^replica ${r.name} stopped$`, "m"));
    }
    expect(codes, all).toEqual([0, 0, 0]);
  }, 120_000);
});
