import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { setTimeout as delay } from "node:timers/promises";
import { MemoryFence, StaleTokenError, siblingModuleArgs } from "@baton/core";
import { afterEach, expect, it } from "vitest";
import { type BackendKind, describeBackend } from "../src/harness/index.js";

/**
 * Three replicas schedule one job every second, each in its own process, through a fence
 * kept in this process. Their jobs write through the fence at start and at end; some runs
 * freeze their process (SIGSTOP) between the two writes for one to two TTLs, and replicas
 * are killed (SIGKILL) and started again at random. A slot must never be run to completion
 * (both writes accepted) by two attempts, except in the two cases the documentation names
 * that a pause cannot cause: the earlier attempt's process was killed before its outcome was
 * written (a crash), or the outcome could not be written before its lease ended. A job that
 * froze past its TTL must see its signal aborted on waking: its second write is never made.
 */

const RUNNER_ARGS = siblingModuleArgs(import.meta.url, "./support/slot-runner");
const REPLICAS = 3;
/** How long the replicas run under faults. */
const FAULT_MS = 25_000;
/** The job's time between its two writes. */
const HOLD_MS = 250;
/** The share of runs that freeze between their writes. */
const FREEZE_SHARE = 0.35;

type FenceOp = "raise" | "start" | "end";

/** One decision of the fence: a raise or a job's write, with the slot and token it carried. */
interface FenceEntry {
  readonly op: FenceOp;
  readonly slot: string;
  readonly token: bigint;
  readonly accepted: boolean;
  /** The replica process that asked. */
  readonly runner: string;
  /** The asking attempt had frozen before this request. */
  readonly afterFreeze: boolean;
  /** When the fence decided, ms since the replicas started. */
  readonly at: number;
}

/** What one replica's schedule reported for a slot. */
interface ResultEntry {
  readonly runner: string;
  readonly slot: string;
  readonly outcome: string;
  readonly token?: bigint;
  readonly error?: string;
  /** When it was reported, ms since the replicas started. */
  readonly at: number;
}

/** Everything a run saw, for the checker. */
interface History {
  readonly fence: FenceEntry[];
  readonly results: ResultEntry[];
  /** `runner slot token` of every attempt that froze. */
  readonly froze: Set<string>;
  /** Replica processes killed with SIGKILL. */
  readonly killed: Set<string>;
  /** What the test did to the replicas, with when (ms since the replicas started). */
  readonly faults: string[];
}

/** What {@link checkHistory} found. */
interface Verdict {
  /** Slots with a fence entry. */
  readonly slots: number;
  /** Slots at least one attempt ran to completion. */
  readonly completed: number;
  /** Slots run to completion twice, with no crash to explain it. */
  readonly doubles: string[];
  /**
   * Slots run to completion twice in the cases the documentation names: the earlier
   * attempt's process was killed before it wrote its outcome, or its outcome could not be
   * written before its lease ended (its call resolved `failed`, and it never froze).
   */
  readonly excused: string[];
  /** Job writes the fence rejected (an older token than one it had seen). */
  readonly staleRejected: number;
  /** Job writes made after a freeze past the TTL, and accepted. */
  readonly writesAfterFreeze: string[];
  /** `ran` results whose writes were not both accepted, or whose attempt froze past its TTL. */
  readonly badRan: string[];
}

const key = (runner: string, slot: string, token: bigint) => `${runner} ${slot} ${token}`;

