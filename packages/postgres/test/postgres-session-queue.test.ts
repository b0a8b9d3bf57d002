import { describeBackend } from "@baton/conformance/harness";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresBackend } from "../src/index.js";
import { StatementQueue } from "../src/statement-queue.js";

describeBackend("postgres", (url) => {
  describe("postgres session connection", () => {
    let backend: PostgresBackend;
    beforeAll(() => {
      backend = new PostgresBackend({ url });
    });
    afterAll(async () => {
      await backend?.close();
    });

    it("overlapping acquires, renewals and releases on one session all succeed, without pg's deprecation warning", async () => {
      const warnings: string[] = [];
      const onWarning = (w: Error) => warnings.push(w.message);
      process.on("warning", onWarning);
      const session = await backend.openSession({ ttlMs: 5_000, ownerId: "overlap" });
      try {
        const signal = new AbortController().signal;
        const names = Array.from({ length: 20 }, (_, i) => `overlap-${i}`);
        const [grants] = await Promise.all([
          Promise.all(names.map((n) => session.acquire(n, { wait: false, signal }))),
          session.keepAlive(),
          session.keepAlive(),
        ]);
        expect(grants.every((g) => g !== null)).toBe(true);
        const tokens = grants.map((g) => g?.token ?? 0n);
        expect(new Set(tokens).size).toBe(names.length);
        const [released] = await Promise.all([
          Promise.all(grants.map((g) => (g === null ? false : session.release(g)))),
          session.keepAlive(),
        ]);
        expect(released).toEqual(names.map(() => true));
        await new Promise((r) => setImmediate(r));
        expect(warnings.filter((m) => m.includes("already executing"))).toEqual([]);
      } finally {
        process.off("warning", onWarning);
        await session.close();
      }
    });

    it("statements run one at a time in the order submitted, and none while a holder holds the connection", async () => {
      const client = new pg.Client({ connectionString: url });
      client.on("error", () => undefined);
      await client.connect();
      try {
        const queue = new StatementQueue(client);
        const done: string[] = [];
        const run = (label: string, sql: string) =>
          new Promise<unknown>((resolve, reject) => {
            queue.submit({ text: sql }, (error, result) => {
              done.push(label);
              if (error === null) resolve(result?.rows[0]);
              else reject(error);
            });
          });
        const first = run("first", "SELECT pg_sleep(0.05)");
        const giveBack = queue.hold();
        const second = run("second", "SELECT 2 AS n");
        const failing = run("failing", "SELECT 1 / 0");
        const third = run("third", "SELECT 3 AS n");
        expect(queue.queued).toBe(3);
        const give = await giveBack;
        // The holder has the connection: what came after waits.
        expect(done).toEqual(["first"]);
        await new Promise((resolve) => setTimeout(resolve, 50));
        expect(done).toEqual(["first"]);
        give();
        give(); // harmless twice
        await first;
        await expect(second).resolves.toEqual({ n: 2 });
        await expect(failing).rejects.toThrow(/division by zero/);
        await expect(third).resolves.toEqual({ n: 3 });
        expect(done).toEqual(["first", "second", "failing", "third"]);
        expect(queue.queued).toBe(0);
      } finally {
        await client.end();
      }
    });

    it("on a pipelined client statements go out at once, and a holder gets the connection once all sent before are answered", async () => {
      const client = new pg.Client({ connectionString: url, pipeline: true } as pg.ClientConfig);
      client.on("error", () => undefined);
      await client.connect();
      try {
        const queue = new StatementQueue(client);
        const done: string[] = [];
        const run = (label: string, sql: string) =>
          new Promise<unknown>((resolve, reject) => {
            queue.submit({ text: sql }, (error, result) => {
              done.push(label);
              if (error === null) resolve(result?.rows[0]);
              else reject(error);
            });
          });
        const first = run("first", "SELECT pg_sleep(0.05)");
        const failing = run("failing", "SELECT 1 / 0").then(
          () => undefined,
          (error: Error) => error.message,
        );
        const second = run("second", "SELECT 2 AS n");
        // Sent, none waiting for the answer before it.
        expect(queue.queued).toBe(0);
        const giveBack = queue.hold();
        const third = run("third", "SELECT 3 AS n");
        expect(queue.queued).toBe(1);
        const give = await giveBack;
        expect(done).toEqual(["first", "failing", "second"]);
        await new Promise((resolve) => setTimeout(resolve, 50));
        expect(done).toEqual(["first", "failing", "second"]);
        give();
        await first;
        // A statement that fails fails alone.
        expect(await failing).toMatch(/division by zero/);
        await expect(second).resolves.toEqual({ n: 2 });
        await expect(third).resolves.toEqual({ n: 3 });
        expect(done).toEqual(["first", "failing", "second", "third"]);
      } finally {
        await client.end();
      }
    });

    it("an acquire takes one token from the sequence when granted and none when refused, and holds one token lock", async () => {
      // A schema of its own: no other test takes tokens from its sequence.
      const own = new PostgresBackend({ url, schema: "baton_one_token" });
      const admin = new pg.Client({ connectionString: url });
      admin.on("error", () => undefined);
      await admin.connect();
      const a = await own.openSession({ ttlMs: 5_000, ownerId: "one-a" });
      const b = await own.openSession({ ttlMs: 5_000, ownerId: "one-b" });
      try {
        const signal = new AbortController().signal;
        const lastToken = async () =>
          BigInt(
            (await admin.query("SELECT last_value::text AS v FROM baton_one_token.token_seq"))
              .rows[0].v,
          );
        const tokenLocksOf = async (pid: number) =>
          Number(
            (
              await admin.query(
                "SELECT count(*)::int AS n FROM pg_locks WHERE pid = $1 AND locktype = 'advisory' AND objsubid = 2 AND mode = 'ShareLock'",
                [pid],
              )
            ).rows[0].n,
          );
        const pidOf = async (owner: string) =>
          Number(
            (
              await admin.query("SELECT pid FROM baton_one_token.sessions WHERE owner = $1", [
                owner,
              ])
            ).rows[0].pid,
          );
        let previous = await a.acquire("one", { wait: false, signal });
        expect(previous).not.toBeNull();
        expect(await lastToken()).toBe(previous?.token);
        expect(await tokenLocksOf(await pidOf("one-a"))).toBe(1);
        for (let i = 0; i < 10; i++) {
          // Refused: no token taken.
          expect(await b.acquire("one", { wait: false, signal })).toBeNull();
          expect(await lastToken()).toBe(previous?.token);
          expect(await a.release(previous as NonNullable<typeof previous>)).toBe(true);
          const next = await (i % 2 === 0 ? b : a).acquire("one", { wait: false, signal });
          // Granted: exactly the next token (nextval ran once).
          expect(next?.token).toBe((previous?.token ?? 0n) + 1n);
          if (i % 2 === 0) {
            expect(await tokenLocksOf(await pidOf("one-b"))).toBe(1);
            expect(await b.release(next as NonNullable<typeof next>)).toBe(true);
            previous = await a.acquire("one", { wait: false, signal });
            expect(previous?.token).toBe((next?.token ?? 0n) + 1n);
          } else previous = next;
          expect(await tokenLocksOf(await pidOf("one-a"))).toBe(1);
        }
      } finally {
        await a.close();
        await b.close();
        await own.close();
        await admin.end();
      }
    });

    it("locks work with connection settings that ask pg for its pipeline mode", async () => {
      const piped = new PostgresBackend({ config: { connectionString: url, pipeline: true } });
      const session = await piped.openSession({ ttlMs: 5_000, ownerId: "piped" });
      try {
        const signal = new AbortController().signal;
        const grant = await session.acquire("piped", { wait: false, signal });
        expect(grant?.token).toBeGreaterThan(0n);
        expect(await session.release(grant as NonNullable<typeof grant>)).toBe(true);
      } finally {
        await session.close();
        await piped.close();
      }
    });

    it("tokens and release answers stay right when the process sets pg type parsers for booleans and bigints", async () => {
      const { types } = pg;
      const bool = types.getTypeParser(types.builtins.BOOL, "text");
      const int8 = types.getTypeParser(types.builtins.INT8, "text");
      // What an application may set for its own queries: booleans as 1/0, bigints as numbers.
      types.setTypeParser(types.builtins.BOOL, (v: string) => (v === "t" ? 1 : 0));
      types.setTypeParser(types.builtins.INT8, (v: string) => Number(v));
      const session = await backend.openSession({ ttlMs: 5_000, ownerId: "parsers" });
      try {
        const signal = new AbortController().signal;
        for (const value of [undefined, "with-a-value"]) {
          const grant = await session.acquire("parsers", { wait: false, signal, value });
          expect(typeof grant?.token).toBe("bigint");
          expect(await session.holder("parsers")).toEqual({
            ownerId: "parsers",
            token: grant?.token,
            remainingMs: expect.any(Number),
            ...(value === undefined ? {} : { value }),
          });
          expect(await session.release(grant as NonNullable<typeof grant>)).toBe(true);
          expect(await session.release(grant as NonNullable<typeof grant>)).toBe(false);
        }
      } finally {
        types.setTypeParser(types.builtins.BOOL, bool);
        types.setTypeParser(types.builtins.INT8, int8);
        await session.close();
      }
    });
  });
});
