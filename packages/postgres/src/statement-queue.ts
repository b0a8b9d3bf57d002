import type pg from "pg";
import type { PreparedCall } from "./prepared-call.js";

/** Called once with a statement's outcome. */
export type StatementCallback = (error: Error | null, result: pg.QueryResult | undefined) => void;

/** Something waiting for the connection: a statement, or a holder (see {@link StatementQueue.hold}). */
interface Waiting {
  readonly hold: boolean;
  readonly start: () => void;
}

/**
 * Sends a session's statements on its one pg connection, in the order they are submitted.
 *
 * On a client in pg's pipeline mode (the session's connection), a statement goes out as soon
 * as it is submitted, without waiting for the answers of those sent before it: the server
 * runs them one after the other and answers in order, so the many callers of one coordinator
 * are not held to one round trip at a time. Each statement ends at its own Sync, so one that
 * fails fails alone. On a client without pipeline mode, statements go one at a time (pg
 * deprecates queueing statements on a busy client: a warning now, an error in pg 9).
 *
 * A statement submitted while nothing holds the connection goes out in the same turn, with
 * pg's callback (no promise of pg's, and none of ours between the caller and the socket); the
 * acquires and releases go as a {@link PreparedCall} ({@link call}). A caller may also hold
 * the connection for a run of statements of its own ({@link hold}), sent directly on the
 * client meanwhile: it gets the connection once every statement sent before has been
 * answered, and statements submitted while it holds it wait.
 */
export class StatementQueue {
  readonly #client: pg.Client;
  /** How many statements may be on the wire at once: unbounded in pipeline mode, else 1. */
  readonly #pipelined: boolean;
  /** Statements sent and not answered yet. */
  #inFlight = 0;
  /** A holder holds the connection. */
  #held = false;
  /** What waits for the connection, in order. */
  readonly #waiting: Waiting[] = [];
  /** Statements (not holds) among them. */
  #statements = 0;
  /** The socket is corked until the current turn's statements are all written (see #coalesce). */
  #corked = false;

  constructor(client: pg.Client) {
    this.#client = client;
    this.#pipelined = (client as { pipeline?: boolean }).pipeline === true;
  }

  /** Statements submitted that have not been sent yet. */
  get queued(): number {
    return this.#statements;
  }

  /** Whether nothing is sent and unanswered, waiting to be sent, or holding the connection. */
  get idle(): boolean {
    return !this.#held && this.#inFlight === 0 && this.#waiting.length === 0;
  }

  /** Runs `config` in its turn; `callback` gets its outcome, once. */
  submit(config: pg.QueryConfig, callback: StatementCallback): void {
    if (this.#mayRun()) {
      this.#run(config, callback);
      return;
    }
    this.#statements++;
    this.#waiting.push({
      hold: false,
      start: () => {
        this.#statements--;
        this.#run(config, callback);
      },
    });
  }

  /** Runs `call` in its turn; its callback gets the outcome, once. */
  call(call: PreparedCall): void {
    if (this.#mayRun()) {
      this.#runCall(call);
      return;
    }
    this.#statements++;
    this.#waiting.push({
      hold: false,
      start: () => {
        this.#statements--;
        this.#runCall(call);
      },
    });
  }

  /**
   * Takes the connection once what was submitted before has been answered. Resolves with the
   * function that gives it back (call it exactly once); statements submitted meanwhile wait.
   */
  hold(): Promise<() => void> {
    return new Promise((resolve) => {
      const start = () => {
        this.#held = true;
        let given = false;
        resolve(() => {
          if (given) return;
          given = true;
          this.#held = false;
          this.#pump();
        });
      };
      if (!this.#held && this.#inFlight === 0 && this.#waiting.length === 0) start();
      else this.#waiting.push({ hold: true, start });
    });
  }

  /** Whether a statement submitted now may go out at once. */
  #mayRun(): boolean {
    return !this.#held && this.#waiting.length === 0 && (this.#pipelined || this.#inFlight === 0);
  }

  /**
   * In pipeline mode, the statements sent in one turn of the event loop (the callers woken by
   * one read of answers send their next ones together) go out in one write: the socket is
   * corked at the first and uncorked once the turn's promise callbacks have run. A statement
   * sent while none is in flight goes out at once (a lone caller's is not held back while the
   * rest of its turn runs); those after it in the turn are corked.
   */
  #coalesce(): void {
    // Hot path: see docs/hot-path.md, "PostgreSQL".
    if (this.#corked || !this.#pipelined || this.#inFlight === 0) return;
    const stream = this.#client.connection?.stream;
    if (stream === undefined) return;
    this.#corked = true;
    stream.cork();
    process.nextTick(() => {
      this.#corked = false;
      stream.uncork();
    });
  }

  #run(config: pg.QueryConfig, callback: StatementCallback): void {
    this.#coalesce();
    this.#inFlight++;
    try {
      this.#client.query(config, (error: Error | null, result: pg.QueryResult) => {
        this.#answered();
        callback(error, result);
      });
    } catch (error) {
      // pg reports nearly everything through the callback; this is the rest.
      this.#answered();
      callback(error as Error, undefined);
    }
  }

  #runCall(call: PreparedCall): void {
    this.#coalesce();
    this.#inFlight++;
    const callback = call.callback;
    call.callback = (error, column) => {
      this.#answered();
      callback(error, column);
    };
    try {
      this.#client.query(call);
    } catch (error) {
      this.#answered();
      callback(error as Error, null);
    }
  }

  #answered(): void {
    this.#inFlight--;
    if (this.#waiting.length > 0) this.#pump();
  }

  /** Starts what waits, in order, as far as the connection allows. */
  #pump(): void {
    while (!this.#held) {
      const next = this.#waiting[0];
      if (next === undefined) return;
      if (next.hold ? this.#inFlight > 0 : !this.#pipelined && this.#inFlight > 0) return;
      this.#waiting.shift();
      next.start();
    }
  }
}
