import { type ChildProcess, fork } from "node:child_process";

/** A reply of a bench child process: `ready` once, then one per request. */
export type ChildReply<T> =
  | { op: "ready" }
  | ({ op: "done" } & T)
  | { op: "error"; message: string };

/**
 * A child process of the bench (a `*-worker.ts` script, run with this process's node options)
 * that answers each request with one message, in order.
 */
export class BenchChild<T> {
  readonly child: ChildProcess;
  readonly #replies: ChildReply<T>[] = [];
  #waiting: ((r: ChildReply<T>) => void) | undefined;
  #exited: string | undefined;

  constructor(script: string, args: readonly string[]) {
    this.child = fork(script, args, {
      execArgv: process.execArgv,
      stdio: ["ignore", "ignore", "inherit", "ipc"],
    });
    this.child.on("message", (r: ChildReply<T>) => {
      const w = this.#waiting;
      if (w) {
        this.#waiting = undefined;
        w(r);
      } else this.#replies.push(r);
    });
    this.child.on("exit", (code) => {
      this.#exited = `bench child exited with ${code}`;
      const w = this.#waiting;
      this.#waiting = undefined;
      w?.({ op: "error", message: this.#exited });
    });
  }

  /** The next reply. */
  next(): Promise<ChildReply<T>> {
    const r = this.#replies.shift();
    if (r) return Promise.resolve(r);
    if (this.#exited) return Promise.resolve({ op: "error", message: this.#exited });
    return new Promise((resolve) => {
      this.#waiting = resolve;
    });
  }

  /** Waits for `ready` (throws on an error or exit). */
  async ready(): Promise<void> {
    const r = await this.next();
    if (r.op !== "ready") throw new Error(r.op === "error" ? r.message : "bench child");
  }

  /** Sends a request and returns its `done` reply (throws on an error reply). */
  async request(message: object): Promise<T> {
    this.child.send(message);
    const r = await this.next();
    if (r.op === "error") throw new Error(r.message);
    if (r.op !== "done") throw new Error(`bench child: unexpected ${r.op}`);
    return r;
  }

  /** Asks the child to close, and kills it after `ms`. */
  async close(ms = 10_000): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    if (this.child.connected) this.child.send({ op: "close" });
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.child.kill("SIGKILL");
        resolve();
      }, ms);
      this.child.once("exit", () => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}
