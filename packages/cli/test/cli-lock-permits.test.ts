import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { formatPermitHolders } from "../src/commands/status.js";
import { EXIT } from "../src/exit-codes.js";
import { maxAtOnce, neverBesideAWrite, until } from "./cli-helpers.js";
import { linesOf } from "./support/lines-of.js";
import { runMain } from "./support/run-main.js";
import { useTempDir } from "./support/temp-dir.js";

// `baton lock --permits / --read / --write` as several processes run it, in one process:
// every `memory://NAME` of a process shares one store, so two calls of `main` are two
// processes of baton. CMD is a real child process.
describe("baton lock with --permits, --read and --write", () => {
  const dir = useTempDir("baton-permits-");

  const unique = () => Math.random().toString(36).slice(2, 10);
  /** A fresh store, a log CMD appends to, and a file whose creation lets every CMD end. */
  const world = () => {
    const id = unique();
    const log = join(dir(), `${id}.log`);
    writeFileSync(log, "");
    const go = join(dir(), `${id}.go`);
    return {
      backend: `memory://permits-${id}`,
      log,
      go,
      lines: () => linesOf(log),
      letGo: () => writeFileSync(go, ""),
    };
  };
  /** CMD: logs `start WHO TOKEN`, waits for `go`, logs `end WHO TOKEN`. */
  const cmd = (who: string, log: string, go: string) => [
    "sh",
    "-c",
    `echo "start ${who} $BATON_FENCING_TOKEN $BATON_LOCK_NAME" >> ${log}; while [ ! -e ${go} ]; do sleep 0.02; done; echo "end ${who} $BATON_FENCING_TOKEN" >> ${log}`,
  ];
  const starts = (lines: string[]) => lines.filter((l) => l.startsWith("start"));

  it("--permits 2: two runs hold a permit at once, a third waits until one ends", async () => {
    const { backend, log, go, lines, letGo } = world();
    const lock = (who: string) =>
      runMain([
        "lock",
        "exports",
        "--permits",
        "2",
        "--backend",
        backend,
        "--",
        ...cmd(who, log, go),
      ]);
    const a = lock("a");
    const b = lock("b");
    await until(() => starts(lines()).length === 2, 20_000, "two runs to hold a permit");
    const c = lock("c");
    await new Promise((r) => setTimeout(r, 500)); // c has had the time to start, were it let in
    expect(starts(lines())).toHaveLength(2);
    letGo();
    expect((await Promise.all([a, b, c])).map((r) => r.code)).toEqual([0, 0, 0]);
    expect(maxAtOnce(lines())).toBe(2);
    const order = lines().map((l) => l.split(" ").slice(0, 2).join(" "));
    expect(order.indexOf("start c")).toBeGreaterThan(order.findIndex((l) => l.startsWith("end")));
    // CMD gets the semaphore's name and a token of its own, rising with every grant.
    expect(starts(lines()).every((l) => l.endsWith(" exports"))).toBe(true);
    const tokens = starts(lines()).map((l) => BigInt(l.split(" ")[2] as string));
    expect(new Set(tokens).size).toBe(3);
    expect(tokens[2] as bigint).toBeGreaterThan(tokens[0] as bigint);
    expect(tokens[2] as bigint).toBeGreaterThan(tokens[1] as bigint);
  });

  it("--take K holds K of the permits: a second --take 2 of 3 waits, a single permit does not", async () => {
    const { backend, log, go, lines, letGo } = world();
    const base = ["lock", "gpu", "--permits", "3", "--backend", backend];
    const big = runMain([...base, "--take", "2", "--", ...cmd("big", log, go)]);
    await until(() => starts(lines()).length === 1, 20_000, "the first run to hold 2 permits");
    const second = await runMain([...base, "--take", "2", "--no-wait", "--", "true"]);
    expect(second.code).toBe(EXIT.held);
    expect(second.err).toContain('semaphore "gpu" has fewer than 2 free permits of its 3');
    const small = await runMain([...base, "--no-wait", "--", "true"]);
    expect(small.code).toBe(0);
    letGo();
    expect((await big).code).toBe(0);
  });

  it("--no-wait on a semaphore with no free permit is the held code; --wait running out, the timeout code", async () => {
    const { backend, log, go, lines, letGo } = world();
    const base = ["lock", "slots", "--permits", "1", "--backend", backend];
    const holder = runMain([...base, "--", ...cmd("holder", log, go)]);
    await until(() => starts(lines()).length === 1, 20_000, "the holder");
    const tried = await runMain([...base, "--no-wait", "--", "true"]);
    expect(tried.code).toBe(EXIT.held);
    expect(tried.err).toContain('semaphore "slots" has no free permit of its 1');
    const waited = await runMain([...base, "--wait", "300", "--", "true"]);
    expect(waited.code).toBe(EXIT.timeout);
    letGo();
    expect((await holder).code).toBe(0);
  });

  it("another --permits than the store holds for NAME is a usage error naming both numbers", async () => {
    const { backend, log, go, lines, letGo } = world();
    const holder = runMain([
      "lock",
      "exports",
      "--permits",
      "2",
      "--backend",
      backend,
      "--",
      ...cmd("holder", log, go),
    ]);
    await until(() => starts(lines()).length === 1, 20_000, "the holder");
    const other = await runMain([
      "lock",
      "exports",
      "--permits",
      "3",
      "--backend",
      backend,
      "--",
      "true",
    ]);
    expect(other.code).toBe(EXIT.usage);
    expect(other.err).toContain('--permits 3: "exports" has 2 permits in the store');
    expect(other.err).toContain("asked for 3 permits");
    // A read-write lock of a semaphore's name is refused the same way.
    const read = await runMain(["lock", "exports", "--read", "--backend", backend, "--", "true"]);
    expect(read.code).toBe(EXIT.usage);
    expect(read.err).toContain(
      `--read: "exports" has 2 permits in the store, and this acquire asked for a read-write lock's limit`,
    );
    letGo();
    expect((await holder).code).toBe(0);
  });

  it("--read runs beside another --read, never beside a --write; a read carries the newest write's token", async () => {
    const { backend, log, go, lines, letGo } = world();
    const lock = (who: string, side: "--read" | "--write", gate = go) =>
      runMain(["lock", "catalog", side, "--backend", backend, "--", ...cmd(who, log, gate)]);
    const r1 = lock("r1", "--read");
    const r2 = lock("r2", "--read");
    await until(() => starts(lines()).length === 2, 20_000, "two readers at once");
    const writeGo = `${go}.write`;
    const w = lock("w", "--write", writeGo);
    await new Promise((r) => setTimeout(r, 500)); // w has had the time to start, were it let in
    expect(starts(lines())).toHaveLength(2);
    letGo(); // the readers end; the write starts
    expect((await Promise.all([r1, r2])).map((r) => r.code)).toEqual([0, 0]);
    await until(() => starts(lines()).length === 3, 20_000, "the write to start");
    const r3Go = `${go}.r3`;
    const r3 = lock("r3", "--read", r3Go);
    writeFileSync(r3Go, "");
    await new Promise((r) => setTimeout(r, 500)); // r3 has had the time to start, were it let in
    expect(starts(lines())).toHaveLength(3);
    writeFileSync(writeGo, "");
    expect((await w).code).toBe(0);
    expect((await r3).code).toBe(0);
    expect(neverBesideAWrite(lines())).toBe(true);
    const token = (who: string) =>
      BigInt(
        starts(lines())
          .find((l) => l.startsWith(`start ${who} `))
          ?.split(" ")[2] as string,
      );
    expect(token("r1")).toBe(0n); // no write yet
    expect(token("r2")).toBe(0n);
    expect(token("w")).toBeGreaterThan(0n);
    expect(token("r3")).toBe(token("w"));
  });

  it("--write --no-wait while a read is held is the held code", async () => {
    const { backend, log, go, lines, letGo } = world();
    const reader = runMain([
      "lock",
      "catalog",
      "--read",
      "--backend",
      backend,
      "--",
      ...cmd("r", log, go),
    ]);
    await until(() => starts(lines()).length === 1, 20_000, "the reader");
    const w = await runMain([
      "lock",
      "catalog",
      "--write",
      "--no-wait",
      "--backend",
      backend,
      "--",
      "true",
    ]);
    expect(w.code).toBe(EXIT.held);
    expect(w.err).toContain('read-write lock "catalog" is held by someone else');
    // A plain lock of the same name is another lock: it does not wait for the reader.
    const plain = await runMain([
      "lock",
      "catalog",
      "--no-wait",
      "--backend",
      backend,
      "--",
      "true",
    ]);
    expect(plain.code).toBe(0);
    letGo();
    expect((await reader).code).toBe(0);
  });

  it("baton status --permits lists each holder with its permits or side, in grant order", async () => {
    const { backend, log, go, lines, letGo } = world();
    const holders = [
      runMain([
        "lock",
        "jobs",
        "--permits",
        "3",
        "--take",
        "2",
        "--backend",
        backend,
        "--value",
        "big",
        "--",
        ...cmd("a", log, go),
      ]),
    ];
    await until(() => starts(lines()).length === 1, 20_000, "the first holder");
    holders.push(
      runMain(["lock", "jobs", "--permits", "3", "--backend", backend, "--", ...cmd("b", log, go)]),
    );
    await until(() => starts(lines()).length === 2, 20_000, "the second holder");
    const status = await runMain(["status", "jobs", "--permits", "--backend", backend]);
    expect(status.code).toBe(0);
    const shown = status.out.split("\n");
    expect(shown).toHaveLength(2);
    expect(shown[0]).toMatch(
      /^jobs: 2 permits held by .+, token \d+, value "big", time left (\d+ ms|unknown)$/,
    );
    expect(shown[1]).toMatch(/^jobs: 1 permit held by .+, token \d+, time left (\d+ ms|unknown)$/);
    const json = await runMain(["status", "jobs", "--permits", "--json", "--backend", backend]);
    const parsed = JSON.parse(json.out) as {
      name: string;
      holders: { permits: number; mode: string }[];
    };
    expect(parsed.name).toBe("jobs");
    expect(parsed.holders.map((h) => [h.permits, h.mode])).toEqual([
      [2, "permit"],
      [1, "permit"],
    ]);
    letGo();
    expect((await Promise.all(holders)).map((r) => r.code)).toEqual([0, 0]);
    const free = await runMain(["status", "jobs", "--permits", "--backend", backend]);
    expect(free.out).toBe("jobs: no permits held");
  });

  it("status lines of a read-write lock name the side held", () => {
    const read = { ownerId: "reader-1", token: 7n, permits: 1, mode: "read" as const };
    const write = {
      ownerId: "writer-1",
      token: 8n,
      permits: 2_147_483_647,
      mode: "write" as const,
    };
    expect(formatPermitHolders("catalog", [read], false)).toBe(
      "catalog: read lock held by reader-1, token 7, time left unknown",
    );
    expect(formatPermitHolders("catalog", [write], false)).toBe(
      "catalog: write lock held by writer-1, token 8, time left unknown",
    );
  });

  it("a bad --permits, --take, or combination of flags is a usage error before any I/O", async () => {
    // An unreachable store: any I/O would end in the unavailable code, or hang.
    const backend = "redis://127.0.0.1:1";
    const cases: [string[], string][] = [
      [["--permits", "0"], '--permits must be a whole number from 1 to 1000000, got "0"'],
      [["--permits", "two"], '--permits must be a whole number from 1 to 1000000, got "two"'],
      [["--permits", "1.5"], "--permits must be a whole number"],
      [["--permits", "1000001"], "--permits must be a whole number from 1 to 1000000"],
      [["--permits", "2", "--take", "3"], '--take must be a whole number from 1 to 2, got "3"'],
      [["--permits", "2", "--take", "0"], "--take must be a whole number from 1 to 2"],
      [["--take", "2"], "--take K needs --permits N"],
      [["--permits", "2", "--read"], "--permits and --read exclude each other"],
      [["--permits", "2", "--write"], "--permits and --write exclude each other"],
      [["--read", "--write"], "--read and --write exclude each other"],
      [
        ["--read", "--fence", "postgres://u@127.0.0.1:1/db"],
        "--fence and --read exclude each other",
      ],
      [
        ["--permits", "3", "--fence", "postgres://u@127.0.0.1:1/db"],
        "--fence and --permits exclude each other",
      ],
    ];
    for (const [flags, message] of cases) {
      const argv = ["lock", "x", ...flags, "--backend", backend, "--", "true"];
      const r = await runMain(argv);
      expect(r.code, argv.join(" ")).toBe(EXIT.usage);
      expect(r.err, argv.join(" ")).toContain(message);
    }
    const watch = await runMain(["status", "x", "--permits", "--watch", "--backend", backend]);
    expect(watch.code).toBe(EXIT.usage);
    expect(watch.err).toContain("--watch and --permits exclude each other");
    const counted = await runMain(["status", "x", "--permits", "3", "--backend", backend]);
    expect(counted.code).toBe(EXIT.usage);
    expect(counted.err).toContain("--permits takes no number");
    const help = await runMain(["lock", "--help"]);
    expect(help.out).toContain("--permits N");
    expect(help.out).toContain("--read");
  });
});