function checkHistory(h: History): Verdict {
  const attempts = new Map<string, Map<bigint, { runner: string; start: boolean; end: boolean }>>();
  for (const e of h.fence) {
    if (e.op === "raise") continue;
    const bySlot = attempts.get(e.slot) ?? new Map();
    attempts.set(e.slot, bySlot);
    const a = bySlot.get(e.token) ?? { runner: e.runner, start: false, end: false };
    bySlot.set(e.token, a);
    if (e.accepted) a[e.op] = true;
  }
  const reported = new Map(h.results.map((r) => [`${r.runner} ${r.slot}`, r]));
  const doubles: string[] = [];
  const excused: string[] = [];
  let completed = 0;
  for (const [slot, bySlot] of attempts) {
    const done = [...bySlot.entries()]
      .filter(([, a]) => a.start && a.end)
      .sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0));
    if (done.length > 0) completed++;
    for (const [token, a] of done.slice(0, -1)) {
      const what = `${slot}: token ${token} (${a.runner}) and token ${done.at(-1)?.[0]} both completed`;
      const result = reported.get(`${a.runner} ${slot}`);
      const crashed = h.killed.has(a.runner) && result === undefined;
      const unwritten =
        result?.outcome === "failed" &&
        result.token === token &&
        !h.froze.has(key(a.runner, slot, token));
      (crashed || unwritten ? excused : doubles).push(what);
    }
  }
  const badRan = h.results
    .filter((r) => r.outcome === "ran" && r.token !== undefined)
    .filter((r) => {
      const a = attempts.get(r.slot)?.get(r.token as bigint);
      return !(a?.start && a.end) || h.froze.has(key(r.runner, r.slot, r.token as bigint));
    })
    .map((r) => `${r.slot} token ${r.token} by ${r.runner}`);
  return {
    slots: new Set(h.fence.map((e) => e.slot)).size,
    completed,
    doubles,
    excused,
    staleRejected: h.fence.filter((e) => e.op !== "raise" && !e.accepted).length,
    writesAfterFreeze: h.fence
      .filter((e) => e.op === "end" && e.accepted && e.afterFreeze)
      .map((e) => `${e.slot} token ${e.token} by ${e.runner}`),
    badRan,
  };
}

/** What the fence decided and the replicas reported for `slot`, in order, for a failure. */
function traceOf(h: History, slot: string): string {
  const fence = h.fence
    .filter((e) => e.slot === slot)
    .map(
      (e) =>
        `${e.at} ${e.runner} ${e.op} ${e.token} ${e.accepted ? "accepted" : "rejected"}${e.afterFreeze ? " after a freeze" : ""}`,
    );
  const results = h.results
    .filter((r) => r.slot === slot)
    .map(
      (r) => `${r.at} ${r.runner} ${r.outcome}${r.error ? ` (${r.error})` : ""} ${r.token ?? ""}`,
    );
  return `slot ${slot}: fence [${fence.join("; ")}]; results [${results.join("; ")}]; faults [${h.faults.join("; ")}]`;
}

/** A replica process and the fence requests it makes. */
class Runner {
  readonly #child: ChildProcess;
  #stderr = "";
  readonly ready: Promise<void>;

  constructor(
    readonly id: string,
    env: Record<string, string>,
    onLine: (runner: Runner, line: Record<string, unknown>) => void,
  ) {
    this.#child = spawn(process.execPath, RUNNER_ARGS, {
      env: { ...process.env, ...env, BATON_OWNER_ID: id },
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.#child.stdin?.on("error", () => undefined);
    this.#child.stderr?.setEncoding("utf8");
    this.#child.stderr?.on("data", (chunk: string) => {
      this.#stderr = (this.#stderr + chunk).slice(-4_000);
    });
    let markReady: () => void = () => undefined;
    let failStart: (error: Error) => void = () => undefined;
    this.ready = new Promise<void>((resolve, reject) => {
      markReady = resolve;
      failStart = reject;
    });
    this.#child.on("exit", (code, signal) => {
      failStart(new Error(`replica ${id} exited (${code ?? signal}): ${this.#stderr}`));
    });
    let buffer = "";
    this.#child.stdout?.setEncoding("utf8");
    this.#child.stdout?.on("data", (chunk: string) => {
      buffer += chunk;
      for (let at = buffer.indexOf("\n"); at >= 0; at = buffer.indexOf("\n")) {
        const line = buffer.slice(0, at);
        buffer = buffer.slice(at + 1);
        if (line.trim() === "") continue;
        const event = JSON.parse(line) as Record<string, unknown>;
        if (event.t === "ready") markReady();
        onLine(this, event);
      }
    });
  }

  get exited(): boolean {
    return this.#child.exitCode !== null || this.#child.signalCode !== null;
  }

  get stderr(): string {
    return this.#stderr;
  }

  answer(message: Record<string, unknown>): void {
    if (!this.exited) this.#child.stdin?.write(`${JSON.stringify(message)}\n`);
  }

  resume(): void {
    if (!this.exited) this.#child.kill("SIGCONT");
  }

  async kill(): Promise<void> {
    if (this.exited) return;
    const exited = new Promise<void>((resolve) => this.#child.once("exit", () => resolve()));
    // No SIGCONT first: a frozen replica must not run again, even for a moment, before it dies.
    this.#child.kill("SIGKILL");
    await exited;
  }
}

