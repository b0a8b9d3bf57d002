import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import { StaleTokenError } from "@baton/core";
import { pgFence } from "@baton/postgres";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LOCK_OPTIONS, LOCK_USAGE } from "../src/commands/lock.js";
import { EXIT } from "../src/exit-codes.js";
import { type BatonRun, baton, until } from "./cli-helpers.js";
import { useBatonRuns } from "./support/baton-runs.js";

describe("baton lock --help", () => {
  it("documents every flag baton lock accepts", () => {
    const flags = [...Object.keys(LOCK_OPTIONS).map((key) => `--${key}`), "--help"];
    for (const flag of flags) {
      expect(LOCK_USAGE, `${flag} in the help`).toMatch(new RegExp(`^\\s+(-h, )?${flag}\\b`, "m"));
    }
  });

  it("prints that text", async () => {
    const run = baton(["lock", "--help"]);
    expect(await run.exited).toBe(0);
    expect(run.output()).toContain("--fence-token-column");
    expect(run.output()).toContain("--grace MS");
  });
});

describeBackend("postgres", (url) => {
  describe("baton lock --fence (correctness mode)", () => {
    let pool: pg.Pool;
    const jobFence = `job_fence_${randomUUID().slice(0, 8)}`;
    beforeAll(() => {
      pool = new pg.Pool({ connectionString: url, max: 3 });
      pool.on("error", () => undefined);
    });
    afterAll(async () => {
      await pool?.query(`DROP TABLE IF EXISTS ${jobFence}`).catch(() => undefined);
      await pool?.end();
    });
    const run = useBatonRuns();
    const name = () => `cli-fence-${randomUUID().slice(0, 8)}`;
    /** The token CMD printed as "token N". */
    const printedToken = async (r: BatonRun) => {
      await until(() => /token \d+/.test(r.output()), 20_000, "CMD to print its token");
      return BigInt((/token (\d+)/.exec(r.output()) as RegExpExecArray)[1] as string);
    };
    const holdAndPrint = ["--", "sh", "-c", 'echo "token $BATON_FENCING_TOKEN"; exec sleep 30'];

    it("raises the fence to the new token before CMD starts; CMD gets that token", async () => {
      const lock = name();
      const fence = pgFence(pool);
      const first = run(["lock", lock, "--backend", url, "--fence", url, ...holdAndPrint]);
      const firstToken = await printedToken(first);
      // While CMD runs, the fence holds exactly CMD's token: its fenced writes pass.
      expect(await fence.highest(lock)).toBe(firstToken);
      expect(await fence.transaction(lock, firstToken, () => "written")).toBe("written");
      first.child.kill("SIGTERM");
      await first.exited;

      const second = run(["lock", lock, "--backend", url, "--fence", url, ...holdAndPrint]);
      const secondToken = await printedToken(second);
      expect(secondToken).toBeGreaterThan(firstToken);
      expect(await fence.highest(lock)).toBe(secondToken);
      // The first run's token is stale from the moment the second CMD started.
      const stale = await fence.transaction(lock, firstToken, () => "written").catch((e) => e);
      expect(stale).toBeInstanceOf(StaleTokenError);
    });

    it("guards a table of your own named by --fence-table and the column flags", async () => {
      await pool.query(
        `CREATE TABLE ${jobFence} (job text PRIMARY KEY, last_token bigint NOT NULL)`,
      );
      const lock = name();
      const r = run([
        "lock",
        lock,
        "--backend",
        url,
        "--fence",
        url,
        "--fence-table",
        `public.${jobFence}`,
        "--fence-resource-column",
        "job",
        "--fence-token-column",
        "last_token",
        ...holdAndPrint,
      ]);
      const token = await printedToken(r);
      const rows = await pool.query(`SELECT job, last_token FROM ${jobFence} WHERE job = $1`, [
        lock,
      ]);
      expect(rows.rows).toEqual([{ job: lock, last_token: `${token}` }]);
    });

    it("a fence table without the named columns is a usage error naming the flag; CMD never runs", async () => {
      await pool.query(
        `CREATE TABLE IF NOT EXISTS ${jobFence} (job text PRIMARY KEY, last_token bigint NOT NULL)`,
      );
      const r = run([
        "lock",
        name(),
        "--backend",
        url,
        "--fence",
        url,
        "--fence-table",
        jobFence,
        "--",
        "sh",
        "-c",
        "echo CMD-RAN",
      ]);
      expect(await r.exited).toBe(EXIT.usage);
      expect(r.output()).toContain("--fence-resource-column");
      expect(r.output()).toContain('has no column "resource"');
      expect(r.output()).not.toContain("CMD-RAN");
    });

    it("refuses a fence it cannot use, before any I/O, saying why", async () => {
      const redis = run([
        "lock",
        "x",
        "--backend",
        "redis://127.0.0.1:1",
        "--fence",
        url,
        "--",
        "true",
      ]);
      expect(await redis.exited).toBe(EXIT.usage);
      expect(redis.output()).toContain("correctness mode refuses the redis backend");

      const notPostgres = run([
        "lock",
        "x",
        "--backend",
        url,
        "--fence",
        "redis://h:6379",
        "--",
        "true",
      ]);
      expect(await notPostgres.exited).toBe(EXIT.usage);
      expect(notPostgres.output()).toContain("--fence must be a PostgreSQL URL");

      const stray = run(["lock", "x", "--backend", url, "--fence-table", "t", "--", "true"]);
      expect(await stray.exited).toBe(EXIT.usage);
      expect(stray.output()).toContain("--fence-table needs --fence URL");

      const badColumn = run([
        "lock",
        "x",
        "--backend",
        url,
        "--fence",
        url,
        "--fence-token-column",
        "a;b",
        "--",
        "true",
      ]);
      expect(await badColumn.exited).toBe(EXIT.usage);
      expect(badColumn.output()).toContain("--fence-token-column");
    });
  });
});
