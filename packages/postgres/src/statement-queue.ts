import type pg from "pg";
import type { PreparedCall } from "./prepared-call.js";

/** Called once with a statement's outcome. */
export type StatementCallback = (error: Error | null, result: pg.QueryResult | undefined) => void;

/**
 * Runs statements on one pg connection one at a time, in the order they are submitted. pg
 * deprecates queueing statements on a busy client (a warning now, an error in pg 9), and a
 * session's acquires, releases and renewals overlap.
 *
 * A statement submitted while the connection is free goes out at once, in the same turn, with
 * pg's callback (no promise of pg's, and none of ours between the caller and the socket); the
 * acquires and releases go as a {@link PreparedCall} ({@link call}). A caller may also hold
 * the connection for a run of statements of its own ({@link hold}), sent directly on the
 * client meanwhile.
 */
export class StatementQueue {
  readonly #client: pg.Client;
  /** A statement runs, or a holder holds the connection. */
  #busy = false;
  /** Starts of what waits for the connection, in order. */
  readonly #waiting: (() => void)[] = [];
  /** Statements (not holds) among them. */
  #statements = 0;

  constructor(client: pg.Client) {
    this.#client = client;
  }

  /** Statements submitted that have not started yet. */
  get queued(): number {
    return this.#statements;
  }

  /** Runs `config` once the connection is free; `callback` gets its outcome, once. */
  submit(config: pg.QueryConfig, callback: StatementCallback): void {
    if (!this.#busy) {
      this.#busy = true;
      this.#run(config, callback);
      return;
    }
    this.#statements++;
    this.#waiting.push(() => {
      this.#statements--;
      this.#run(config, callback);
    });
  }

  /** Runs `call` once the connection is free; its callback gets the outcome, once. */
  call(call: PreparedCall): void {
    if (!this.#busy) {
      this.#busy = true;
      this.#runCall(call);
      return;
    }
    this.#statements++;
    this.#waiting.push(() => {
      this.#statements--;
      this.#runCall(call);
    });
  }

  /**
   * Takes the connection once what was submitted before has finished. Resolves with the
   * function that gives it back (call it exactly once); statements submitted meanwhile wait.
   */
  hold(): Promise<() => void> {
    return new Promise((resolve) => {
      const start = () => {
        let given = false;
        resolve(() => {
          if (given) return;
          given = true;
          this.#next();
        });
      };
      if (this.#busy) this.#waiting.push(start);
      else {
        this.#busy = true;
        start();
      }
    });
  }

  #run(config: pg.QueryConfig, callback: StatementCallback): void {
    try {
      this.#client.query(config, (error: Error | null, result: pg.QueryResult) => {
        this.#next();
        callback(error, result);
      });
    } catch (error) {
      // pg reports nearly everything through the callback; this is the rest.
      this.#next();
      callback(error as Error, undefined);
    }
  }

  #runCall(call: PreparedCall): void {
    const callback = call.callback;
    call.callback = (error, column) => {
      this.#next();
      callback(error, column);
    };
    try {
      this.#client.query(call);
    } catch (error) {
      this.#next();
      callback(error as Error, null);
    }
  }

  #next(): void {
    const start = this.#waiting.shift();
    if (start === undefined) this.#busy = false;
    else start();
  }
}
