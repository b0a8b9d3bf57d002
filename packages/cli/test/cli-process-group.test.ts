import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { TcpProxy } from "@baton/conformance/faults";
import { describeBackend } from "@baton/conformance/harness";
import { afterEach, expect, it } from "vitest";
import { EXIT } from "../src/exit-codes.js";
import { type BatonRun, until } from "./cli-helpers.js";
import { useBatonRuns } from "./support/baton-runs.js";
import { useTempDir } from "./support/temp-dir.js";

/** True while process `pid` runs (a zombie, ended but not reaped, does not count). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const stat = `/proc/${pid}/stat`;
  if (!existsSync(stat)) return true;
  try {
    const text = readFileSync(stat, "utf8");
    return !/^[ZX]/.test(text.slice(text.lastIndexOf(")") + 2));
  } catch {
    return false;
  }
}

describeBackend("redis", (url) => {
  const dir = useTempDir("baton-group-");
  const run = useBatonRuns();
  const name = () => `group-${Math.random().toString(36).slice(2, 10)}`;
  const started: number[] = [];
  afterEach(() => {
    // A failing test must not leave its background sleep behind.
    for (const pid of started.splice(0)) {
      if (running(pid)) process.kill(pid, "SIGKILL");
    }
  });

  /**
   * A job that starts a background process and waits for it, as `job.sh` running
   * `sleep 120 & wait` would; `tail` is what it does after the background process started.
   */
  function job(tail = "wait"): { command: string[]; pidFile: string } {
    const pidFile = join(dir(), `${name()}.pid`);
    const script = `sleep 120 & echo $! > ${pidFile}; echo holding; ${tail}`;
    return { command: ["sh", "-c", script], pidFile };
  }

  /** The background process's pid, once the job has written it. */
  async function background(baton: BatonRun, pidFile: string, ends = false): Promise<number> {
    await until(() => baton.output().includes("holding"), 20_000, "the job to start");
    const pid = Number(readFileSync(pidFile, "utf8").trim());
    started.push(pid);
    if (!ends) expect(running(pid)).toBe(true);
    return pid;
  }

  async function gone(pid: number): Promise<void> {
    await until(() => !running(pid), 15_000, `process ${pid} to end`);
  }

  /** Starts `args` against a proxy to the store; `cut()` then makes the lock run out. */
  async function throughProxy(): Promise<{ url: string; cut(): void; close(): Promise<void> }> {
    const port = Number(new URL(url.replace(/^redis:/, "http:")).port);
    const proxy = await TcpProxy.start({ host: "127.0.0.1", port });
    return {
      url: `redis://127.0.0.1:${proxy.port}`,
      cut: () => proxy.blackhole(),
      close: () => proxy.close(),
    };
  }

  it("lock: a lost lock stops the processes CMD started, not only CMD", async () => {
    const proxy = await throughProxy();
    try {
      const { command, pidFile } = job();
      const args = ["lock", name(), "--backend", proxy.url, "--ttl", "1000", "--grace", "500"];
      const holder = run([...args, "--", ...command]);
      const pid = await background(holder, pidFile);
      proxy.cut();
      expect(await holder.exited).toBe(EXIT.lost);
      expect(running(pid)).toBe(false); // gone before baton exits
    } finally {
      await proxy.close();
    }
  });

  it("lock: SIGTERM to baton ends the processes CMD started before the lock is released", async () => {
    const { command, pidFile } = job();
    const holder = run(["lock", name(), "--backend", url, "--", ...command]);
    const pid = await background(holder, pidFile);
    holder.child.kill("SIGTERM");
    expect(await holder.exited).toBe(143);
    expect(running(pid)).toBe(false);
  });

  it("lock: SIGKILL of baton kills the processes CMD started", async () => {
    const { command, pidFile } = job();
    const holder = run(["lock", name(), "--backend", url, "--", ...command]);
    const pid = await background(holder, pidFile);
    holder.child.kill("SIGKILL");
    await holder.exited;
    await gone(pid);
  });

  it("lock: what CMD leaves running when it ends is stopped before the lock is released", async () => {
    const { command, pidFile } = job("exit 0");
    const holder = run(["lock", name(), "--backend", url, "--grace", "500", "--", ...command]);
    const pid = await background(holder, pidFile, true);
    expect(await holder.exited).toBe(0);
    expect(running(pid)).toBe(false);
  });

  it("elect: a lost term stops the processes CMD started", async () => {
    const proxy = await throughProxy();
    try {
      const { command, pidFile } = job();
      const args = ["elect", name(), "--backend", proxy.url, "--ttl", "1000", "--grace", "500"];
      const leader = run([...args, "--once", "--", ...command]);
      const pid = await background(leader, pidFile);
      proxy.cut();
      expect(await leader.exited).toBe(EXIT.lost);
      expect(running(pid)).toBe(false);
    } finally {
      await proxy.close();
    }
  });

  it("elect: SIGTERM to baton ends the processes CMD started before it resigns", async () => {
    const { command, pidFile } = job();
    const leader = run(["elect", name(), "--backend", url, "--", ...command]);
    const pid = await background(leader, pidFile);
    leader.child.kill("SIGTERM");
    expect(await leader.exited).toBe(143);
    expect(running(pid)).toBe(false);
  });

  it("elect: SIGKILL of baton kills the processes CMD started", async () => {
    const { command, pidFile } = job();
    const leader = run(["elect", name(), "--backend", url, "--", ...command]);
    const pid = await background(leader, pidFile);
    leader.child.kill("SIGKILL");
    await leader.exited;
    await gone(pid);
  });

  it("run-once: SIGKILL of baton kills the processes CMD started", async () => {
    const { command, pidFile } = job();
    const runner = run(["run-once", name(), "slot-1", "--backend", url, "--", ...command]);
    const pid = await background(runner, pidFile);
    runner.child.kill("SIGKILL");
    await runner.exited;
    await gone(pid);
  });

  it("cron: SIGTERM to baton ends the processes CMD started", async () => {
    const { command, pidFile } = job();
    const cron = run(["cron", "* * * * * *", name(), "--backend", url, "--", ...command]);
    const pid = await background(cron, pidFile);
    cron.child.kill("SIGTERM");
    expect(await cron.exited).toBe(0);
    expect(running(pid)).toBe(false);
  });
});
