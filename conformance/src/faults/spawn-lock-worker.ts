import { type ChildProcess, spawn } from "node:child_process";
import { siblingModuleArgs } from "@baton/core";
import type { WorkerCommand, WorkerEvent } from "./worker-protocol.js";

const WORKER_ARGS = siblingModuleArgs(import.meta.url, "./lock-worker");

/** Options of {@link spawnLockWorker}. */
export interface LockWorkerOptions {
  /** Backend URL the worker's coordinator uses. */
  readonly url: string;
  /** Lease length in ms. */
  readonly ttlMs: number;
  /** Owner id shown by `holder()`. */
  readonly ownerId?: string;
  /** Install step-down on SIGTERM/SIGINT in the worker. */
  readonly stepDown?: boolean;
}

/**
 * A lock holder in a child process (`node --import tsx`, so signals reach the process that
 * holds the connection). Send commands, wait for events, and freeze or kill it.
 */
export class LockWorker {
  /** The worker's PID (the node process itself, not a wrapper). */
  readonly pid: number;
  /** Every event received so far, in order. */
  readonly events: WorkerEvent[] = [];
  readonly #child: ChildProcess;
  readonly #waiters = new Set<() => void>();
  readonly #listeners = new Set<(event: WorkerEvent) => void>();
  #stderr = "";

  private constructor(child: ChildProcess) {
    this.#child = child;
    this.pid = child.pid as number;
    let buffer = "";
    child.stdout?.setEncoding("utf8");
    child.stdout?.on("data", (chunk: string) => {
      buffer += chunk;
      for (let at = buffer.indexOf("\n"); at >= 0; at = buffer.indexOf("\n")) {
        const line = buffer.slice(0, at);
        buffer = buffer.slice(at + 1);
        if (line.trim() === "") continue;
        let event: WorkerEvent;
        try {
          event = JSON.parse(line) as WorkerEvent;
        } catch {
          this.#stderr += `[stdout] ${line}\n`;
          continue;
        }
        this.events.push(event);
        for (const listener of this.#listeners) listener(event);
        for (const wake of this.#waiters) wake();
      }
    });
    child.stderr?.setEncoding("utf8");
    child.stderr?.on("data", (chunk: string) => {
      this.#stderr = (this.#stderr + chunk).slice(-8_000);
    });
    child.on("exit", () => {
      for (const wake of this.#waiters) wake();
    });
  }

  /** Starts a worker and waits until it is ready. */
  static async start(options: LockWorkerOptions): Promise<LockWorker> {
    const child = spawn(process.execPath, WORKER_ARGS, {
      env: {
        ...process.env,
        BATON_URL: options.url,
        BATON_TTL_MS: String(options.ttlMs),
        ...(options.ownerId ? { BATON_OWNER_ID: options.ownerId } : {}),
        ...(options.stepDown ? { BATON_STEP_DOWN: "1" } : {}),
      },
      stdio: ["pipe", "pipe", "pipe"],
    });
    const worker = new LockWorker(child);
    await worker.waitFor((e) => e.event === "ready", 20_000);
    return worker;
  }

  /** Recent stderr output, for failure messages. */
  get stderr(): string {
    return this.#stderr;
  }

  /** True once the process has exited. */
  get exited(): boolean {
    return this.#child.exitCode !== null || this.#child.signalCode !== null;
  }

  /**
   * Calls `listener` with every event from now on, synchronously as it is received (so a
   * listener that reads the clock timestamps the event on receipt). Returns the unsubscribe.
   */
  onEvent(listener: (event: WorkerEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Sends a command. */
  send(command: WorkerCommand): void {
    this.#child.stdin?.write(`${JSON.stringify(command)}\n`);
  }

  /**
   * Resolves with the first event (received from `fromIndex` on) that matches, or rejects
   * after `timeoutMs` with the events and stderr seen.
   */
  waitFor<E extends WorkerEvent>(
    match: (event: WorkerEvent) => event is E,
    timeoutMs: number,
    fromIndex?: number,
  ): Promise<E>;
  waitFor(
    match: (event: WorkerEvent) => boolean,
    timeoutMs: number,
    fromIndex?: number,
  ): Promise<WorkerEvent>;
  waitFor(
    match: (event: WorkerEvent) => boolean,
    timeoutMs: number,
    fromIndex = 0,
  ): Promise<WorkerEvent> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = this.events.slice(fromIndex).find(match);
        if (found !== undefined) {
          done();
          resolve(found);
        } else if (this.exited) {
          done();
          reject(
            new Error(
              `lock worker exited; events: ${JSON.stringify(this.events)}; stderr: ${this.#stderr}`,
            ),
          );
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(
          new Error(
            `lock worker: no matching event within ${timeoutMs} ms; events: ${JSON.stringify(this.events)}; stderr: ${this.#stderr}`,
          ),
        );
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        this.#waiters.delete(check);
      };
      this.#waiters.add(check);
      check();
    });
  }

  /** Sends `command` and waits for the first matching event after it. */
  async request(
    command: WorkerCommand,
    match: (event: WorkerEvent) => boolean,
    timeoutMs = 20_000,
  ): Promise<WorkerEvent> {
    const from = this.events.length;
    this.send(command);
    return await this.waitFor(match, timeoutMs, from);
  }

  /** Freezes the process (SIGSTOP). */
  pause(): void {
    this.#child.kill("SIGSTOP");
  }

  /** Sends SIGTERM (with `stepDown`, the worker resigns and releases, then exits). */
  terminate(): void {
    this.#child.kill("SIGTERM");
  }

  /** Resumes it (SIGCONT). */
  resume(): void {
    this.#child.kill("SIGCONT");
  }

  /** Kills it at once (SIGKILL) and waits for the exit. */
  async kill(): Promise<void> {
    if (this.exited) return;
    const exited = new Promise<void>((resolve) => this.#child.once("exit", () => resolve()));
    this.#child.kill("SIGCONT");
    this.#child.kill("SIGKILL");
    await exited;
  }

  /** Asks it to close its coordinator and exit; kills it if it does not within `graceMs`. */
  async stop(graceMs = 5_000): Promise<void> {
    if (this.exited) return;
    const exited = new Promise<void>((resolve) => this.#child.once("exit", () => resolve()));
    this.#child.kill("SIGCONT");
    this.send({ op: "exit" });
    const timer = setTimeout(() => this.#child.kill("SIGKILL"), graceMs);
    await exited;
    clearTimeout(timer);
  }
}

/** Starts a {@link LockWorker}. */
export function spawnLockWorker(options: LockWorkerOptions): Promise<LockWorker> {
  return LockWorker.start(options);
}
