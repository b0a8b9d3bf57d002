import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const BIN = fileURLToPath(new URL("../bin/baton.js", import.meta.url));

/** A running `baton` process. */
export interface BatonRun {
  readonly child: ChildProcess;
  /** stdout and stderr so far. */
  output(): string;
  /** Resolves with the exit code (128 + N for a signal) once baton has ended. */
  readonly exited: Promise<number>;
}

/** Spawns `node bin/baton.js ...args`, running the CLI from its TypeScript sources. */
export function baton(args: readonly string[], env: Record<string, string> = {}): BatonRun {
  const child = spawn(
    process.execPath,
    ["--conditions=@baton/source", "--import", "tsx", BIN, ...args],
    {
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let out = "";
  child.stdout?.on("data", (d) => {
    out += d;
  });
  child.stderr?.on("data", (d) => {
    out += d;
  });
  const exited = new Promise<number>((resolve) => {
    child.on("exit", (code, signal) =>
      resolve(code ?? (signal === "SIGKILL" ? 137 : signal === "SIGTERM" ? 143 : 1)),
    );
  });
  return { child, output: () => out, exited };
}

/** A CMD that prints "holding", then runs until SIGTERM, on which it prints "got-term" and exits 0. */
export const HOLD_UNTIL_TERM: readonly string[] = [
  "sh",
  "-c",
  "echo holding; trap 'echo got-term; exit 0' TERM; while true; do sleep 0.05; done",
];

/** Polls `check` every 25 ms until it holds, or throws after `timeoutMs`. */
export async function until(
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
): Promise<void> {
  const started = performance.now();
  while (!(await check())) {
    if (performance.now() - started > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The most CMDs running at once by a log of `start ...` and `end ...` lines. */
export function maxAtOnce(lines: readonly string[]): number {
  let running = 0;
  let most = 0;
  for (const line of lines) {
    running += line.startsWith("start") ? 1 : -1;
    most = Math.max(most, running);
  }
  return most;
}

/**
 * True when, by a log of `start WHO ...` and `end WHO ...` lines, no writer (a WHO starting
 * with "w") ran beside a reader or another writer.
 */
export function neverBesideAWrite(lines: readonly string[]): boolean {
  let reads = 0;
  let writes = 0;
  for (const line of lines) {
    const [event, who] = line.split(" ") as [string, string];
    const delta = event === "start" ? 1 : -1;
    if (who.startsWith("w")) writes += delta;
    else reads += delta;
    if (writes > 1 || (writes === 1 && reads > 0)) return false;
  }
  return true;
}
