import { randomUUID } from "node:crypto";
import { Socket } from "node:net";
import { TcpProxy } from "@baton/conformance/faults";
import { describeBackend } from "@baton/conformance/harness";
import { createCoordinator, type Grant } from "@baton/core";
import pg from "pg";
import { afterEach, describe, expect, it, vi } from "vitest";
import { PostgresBackend } from "../src/index.js";
import { named } from "./application-name.js";

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describeBackend("postgres", (url) => {
  describe("postgres: one coordinator, many callers", () => {
    const closers: (() => Promise<unknown>)[] = [];
    afterEach(async () => {
      for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
    });
    const admin = async () => {
      const client = new pg.Client({ connectionString: url });
      client.on("error", () => undefined);
      await client.connect();
      closers.push(() => client.end());
      return client;
    };

    it("the statements of concurrent callers reach the server without waiting for each other's answers, in order", async () => {
      const target = new URL(url);
      const proxy = await TcpProxy.start({ host: target.hostname, port: Number(target.port) });
      closers.push(() => proxy.close());
      const proxied = new URL(url);
      proxied.port = String(proxy.port);
      const backend = new PostgresBackend({ url: proxied.toString() });
      closers.push(() => backend.close());
      const owner = `pipelined-${randomUUID()}`;
      const session = await backend.openSession({ ttlMs: 60_000, ownerId: owner });
      closers.push(() => session.close());
      const db = await admin();
      const pid = Number(
        (await db.query("SELECT pid FROM baton.sessions WHERE owner = $1", [owner])).rows[0].pid,
      );
      const heldBy = async () =>
        Number(
          (
            await db.query(
              "SELECT count(*)::int AS n FROM pg_locks WHERE pid = $1 AND locktype = 'advisory' AND objsubid = 1 AND granted",
              [pid],
            )
          ).rows[0].n,
        );
      // Every answer now comes back 5 s late: a caller that waited for the answer before it
      // would have sent one statement in that time.
      proxy.delayReplies(5_000);
      const signal = new AbortController().signal;
      const names = Array.from({ length: 16 }, (_, i) => `pipelined-${i}-${randomUUID()}`);
      const grants = Promise.all(names.map((n) => session.acquire(n, { wait: false, signal })));
      let held = 0;
      for (let i = 0; i < 40 && held < names.length; i++) {
        await delay(100);
        held = await heldBy();
      }
      // All 16 ran in the server before the first answer reached the client.
      expect(held).toBe(names.length);
      const granted = await grants;
      const tokens = granted.map((g) => g?.token ?? 0n);
      // In the order they were sent: each token above the one before.
      for (let i = 1; i < tokens.length; i++) {
        expect(tokens[i]).toBeGreaterThan(tokens[i - 1] as bigint);
      }
    }, 30_000);

    it("a lone caller's statement is written before its turn ends; those of callers in one turn share a write", async () => {
      const backend = new PostgresBackend({ url });
      closers.push(() => backend.close());
      const session = await backend.openSession({
        ttlMs: 60_000,
        ownerId: `writes-${randomUUID()}`,
      });
      closers.push(() => session.close());
      const signal = new AbortController().signal;
      const name = () => `writes-${randomUUID()}`;
      // Once the session's statements are prepared.
      await session.release((await session.acquire(name(), { wait: false, signal })) as Grant);
      const writes = vi.spyOn(Socket.prototype, "_write");
      const batches = vi.spyOn(Socket.prototype, "_writev");
      closers.push(async () => {
        writes.mockRestore();
        batches.mockRestore();
      });
      const count = () => writes.mock.calls.length + batches.mock.calls.length;
      const lone = session.acquire(name(), { wait: false, signal });
      // Still in the caller's turn: the statement is on its way while the caller goes on.
      expect(count()).toBe(1);
      const grant = await lone;
      expect(grant).not.toBeNull();
      writes.mockClear();
      batches.mockClear();
      const releasing = session.release(grant as Grant);
      expect(count()).toBe(1);
      expect(await releasing).toBe(true);
      writes.mockClear();
      batches.mockClear();
      // Eight callers in one turn: the first at once, the other seven in one write.
      const grants = await Promise.all(
        Array.from({ length: 8 }, () => session.acquire(name(), { wait: false, signal })),
      );
      expect(grants.every((g) => g !== null)).toBe(true);
      expect(count()).toBe(2);
      await Promise.all(grants.map((g) => session.release(g as Grant)));
    });

    it("hundreds of concurrent callers all get their locks with distinct tokens, on one session connection", async () => {
      const app = `one-connection-${randomUUID().slice(0, 8)}`;
      const coordinator = createCoordinator({ url: named(url, app), ttlMs: 10_000 });
      closers.push(() => coordinator.close());
      const db = await admin();
      const holding = async () =>
        (
          await db.query(
            `SELECT count(DISTINCT a.pid)::int AS n FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
             WHERE a.application_name = $1 AND l.locktype = 'advisory'`,
            [app],
          )
        ).rows[0].n as number;
      const callers = 200;
      const names = Array.from({ length: callers }, (_, i) => `many-${i}-${randomUUID()}`);
      const locks = await Promise.all(names.map((n) => coordinator.acquire(n, { waitMs: 30_000 })));
      expect(new Set(locks.map((l) => l.token)).size).toBe(callers);
      // Every one of them is held by the one connection of the coordinator's session.
      expect(await holding()).toBe(1);
      const held = Number(
        (
          await db.query(
            `SELECT count(*)::int AS n FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
             WHERE a.application_name = $1 AND l.locktype = 'advisory' AND l.objsubid = 1`,
            [app],
          )
        ).rows[0].n,
      );
      expect(held).toBe(callers);
      await Promise.all(locks.map((l) => l.release()));
      await coordinator.close();
      // Closing the coordinator ends its connections.
      const left = async () =>
        Number(
          (
            await db.query(
              "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1",
              [app],
            )
          ).rows[0].n,
        );
      let open = await left();
      for (let i = 0; i < 50 && open > 0; i++) {
        await delay(100);
        open = await left();
      }
      expect(open).toBe(0);
    }, 60_000);
  });
});
