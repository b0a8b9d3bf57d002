/**
 * A lock holder in its own process, for fault tests: SIGSTOP/SIGCONT/SIGKILL hit the process
 * that holds the connection. Spawn it with {@link spawnLockWorker}; it reads JSON commands on
 * stdin and writes JSON events on stdout, one per line.
 *
 * Environment: `BATON_URL` (backend URL), `BATON_TTL_MS`, optional `BATON_OWNER_ID`.
 */
import { createInterface } from "node:readline";
import {
  type Coordinator,
  createCoordinator,
  type Election,
  enablePrometheus,
  installStepDown,
  type Lock,
  type Partitions,
  type Permit,
  type RunContext,
  type RunOnceResult,
  type Schedule,
} from "@baton/core";
import { recordedToken } from "../history/recorded-token.js";
import type { TickCheck, WorkerCommand, WorkerEvent } from "./worker-protocol.js";

const url = process.env.BATON_URL;
const ttlMs = Number(process.env.BATON_TTL_MS ?? "5000");
if (url === undefined) throw new Error("lock-worker: BATON_URL is not set");

const coordinator: Coordinator = createCoordinator({
  url,
  ttlMs,
  ...(process.env.BATON_OWNER_ID ? { ownerId: process.env.BATON_OWNER_ID } : {}),
});
const locks = new Map<string, Lock>();
/** Permits held here, by hold id. */
const permits = new Map<string, Permit>();
const elections = new Map<string, Election>();
const partitionSets = new Map<string, Partitions>();
/** The worker's own prom-client registry, once `enable-metrics` ran. */
let metricsRegistry: { metrics(): Promise<string> } | undefined;
if (process.env.BATON_STEP_DOWN === "1") installStepDown();
const tickers = new Map<string, NodeJS.Timeout>();
const schedules = new Map<string, Schedule>();

/**
 * What a write is guarded by: a lock, or an election's current term. Reading `held` checks
 * the local deadline on the spot (see Lock.held).
 */
function guard(name: string): { held: boolean; token: bigint } | undefined {
  const lock = locks.get(name);
  if (lock !== undefined) return { held: lock.held, token: recordedToken(lock) };
  const election = elections.get(name);
  if (election === undefined) return undefined;
  const held = election.isLeader;
  return { held, token: election.term ?? 0n };
}

/**
 * Asks, the way `check` says, whether a write under `name` must not start: undefined when it
 * may, else the loss reason the check told ("" when it told none).
 */
function refuses(name: string, check: TickCheck = "held"): string | undefined {
  const lock = locks.get(name);
  if (lock === undefined) return check === "held" && guard(name)?.held ? undefined : "";
  try {
    switch (check) {
      case "held":
        return lock.held ? undefined : (lock.lostReason ?? "unknown");
      case "throwIfLost":
        lock.throwIfLost();
        return undefined;
      case "aborted":
        return lock.signal.aborted ? lossReason(lock.signal.reason) : undefined;
      case "throwIfAborted":
        lock.signal.throwIfAborted();
        return undefined;
    }
  } catch (error) {
    return lossReason(error);
  }
}

/** The token a write under `name` carries: the lock's, or the election's term. */
function tokenOf(name: string): bigint {
  const lock = locks.get(name);
  return lock !== undefined ? recordedToken(lock) : (elections.get(name)?.term ?? 0n);
}

function lossReason(error: unknown): string {
  return (error as { reason?: string } | undefined)?.reason ?? "unknown";
}

/**
 * The job `run-once` and `schedule` run: it sleeps `holdMs` without looking at its signal (as
 * a job paused between its check and its write would), then writes with its token. The
 * write is an event: the runner passes it through its fence and counts what was accepted.
 */
function holdingJob(holdMs: number): (context: RunContext) => Promise<string> {
  reportBackgroundErrors();
  return async ({ job, slot, attempt, token }) => {
    emit({ event: "job-started", job, slot, attempt, token: `${token}` });
    await new Promise((resolve) => setTimeout(resolve, holdMs));
    emit({ event: "job-wrote", job, slot, attempt, token: `${token}` });
    return coordinator.ownerId;
  };
}

let reportingBackgroundErrors = false;

/** Once a job runs here: its background failures (a schedule's store errors) as `error` events. */
function reportBackgroundErrors(): void {
  if (reportingBackgroundErrors) return;
  reportingBackgroundErrors = true;
  coordinator.on("backgroundError", ({ error, during }) => emit(errorEvent(during, error)));
}

