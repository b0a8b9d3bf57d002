import "@baton/postgres";
import "@baton/redis";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { type BackendKind, describeBackend } from "@baton/conformance/harness";
import { type Coordinator, createCoordinator, LockLostError } from "@baton/core";
import { afterEach, expect, it } from "vitest";
import { EXIT } from "../src/exit-codes.js";
import { until } from "./cli-helpers.js";
import { useBatonRuns } from "./support/baton-runs.js";

/** Each test spawns baton a few times; on a loaded machine a start takes seconds. */
const SLOW = 90_000;

const BIN = fileURLToPath(new URL("../bin/baton.js", import.meta.url));

/**
 * `baton ...args` on a pseudo-terminal (script(1)): what is written to its stdin is typed
 * there (Ctrl-C interrupts it as on a terminal). Resolves `exited` with baton's exit code.
 */
function onTerminal(args: readonly string[]) {
  // `exec`: the shell `script` starts (sh when SHELL is unset) must not stay between the
  // terminal and baton, or Ctrl-C's SIGINT kills the shell and its exit status is 130.
  const line = [
    "exec",
    process.execPath,
    "--conditions=@baton/source",
    "--import",
    "tsx",
    BIN,
    ...args,
  ]
    .map((a) => `'${a.replaceAll("'", "'\\''")}'`)
    .join(" ");
  const child = spawn("script", ["-qfec", line, "/dev/null"], { stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  child.stdout.on("data", (d) => {
    out += d;
  });
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return { child, output: () => out, exited };
}

/** `baton ls`, `release` and `top` as processes, against a lock another process holds. */
const opsSuite = (url: string) => {
  const run = useBatonRuns();
  const coordinators: Coordinator[] = [];
  afterEach(async () => {
    await Promise.all(coordinators.splice(0).map((c) => c.close().catch(() => undefined)));
  });
  const holder = (ownerId: string) => {
    const c = createCoordinator({ url, ttlMs: 3_000, ownerId });
    coordinators.push(c);
    return c;
  };
  const prefix = () => `cli-ops-${Math.random().toString(36).slice(2, 10)}/`;
  const finish = async (args: string[]) => {
    const r = run(args);
    return { code: await r.exited, out: r.output() };
  };

  it(
    "baton ls shows a lock held elsewhere: holder, token, time left and a waiter",
    async () => {
      const p = prefix();
      const lock = await holder("ops-holder").acquire(`${p}orders`);
      const waiting = new AbortController();
      const waiter = holder("ops-waiter")
        .acquire(`${p}orders`, { signal: waiting.signal, waitMs: 60_000 })
        .catch(() => undefined);
      try {
        let text = { code: -1, out: "" };
        await until(
          async () => {
            text = await finish(["ls", p, "--backend", url]);
            return /\s1\s*$/m.test(text.out.split("\n")[1] ?? "");
          },
          30_000,
          "ls to show the waiter",
        );
        expect(text.code).toBe(0);
        const [header, line] = text.out.trim().split("\n");
        expect(header).toMatch(/^KIND\s+NAME\s+HOLDER\s+TOKEN\s+HELD\s+LEFT\s+WAITERS$/);
        expect(line).toMatch(
          new RegExp(
            `^lock\\s+${p}orders\\s+ops-holder\\s+${lock.token}\\s+\\S+\\s+\\d+(\\.\\d)?(ms|s)\\s+1$`,
          ),
        );
        const json = await finish(["ls", p, "--backend", url, "--json"]);
        expect(json.code).toBe(0);
        const item = JSON.parse(json.out.trim());
        expect(item).toMatchObject({ kind: "lock", name: `${p}orders`, waiters: { count: 1 } });
        expect(item.holders[0]).toMatchObject({ ownerId: "ops-holder", token: `${lock.token}` });
      } finally {
        waiting.abort();
        await waiter;
      }
    },
    SLOW,
  );

  it(
    "baton release --force frees it: the holder's signal aborts as revoked with the reason",
    async () => {
      const p = prefix();
      const lock = await holder("ops-holder").acquire(`${p}stuck`);
      const released = await finish([
        "release",
        `${p}stuck`,
        "--force",
        "--reason",
        "stuck on a dead connection",
        "--yes",
        "--backend",
        url,
      ]);
      expect(released.out).toContain(`token ${lock.token} held by ops-holder`);
      expect(released.code).toBe(0);
      await until(() => lock.signal.aborted, 15_000, "the holder to learn of the release");
      const reason = lock.signal.reason as LockLostError;
      expect(reason).toBeInstanceOf(LockLostError);
      expect(reason.reason).toBe("revoked");
      expect(reason.detail).toBe("stuck on a dead connection");
      const again = await finish([
        "release",
        `${p}stuck`,
        "--force",
        "--reason",
        "x",
        "--yes",
        "--backend",
        url,
      ]);
      expect(again.code).toBe(EXIT.nothingToRelease);
    },
    SLOW,
  );

  it(
    "baton release refuses without --force, and without --yes when stdin is no terminal",
    async () => {
      const p = prefix();
      const lock = await holder("ops-holder").acquire(`${p}kept`);
      const noForce = await finish([
        "release",
        `${p}kept`,
        "--reason",
        "r",
        "--yes",
        "--backend",
        url,
      ]);
      expect(noForce.code).toBe(EXIT.usage);
      expect(noForce.out).toContain("--force");
      const noYes = await finish([
        "release",
        `${p}kept`,
        "--force",
        "--reason",
        "r",
        "--backend",
        url,
      ]);
      expect(noYes.code).toBe(EXIT.usage);
      expect(noYes.out).toContain("--yes");
      expect(lock.signal.aborted).toBe(false);
      expect((await holder("ops-reader").inspect(`${p}kept`))?.holders[0]?.token).toBe(lock.token);
    },
    SLOW,
  );

  it(
    "baton top prints every refresh when stdout is no terminal, marking a new lock +",
    async () => {
      const p = prefix();
      const top = run(["top", p, "--backend", url, "--interval", "300"]);
      await until(() => top.output().includes("KIND"), 30_000, "top's first refresh");
      const lock = await holder("ops-holder").acquire(`${p}late`);
      await until(
        () =>
          new RegExp(`^\\+ lock\\s+${p}late\\s+ops-holder\\s+${lock.token}`, "m").test(
            top.output(),
          ),
        15_000,
        "top to mark the new lock",
      );
      top.child.kill("SIGINT");
      expect(await top.exited).toBe(0);
    },
    SLOW,
  );

  it(
    "baton top redraws in place on a terminal and ends on Ctrl-C",
    async () => {
      const p = prefix();
      const lock = await holder("ops-holder").acquire(`${p}tty`);
      const { child, output, exited } = onTerminal(["top", p, "--backend", url]);
      try {
        await until(
          () => output().includes(`${p}tty`),
          30_000,
          "top to show the lock on the terminal",
        );
        expect(output()).toContain("\x1b[?1049h"); // the alternate screen, left on exit
        expect(output()).toContain("\x1b[H\x1b[2J"); // each refresh redraws from the top
        expect(output()).toMatch(new RegExp(`lock\\s+${p}tty\\s+ops-holder\\s+${lock.token}`));
        child.stdin.write("\x03");
        expect(await exited).toBe(0);
        expect(output()).toContain("\x1b[?1049l");
      } finally {
        child.kill("SIGKILL");
      }
    },
    SLOW,
  );

  it(
    "baton release on a terminal shows the holder and asks; only yes releases",
    async () => {
      const p = prefix();
      const lock = await holder("ops-holder").acquire(`${p}asked`);
      // Listed from the holder's first renewal on, in some stores (PostgreSQL).
      const reader = holder("ops-reader");
      const listed = async () => {
        for await (const item of reader.list({ prefix: p }))
          if (item.name === `${p}asked`) return true;
        return false;
      };
      await until(listed, 15_000, "the lock to be listed");
      const ask = async (answer: string) => {
        const args = [
          "release",
          `${p}asked`,
          "--force",
          "--reason",
          "asked twice",
          "--backend",
          url,
        ];
        const { child, output, exited } = onTerminal(args);
        try {
          await until(() => output().includes("Type yes"), 30_000, "the question").catch((e) => {
            throw new Error(
              `${(e as Error).message}; the terminal showed: ${JSON.stringify(output())}`,
            );
          });
          child.stdin.write(`${answer}\r`);
          return { code: await exited, out: output() };
        } finally {
          child.kill("SIGKILL");
        }
      };
      const declined = await ask("no");
      expect(declined.out).toContain(`ops-holder (token ${lock.token})`);
      expect(declined.code).toBe(EXIT.usage);
      expect(lock.signal.aborted).toBe(false);
      const accepted = await ask("yes");
      expect(accepted.code).toBe(0);
      await until(() => lock.signal.aborted, 15_000, "the holder to learn of the release");
      expect((lock.signal.reason as LockLostError).reason).toBe("revoked");
    },
    SLOW,
  );
};

for (const kind of ["redis", "postgres"] as BackendKind[]) describeBackend(kind, opsSuite);

describeBackend("redis", (url) => {
  const run = useBatonRuns();
  // The harness's Redis has no password, so it refuses any it is given.
  const withPassword = url.replace("redis://", "redis://admin:hunter2-not-shown@");

  it("ls and dashboard refuse a store that rejects the credentials, without printing them", async () => {
    for (const args of [
      ["ls", "--backend", withPassword],
      ["dashboard", "--backend", withPassword, "--port", "0"],
    ]) {
      const r = run(args);
      expect(await r.exited).toBe(EXIT.usage);
      expect(r.output()).toContain("refused to authenticate");
      expect(r.output()).not.toContain("hunter2");
    }
  });

  it("dashboard refuses a --host other than loopback without --token", async () => {
    const r = run(["dashboard", "--backend", url, "--host", "0.0.0.0", "--port", "0"]);
    expect(await r.exited).toBe(EXIT.usage);
    expect(r.output()).toContain("--token");
  });
});
