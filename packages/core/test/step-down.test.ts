import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const CHILD = fileURLToPath(new URL("./fixtures/step-down-child.ts", import.meta.url));

describe("installStepDown", () => {
  it("on SIGTERM resigns (onRevoked runs) and then lets the signal end the process", async () => {
    const child = spawn(process.execPath, ["--import", "tsx", CHILD], {
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
    expect(performance.now() - sentAt).toBeLessThan(5_000);
    expect(out).toContain("revoked closed");
    expect(result.signal).toBe("SIGTERM");
  });
});
