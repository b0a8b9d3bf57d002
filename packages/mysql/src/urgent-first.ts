/** A task of {@link UrgentFirst}: started with `done`, which it calls once when it has ended. */
export type UrgentTask = (done: () => void) => void;

/**
 * Runs tasks with at most `slots` at once; the others wait, urgent ones (renewals) ahead of the
 * rest, which keep their order. A renewal then waits for the tasks running, never for every
 * statement queued before it (behind thousands of those it could miss its bound, and the
 * session would lose every lock). A task that ends at once (a closed connection answers from
 * inside its call) lets the next one start from the loop, not from inside its own call, so
 * thousands of queued tasks do not nest calls.
 */
export class UrgentFirst {
  readonly #slots: number;
  #running = 0;
  readonly #urgent: UrgentTask[] = [];
  readonly #waiting: UrgentTask[] = [];
  #starting = false;

  constructor(slots: number) {
    this.#slots = slots;
  }

  /** Starts `task` once a slot is free, after the urgent tasks waiting (after all, unless `urgent`). */
  run(task: UrgentTask, urgent: boolean): void {
    (urgent ? this.#urgent : this.#waiting).push(task);
    this.#start();
  }

  #start(): void {
    if (this.#starting) return;
    this.#starting = true;
    try {
      while (this.#running < this.#slots) {
        const task = this.#urgent.shift() ?? this.#waiting.shift();
        if (task === undefined) return;
        this.#running++;
        let ended = false;
        task(() => {
          if (ended) return;
          ended = true;
          this.#running--;
          this.#start();
        });
      }
    } finally {
      this.#starting = false;
    }
  }
}