function jobResult(job: string, slot: string, result: RunOnceResult<unknown>): WorkerEvent {
  const base = { event: "job-result", job, slot, outcome: result.outcome } as const;
  switch (result.outcome) {
    case "ran":
      return { ...base, attempt: result.attempt, token: `${result.token}` };
    case "failed": {
      const error = (result.error as { name?: string } | undefined)?.name ?? "Error";
      return { ...base, attempt: result.attempt, token: `${result.token}`, error };
    }
    case "already-done":
    case "attempts-exhausted":
      return {
        ...base,
        attempt: result.record.attempt,
        token: `${result.record.token}`,
        holder: result.record.holder,
      };
    case "running-elsewhere":
      return { ...base, ...(result.holder ? { holder: result.holder.ownerId } : {}) };
  }
}

function emit(event: WorkerEvent): void {
  process.stdout.write(`${JSON.stringify(event)}\n`);
}

function errorEvent(op: string, error: unknown, hold?: string): WorkerEvent {
  const e = error as { code?: string; message?: string; name?: string };
  return {
    event: "error",
    op,
    code: e.code ?? e.name ?? "Error",
    message: e.message ?? String(error),
    ...(hold !== undefined ? { hold } : {}),
  };
}

/** Takes the permits `command` asks for: a semaphore's, a read lock or the write lock. */
function takePermits(command: Extract<WorkerCommand, { op: "acquire-permits" }>): Promise<Permit> {
  const options = { waitMs: command.waitMs ?? 30_000 };
  switch (command.mode) {
    case "permit":
      return coordinator
        .semaphore(command.name, { permits: command.limit ?? 1 })
        .acquire({ ...options, permits: command.permits ?? 1 });
    case "read":
      return coordinator.readWriteLock(command.name).read(options);
    case "write":
      return coordinator.readWriteLock(command.name).write(options);
  }
}

