import { main } from "../../src/main.js";

/** What a call of the CLI's `main` printed, and its exit code. */
export interface MainResult {
  readonly code: number;
  /** stdout, its lines joined by newlines. */
  readonly out: string;
  /** stderr, its lines joined by newlines. */
  readonly err: string;
}

/**
 * Runs `baton ...argv` in this process, as one process of baton would (every `memory://NAME`
 * of this process shares one store), capturing what it prints.
 */
export async function runMain(argv: string[]): Promise<MainResult> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(
    argv,
    (s) => out.push(s),
    (s) => err.push(s),
  );
  return { code, out: out.join("\n"), err: err.join("\n") };
}