const live: Runner[] = [];
afterEach(async () => {
  await Promise.allSettled(live.splice(0).map((r) => r.kill()));
});

const between = (min: number, max: number) => min + Math.random() * (max - min);

async function pausesAndKills(kind: BackendKind, url: string, ttlMs: number, fenced: boolean) {
  const job = `pauses-${randomUUID().slice(0, 8)}`;
  const prefix = `${job}/slot/`;
  const fence = new MemoryFence();
  const history: History = {
    fence: [],
    results: [],
    froze: new Set(),
    killed: new Set(),
    faults: [],
  };
  let startedAt = performance.now();
  const now = () => Math.round(performance.now() - startedAt);
  const decisions: Promise<unknown>[] = [];
  /** `runner slot token` of the attempt each replica runs, once it froze. */
  const frozen = new Set<string>();
  const resumes: NodeJS.Timeout[] = [];
  let freezes = 0;
  let kills = 0;
  const errors: string[] = [];

  const onLine = (runner: Runner, e: Record<string, unknown>) => {
    switch (e.t) {
      case "fence": {
        const resource = String(e.resource);
        const token = BigInt(String(e.token));
        const op = e.op as FenceOp;
        const slot = resource.startsWith(prefix) ? resource.slice(prefix.length) : resource;
        const afterFreeze = frozen.has(key(runner.id, slot, token));
        const record = (accepted: boolean) =>
          history.fence.push({
            op,
            slot,
            token,
            accepted,
            runner: runner.id,
            afterFreeze,
            at: now(),
          });
        decisions.push(
          fence
            .write(resource, token, () => record(true))
            .then(
              () => runner.answer({ id: e.id, ok: true, highest: `${token}` }),
              (error: unknown) => {
                if (!(error instanceof StaleTokenError)) throw error;
                record(false);
                runner.answer({ id: e.id, ok: false, highest: `${error.highest}` });
              },
            ),
        );
        return;
      }
      case "freezing": {
        freezes++;
        const k = key(runner.id, String(e.slot), BigInt(String(e.token)));
        frozen.add(k);
        history.froze.add(k);
        // Frozen for one to two TTLs: past the lease, around when another replica takes over.
        const frozenMs = Math.round(between(ttlMs, 2 * ttlMs));
        history.faults.push(`${now()} ${runner.id} froze in ${e.slot} for ${frozenMs} ms`);
        resumes.push(setTimeout(() => runner.resume(), frozenMs));
        return;
      }
      case "result":
        history.results.push({
          runner: runner.id,
          slot: String(e.slot),
          outcome: String(e.outcome),
          ...(e.token !== undefined ? { token: BigInt(String(e.token)) } : {}),
          ...(e.error !== undefined ? { error: String(e.error) } : {}),
          at: now(),
        });
        return;
      case "error":
        errors.push(`${runner.id}: ${String(e.during)}: ${String(e.message)}`);
        return;
    }
  };

  const env = {
    BATON_URL: url,
    BATON_TTL_MS: String(ttlMs),
    BATON_JOB: job,
    BATON_HOLD_MS: String(HOLD_MS),
    BATON_FREEZE_SHARE: String(FREEZE_SHARE),
    BATON_FENCED: fenced ? "1" : "0",
  };
  const incarnations = Array.from({ length: REPLICAS }, () => 0);
  const start = (replica: number) => {
    const runner = new Runner(`r${replica}.${incarnations[replica]}`, env, onLine);
    incarnations[replica] = (incarnations[replica] ?? 0) + 1;
    live.push(runner);
    return runner;
  };
  const replicas = Array.from({ length: REPLICAS }, (_, i) => start(i));
  await Promise.all(replicas.map((r) => r.ready));
  startedAt = performance.now();

  const until = performance.now() + FAULT_MS;
  while (performance.now() < until) {
    await delay(between(3_000, 6_000));
    if (performance.now() >= until) break;
    const i = Math.floor(Math.random() * REPLICAS);
    const victim = replicas[i] as Runner;
    history.killed.add(victim.id);
    history.faults.push(`${now()} ${victim.id} killed`);
    kills++;
    await victim.kill();
    replicas[i] = start(i);
    await (replicas[i] as Runner).ready;
  }
  for (const r of replicas) history.killed.add(r.id);
  await Promise.all(replicas.map((r) => r.kill()));
  for (const t of resumes) clearTimeout(t);
  await Promise.all(decisions);

  const verdict = checkHistory(history);
  const outcomes = new Map<string, number>();
  for (const r of history.results) {
    const name = r.error ? `${r.outcome}(${r.error})` : r.outcome;
    outcomes.set(name, (outcomes.get(name) ?? 0) + 1);
  }
  console.info(
    `[baton runOnce pauses] ${kind}: ${verdict.slots} slots, ${verdict.completed} completed, ` +
      `${verdict.doubles.length} completed twice, ${verdict.excused.length} twice after a crash or an unwritten outcome, ` +
      `${verdict.staleRejected} stale writes rejected, ${verdict.writesAfterFreeze.length} writes accepted after a freeze, ` +
      `${verdict.badRan.length} bad "ran"; ${freezes} freezes, ${kills} kills; ` +
      `results ${JSON.stringify(Object.fromEntries(outcomes))}` +
      (verdict.doubles.length > 0 ? `\n  ${verdict.doubles.join("\n  ")}` : ""),
  );
  const flagged = [...verdict.doubles, ...verdict.writesAfterFreeze, ...verdict.badRan];
  const slots = [...new Set(flagged.map((f) => f.split(/:? /)[0] as string))];
  const detail = [
    ...slots.map((slot) => traceOf(history, slot)),
    `background errors:\n${errors.slice(0, 20).join("\n")}`,
  ].join("\n");
  expect(verdict.doubles, detail).toEqual([]);
  expect(verdict.writesAfterFreeze, detail).toEqual([]);
  expect(verdict.badRan, detail).toEqual([]);
  // The faults were exercised: slots ran, and jobs froze inside a run.
  expect(verdict.completed, detail).toBeGreaterThanOrEqual(1);
  expect(freezes, detail).toBeGreaterThanOrEqual(1);
}

const TEST_MS = FAULT_MS + 60_000;
const NAME =
  "3 replicas on per-second slots, frozen inside the job and killed at random: no slot completes twice";

describeBackend("etcd", (url) => {
  // etcd leases are whole seconds.
  it(NAME, () => pausesAndKills("etcd", url, 2_000, true), TEST_MS);
});

describeBackend("zookeeper", (url) => {
  it(NAME, () => pausesAndKills("zookeeper", url, 1_500, true), TEST_MS);
});

describeBackend("postgres", (url) => {
  it(NAME, () => pausesAndKills("postgres", url, 1_500, true), TEST_MS);
});

describeBackend("redis", (url) => {
  // Efficiency mode (correctness mode refuses Redis): the job's first write raises the fence.
  it(NAME, () => pausesAndKills("redis", url, 1_500, false), TEST_MS);
});