async function handle(command: WorkerCommand): Promise<void> {
  switch (command.op) {
    case "acquire": {
      const lock = await coordinator.acquire(command.name, {
        waitMs: command.waitMs ?? 30_000,
        ...(command.value !== undefined ? { value: command.value } : {}),
      });
      locks.set(command.name, lock);
      lock.signal.addEventListener("abort", () => {
        const why = lock.signal.reason as { reason?: string; detail?: string };
        const reason = why.reason ?? "unknown";
        if (reason !== "released")
          emit({
            event: "lost",
            name: command.name,
            token: `${recordedToken(lock)}`,
            reason,
            ...(why.detail !== undefined ? { detail: why.detail } : {}),
          });
      });
      emit({ event: "acquired", name: command.name, token: `${recordedToken(lock)}` });
      return;
    }
    case "acquire-permits": {
      const { name, hold } = command;
      const permit = await takePermits(command).catch((error: unknown) => {
        emit(errorEvent(command.op, error, hold));
        return undefined;
      });
      if (permit === undefined) return;
      permits.set(hold, permit);
      const token = `${recordedToken(permit)}`;
      permit.signal.addEventListener("abort", () => {
        const reason = (permit.signal.reason as { reason?: string }).reason ?? "unknown";
        if (reason !== "released") emit({ event: "permits-lost", name, hold, token, reason });
      });
      emit({ event: "permits-acquired", name, hold, mode: permit.mode, token });
      return;
    }
    case "release-permits": {
      const permit = permits.get(command.hold);
      const wasHeld = (await permit?.release()) ?? false;
      permits.delete(command.hold);
      emit({ event: "permits-released", name: permit?.name ?? "", hold: command.hold, wasHeld });
      return;
    }
    case "release": {
      const lock = locks.get(command.name);
      const wasHeld = (await lock?.release()) ?? false;
      locks.delete(command.name);
      emit({ event: "released", name: command.name, wasHeld });
      return;
    }
    case "held": {
      emit({ event: "held", name: command.name, held: locks.get(command.name)?.held ?? false });
      return;
    }
    case "write": {
      // A write guarded the way users are told to: check the lock right before writing.
      // `unchecked` skips the check: a user who does not look (the fence is then all there is).
      const g = guard(command.name);
      if (g === undefined || (!command.unchecked && !g.held)) {
        emit({ event: "refused", name: command.name });
        return;
      }
      emit({ event: "wrote", name: command.name, token: `${g.token}`, seq: command.seq ?? 0 });
      return;
    }
    case "tick": {
      // Writes every `everyMs` while the lock (or leadership) is held; stops once it is not.
      // With `unchecked`, writes on regardless (until the worker exits).
      let seq = 0;
      const step = () => {
        // The loop's first look at the lock on waking is its own check, nothing else.
        const checkedAt = process.hrtime.bigint();
        const refusal = command.unchecked
          ? guard(command.name) === undefined
            ? ""
            : undefined
          : refuses(command.name, command.check);
        if (refusal !== undefined) {
          emit({ event: "refused", name: command.name, ...(refusal ? { reason: refusal } : {}) });
          tickers.delete(command.name);
          return;
        }
        emit({
          event: "wrote",
          name: command.name,
          token: `${tokenOf(command.name)}`,
          seq: seq++,
          checkedAt: `${checkedAt}`,
        });
        tickers.set(command.name, setTimeout(step, command.everyMs));
      };
      step();
      return;
    }
    case "elect": {
      const name = command.name;
      const election = coordinator.elect(name, {
        ...(command.value !== undefined ? { value: command.value } : {}),
        onElected: ({ term }) => {
          emit({ event: "elected", name, term: `${term}` });
        },
        onRevoked: ({ term, reason }) => {
          emit({ event: "revoked", name, term: `${term}`, reason });
        },
      });
      elections.set(name, election);
      return;
    }
    case "resign": {
      await elections.get(command.name)?.resign();
      emit({ event: "resigned", name: command.name });
      return;
    }
    case "leader": {
      const election = elections.get(command.name);
      const leader = await election?.leader();
      emit({
        event: "leader",
        name: command.name,
        isLeader: election?.isLeader ?? false,
        term: election?.term === undefined ? null : `${election.term}`,
        leader: leader ? `${leader.ownerId}@${leader.term}` : null,
      });
      return;
    }
    case "observe": {
      const name = command.name;
      const election = elections.get(name);
      if (election === undefined) throw new Error(`observe: no election "${name}" in this worker`);
      void (async () => {
        for await (const leader of election.observe()) {
          emit({
            event: "observed",
            name,
            leader: leader ? `${leader.ownerId}@${leader.term}` : null,
            term: leader ? `${leader.term}` : null,
          });
        }
      })().catch((error: unknown) => emit(errorEvent("observe", error)));
      return;
    }
    case "close-election": {
      await elections.get(command.name)?.close();
      emit({ event: "election-closed", name: command.name });
      return;
    }
    case "partitions": {
      const name = command.name;
      const set = coordinator.partitions(name, {
        count: command.count,
        onAssigned: (partition, { token }) => {
          emit({ event: "assigned", name, partition, token: `${token}` });
        },
        onRevoked: (partition, { token, reason }) => {
          emit({ event: "unassigned", name, partition, token: `${token}`, reason });
        },
      });
      partitionSets.set(name, set);
      return;
    }
    case "owned": {
      const partitions = partitionSets.get(command.name)?.owned() ?? [];
      emit({ event: "owned", name: command.name, partitions });
      return;
    }
    case "enable-metrics": {
      if (metricsRegistry === undefined) {
        const prom = await import("prom-client");
        const registry = new prom.Registry();
        await enablePrometheus(coordinator, { registry });
        metricsRegistry = registry;
      }
      emit({ event: "metrics-enabled" });
      return;
    }
    case "metrics": {
      if (metricsRegistry === undefined) throw new Error("metrics: send enable-metrics first");
      emit({ event: "metrics", text: await metricsRegistry.metrics() });
      return;
    }
    case "run-once": {
      const result = await coordinator.runOnce(
        command.job,
        command.slot,
        holdingJob(command.holdMs),
        {
          ...(command.waitMs !== undefined ? { waitMs: command.waitMs } : {}),
          ...(command.atMostMs !== undefined ? { atMostMs: command.atMostMs } : {}),
          ...(command.maxAttempts !== undefined ? { maxAttempts: command.maxAttempts } : {}),
        },
      );
      emit(jobResult(command.job, command.slot, result));
      return;
    }
    case "schedule": {
      const skew = command.clockSkewMs ?? 0;
      const schedule = coordinator.schedule(command.cron, command.job, holdingJob(command.holdMs), {
        now: () => Date.now() + skew,
        onResult: (result, slot) => emit(jobResult(command.job, slot, result)),
        ...(command.atMostMs !== undefined ? { atMostMs: command.atMostMs } : {}),
        ...(command.catchUpMs !== undefined ? { catchUpMs: command.catchUpMs } : {}),
      });
      schedules.set(command.job, schedule);
      return;
    }
    case "stop-schedule": {
      await schedules.get(command.job)?.stop();
      schedules.delete(command.job);
      emit({ event: "schedule-stopped", job: command.job });
      return;
    }
    case "exit": {
      for (const t of tickers.values()) clearTimeout(t);
      await coordinator.close().catch(() => undefined);
      emit({ event: "exited" });
      process.exit(0);
    }
  }
}

coordinator.on("renewFailed", ({ error, remainingMs }) => {
  emit({ event: "renewFailed", message: String((error as Error)?.message ?? error), remainingMs });
});

const lines = createInterface({ input: process.stdin });
lines.on("line", (line) => {
  if (line.trim() === "") return;
  let command: WorkerCommand;
  try {
    command = JSON.parse(line) as WorkerCommand;
  } catch (error) {
    emit(errorEvent("parse", error));
    return;
  }
  handle(command).catch((error: unknown) => emit(errorEvent(command.op, error)));
});
lines.on("close", () => {
  void coordinator.close().finally(() => process.exit(0));
});
emit({ event: "ready", pid: process.pid });
