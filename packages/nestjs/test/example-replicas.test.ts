import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { describeBackend } from "@baton/conformance/harness";
import { afterEach, expect, it } from "vitest";

/**
 * The example application (examples/nestjs), three replicas, each its own Node process with
 * Nest's HTTP server and @nestjs/schedule, on a per-second cron against a real store: every
 * tick runs once, a replica killed inside a run has its tick taken over, the `@Leader` worker
 * runs in one process at a time and moves when its leader is killed, and `@WithLock`
 * serialises HTTP requests for one counter across the replicas.
 */

const EXAMPLE = join(dirname(fileURLToPath(import.meta.url)), "../../../examples/nestjs");
const REPLICAS = 3;

interface Event {
  readonly event: string;
  readonly pid: number;
  readonly at: number;
  readonly slot?: string;
  readonly token?: string;
  readonly term?: string;
  readonly url?: string;
}

class Replica {
  readonly #child: ChildProcess;
  #stderr = "";
  url = "";
  readonly ready: Promise<void>;
  readonly exited: Promise<void>;
  killedAt: number | undefined;

  constructor(env: Record<string, string>, onEvent: (e: Event) => void) {
    // Run from the example's folder: tsx reads its tsconfig (experimentalDecorators) there.
    this.#child = spawn(
      process.execPath,
      ["--conditions=@baton/source", "--import", "tsx", "src/main.ts"],
      {
        cwd: EXAMPLE,
        env: { ...process.env, ...env, PORT: "0", NO_COLOR: "1" },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    this.#child.stderr?.setEncoding("utf8");
    this.#child.stderr?.on("data", (chunk: string) => {
      this.#stderr = (this.#stderr + chunk).slice(-4_000);
    });
    this.exited = new Promise((resolve) => this.#child.once("exit", () => resolve()));
    this.ready = new Promise((resolve, reject) => {
      this.#child.once("exit", (code, signal) =>
        reject(new Error(`replica exited (${code ?? signal}): ${this.#stderr}`)),
      );
      let buffer = "";
      this.#child.stdout?.setEncoding("utf8");
      this.#child.stdout?.on("data", (chunk: string) => {
        buffer += chunk;
        for (let at = buffer.indexOf("\n"); at >= 0; at = buffer.indexOf("\n")) {
          const line = buffer.slice(0, at);
          buffer = buffer.slice(at + 1);
          if (!line.startsWith("{")) continue;
          const e = JSON.parse(line) as Event;
          if (e.event === "ready") {
            this.url = e.url ?? "";
            resolve();
          }
          onEvent(e);
        }
      });
    });
  }

  get pid(): number {
    return this.#child.pid ?? -1;
  }

  get stderr(): string {
    return this.#stderr;
  }

  get alive(): boolean {
    return this.#child.exitCode === null && this.#child.signalCode === null;
  }

  async kill(signal: NodeJS.Signals = "SIGKILL"): Promise<void> {
    if (!this.alive) return;
    if (signal === "SIGKILL") this.killedAt = Date.now();
    this.#child.kill(signal);
    await this.exited;
  }
}

const live: Replica[] = [];
afterEach(async () => {
  await Promise.allSettled(live.splice(0).map((r) => r.kill()));
});

async function waitFor<T>(what: string, check: () => T | undefined, ms = 30_000): Promise<T> {
  const until = performance.now() + ms;
  for (;;) {
    const value = check();
    if (value !== undefined && value !== false) return value;
    if (performance.now() > until) throw new Error(`timed out waiting for ${what}`);
    await delay(25);
  }
}

