import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { EXIT } from "../src/exit-codes.js";
import { baton } from "./cli-helpers.js";
import { runMain } from "./support/run-main.js";

const VERSION = (
  JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as {
    version: string;
  }
).version;

describe("baton --version", () => {
  it("--version and -V print the CLI's version and exit 0", async () => {
    for (const flag of ["--version", "-V"]) {
      const { code, out, err } = await runMain([flag]);
      expect(code).toBe(0);
      expect(out).toBe(VERSION);
      expect(err).toBe("");
    }
  });

  it("the installed command prints it too", async () => {
    const run = baton(["--version"]);
    expect(await run.exited).toBe(0);
    expect(run.output().trim()).toBe(VERSION);
  });
});

describe("a CMD that cannot start", () => {
  const missing = ["--", "./does-not-exist-baton-cmd"];

  it("lock: baton names the command, says it is missing, and exits 127", async () => {
    const run = baton(["lock", "missing-cmd", "--backend", "memory://", ...missing]);
    expect(await run.exited).toBe(EXIT.cannotRun);
    expect(run.output()).toContain("baton: cannot run ./does-not-exist-baton-cmd: no such file");
    expect(run.output()).not.toContain("setpriv");
  });

  it("lock: a command not on PATH is named as such", async () => {
    const { code, err } = await runMain([
      "lock",
      "missing-path-cmd",
      "--backend",
      "memory://",
      "--",
      "baton-no-such-command",
    ]);
    expect(code).toBe(EXIT.cannotRun);
    expect(err).toContain("cannot run baton-no-such-command: command not found on PATH");
  });

  it("elect --once and run-once: the same message and exit code", async () => {
    const elect = await runMain([
      "elect",
      "missing-cmd-e",
      "--backend",
      "memory://",
      "--once",
      ...missing,
    ]);
    expect(elect.code).toBe(EXIT.cannotRun);
    expect(elect.err).toContain("cannot run ./does-not-exist-baton-cmd: no such file");
    const once = await runMain([
      "run-once",
      "missing-cmd-r",
      "s1",
      "--backend",
      "memory://",
      ...missing,
    ]);
    expect(once.code).toBe(EXIT.cannotRun);
    expect(once.err + once.out).toContain("cannot run ./does-not-exist-baton-cmd: no such file");
  });
});
