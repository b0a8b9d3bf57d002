import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const CHILD = fileURLToPath(new URL("./fixtures/step-down-child.ts", import.meta.url));
const OWN_HANDLER_CHILD = fileURLToPath(
  new URL("./fixtures/step-down-own-handler-child.ts", import.meta.url),
);

/** Runs `file` until it leads, sends it SIGTERM, and returns its output and how it ended. */
async function leadThenTerminate(file: string): Promise<{
  out: string;
  code: number | null;
  signal: NodeJS.Signals | null;
  afterSignalMs: number;
}> {
  const child = spawn(process.execPath, ["--import", "tsx", file], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout.on("data", (d) => {
    out += d;
  });
  child.stderr.on("data", (d) => {
    err += d;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("exit", (code, signal) => resolve({ code, signal })),
  );
  const started = performance.now();
  while (!out.includes("elected")) {
    if (performance.now() - started > 20_000) throw new Error(`child never led: ${out} ${err}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  const sentAt = performance.now();
  child.kill("SIGTERM");
  const result = await exited;
  return { out, ...result, afterSignalMs: performance.now() - sentAt };
}

describe("installStepDown", () => {
  it("on SIGTERM resigns (onRevoked runs) and then lets the signal end the process", async () => {
    const result = await leadThenTerminate(CHILD);
    expect(result.afterSignalMs).toBeLessThan(5_000);
    expect(result.out).toContain("revoked closed");
    expect(result.signal).toBe("SIGTERM");
  });

  it("runs the application's own SIGTERM handler once and leaves the exit to it", async () => {
    const result = await leadThenTerminate(OWN_HANDLER_CHILD);
    expect(result.out).toContain("revoked closed");
    expect(result.out.match(/app handler/g)).toEqual(["app handler"]);
    expect(result.out).toContain("exiting after 1");
    expect(result.code).toBe(0);
  });
});