async function replicasOn(kind: string, url: string, ttlMs: number): Promise<void> {
  const events: Event[] = [];
  const countersDir = mkdtempSync(join(tmpdir(), "baton-nest-counters-"));
  const env = {
    BATON_URL: url,
    BATON_TTL_MS: String(ttlMs),
    REPORT_CRON: "* * * * * *",
    REPORT_MS: "400",
    COUNTERS_DIR: countersDir,
  };
  const replicas = Array.from({ length: REPLICAS }, () => new Replica(env, (e) => events.push(e)));
  live.push(...replicas);
  try {
    await Promise.all(replicas.map((r) => r.ready));
    const byPid = (pid: number) => replicas.find((r) => r.pid === pid);
    const since = (at: number, name: string) =>
      events.filter((e) => e.at >= at && e.event === name);

    // @WithLock through Nest's HTTP server: 30 concurrent increments of one counter, spread
    // over the replicas, each a read-modify-write of a shared file.
    const counter = `c-${kind}`;
    const replies = await Promise.all(
      Array.from({ length: 30 }, async (_, i) => {
        const replica = replicas[i % REPLICAS] as Replica;
        const response = await fetch(`${replica.url}/counters/${counter}/increment`, {
          method: "POST",
        });
        expect(response.status).toBe(201);
        return (await response.json()) as { value: number; token: string };
      }),
    );
    // No update lost: the values are 1 to 30, each once, in the order of the lock's tokens.
    const byToken = [...replies].sort((a, b) => (BigInt(a.token) < BigInt(b.token) ? -1 : 1));
    expect(byToken.map((r) => r.value)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));

    // A leader, and slots running.
    const firstLeader = await waitFor("a leader", () => since(0, "leader-started")[0]);
    await waitFor("2 reports", () => since(0, "report-written").length >= 2 || undefined);

    // Kill a replica that is not the leader inside a run: its slot is taken over.
    const started = Date.now();
    const victimRun = await waitFor("a run on a follower", () =>
      since(started, "report-started").find((e) => e.pid !== firstLeader.pid),
    );
    const victim = byPid(victimRun.pid) as Replica;
    await victim.kill();
    const takeover = await waitFor(
      `the takeover of slot ${victimRun.slot}`,
      () =>
        events.find(
          (e) => e.event === "report-written" && e.slot === victimRun.slot && e.pid !== victim.pid,
        ),
      8 * ttlMs + 10_000,
    );
    expect(BigInt(takeover.token ?? 0) > BigInt(victimRun.token ?? 0)).toBe(true);

    // Kill the leader: the worker moves to the last replica.
    const leader = byPid(firstLeader.pid) as Replica;
    await leader.kill();
    const next = await waitFor(
      "the next leader",
      () => events.find((e) => e.event === "leader-started" && e.at > (leader.killedAt ?? 0)),
      4 * ttlMs + 10_000,
    );
    const movedMs = next.at - (leader.killedAt ?? 0);
    expect(BigInt(next.term ?? 0) > BigInt(firstLeader.term ?? 0)).toBe(true);

    // Two more ticks on the last replica, then it stops as a deploy stops it: SIGTERM.
    const afterMove = Date.now();
    await waitFor("2 more reports", () =>
      since(afterMove, "report-written").length >= 2 ? true : undefined,
    );
    const last = replicas.find((r) => r.alive) as Replica;
    await last.kill("SIGTERM");
    const endedAt = Date.now();

    // Every tick from the first report to the last ran to its write exactly once, except a
    // slot whose first writer was killed before its outcome was recorded.
    const written = events.filter((e) => e.event === "report-written");
    const slots = written.map((e) => Date.parse(e.slot ?? "") / 1_000);
    const first = Math.min(...slots);
    const lastSlot = Math.max(...slots);
    const missing: string[] = [];
    const twice: string[] = [];
    for (let s = first; s <= lastSlot; s++) {
      const slot = new Date(s * 1_000).toISOString().replace(".000Z", "Z");
      const writes = written.filter((e) => e.slot === slot);
      if (writes.length === 0) missing.push(slot);
      const crashed = writes[0] !== undefined && byPid(writes[0].pid)?.killedAt !== undefined;
      if (writes.length > 1 && !crashed) twice.push(slot);
    }
    // The leader's terms never overlapped: each ended (stopped, or its process killed)
    // before the next began.
    const terms = events
      .filter((e) => e.event === "leader-started")
      .map((e) => {
        const stop = events.find((x) => x.event === "leader-stopped" && x.term === e.term);
        return { start: e.at, end: stop?.at ?? byPid(e.pid)?.killedAt ?? endedAt };
      })
      .sort((a, b) => a.start - b.start);
    const overlapping = terms.filter((t, i) => i > 0 && t.start < (terms[i - 1]?.end ?? 0));
    console.info(
      `[baton nestjs example] ${kind}: ${lastSlot - first + 1} ticks, ${written.length} writes, ` +
        `${missing.length} missing, ${twice.length} twice; slot ${victimRun.slot} taken over ` +
        `${takeover.at - (victim.killedAt ?? 0)} ms after its runner was killed; ` +
        `leader moved ${movedMs} ms after its process was killed (TTL ${ttlMs} ms); ` +
        `${terms.length} terms`,
    );
    expect(missing).toEqual([]);
    expect(twice).toEqual([]);
    expect(overlapping).toEqual([]);
    expect(terms.length).toBeGreaterThanOrEqual(2);
    // Within a TTL of the kill, plus the time a loaded machine takes to notice and campaign.
    expect(movedMs).toBeLessThan(ttlMs + 3_000);
    // SIGTERM closed the application: its leader stepped down before the process exited.
    expect(events.some((e) => e.event === "leader-stopped" && e.pid === last.pid)).toBe(true);
  } finally {
    rmSync(countersDir, { recursive: true, force: true });
  }
}

const NAME =
  "three replicas of the example app: each tick once, takeovers, one leader, serialised requests";

describeBackend("redis", (url) => {
  it(NAME, () => replicasOn("redis", url, 1_500), 90_000);
});

describeBackend("postgres", (url) => {
  it(NAME, () => replicasOn("postgres", url, 1_500), 90_000);
});

describeBackend("etcd", (url) => {
  // etcd leases are whole seconds.
  it(NAME, () => replicasOn("etcd", url, 2_000), 90_000);
});
