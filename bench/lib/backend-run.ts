import { formatHeld, formatSection } from "./format-table.js";
import type { BackendResult, HeldLocksResult, LatencySection } from "./results.js";

/**
 * Collects one backend's results as its bench goes: prints each section when it is measured,
 * and turns a failing part into an error line of the report instead of ending the run.
 */
export class BackendRun {
  readonly backend: string;
  server = "unknown server";
  readonly #sections: LatencySection[] = [];
  readonly #errors: string[] = [];
  #held: HeldLocksResult | undefined;
  readonly #started = performance.now();

  constructor(backend: string) {
    this.backend = backend;
  }

  /** Records and prints a section. */
  add(section: LatencySection): LatencySection {
    this.#sections.push(section);
    console.log(formatSection(this.backend, section));
    return section;
  }

  /** Records and prints the held-locks figures. */
  addHeld(held: HeldLocksResult): void {
    this.#held = held;
    console.log(formatHeld(this.backend, held));
  }

  /** Runs one part; a failure is recorded (and printed) and yields undefined. */
  async step<T>(what: string, part: () => Promise<T>): Promise<T | undefined> {
    const t0 = performance.now();
    try {
      return await part();
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      const line = `${what} failed: ${message.split("\n")[0]}`;
      this.#errors.push(line);
      console.error(`\n${this.backend}: ${line}`);
      return undefined;
    } finally {
      if (process.env.BATON_BENCH_VERBOSE === "1") {
        console.error(
          `[bench] ${this.backend} ${what}: ${((performance.now() - t0) / 1000).toFixed(1)} s`,
        );
      }
    }
  }

  /** Records an error that is not a step's. */
  fail(line: string): void {
    this.#errors.push(line);
  }

  /** The result so far. */
  result(): BackendResult {
    return {
      backend: this.backend,
      server: this.server,
      sections: [...this.#sections],
      ...(this.#held ? { held: this.#held } : {}),
      errors: [...this.#errors],
      elapsedMs: performance.now() - this.#started,
    };
  }
}
