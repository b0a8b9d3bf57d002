import { randomUUID } from "node:crypto";
import { getEventListeners } from "node:events";
import { describeBackend } from "@baton/conformance/harness";
import mysql from "mysql2/promise";
import { afterEach, describe, expect, it } from "vitest";
import { resolveMysqlOptions } from "../src/mysql-options.js";
import { namedLockStatements } from "../src/named-lock-statements.js";
import { NamedLockWaiters } from "../src/named-lock-waiters.js";

describeBackend("mysql", (url) => {
  describe("mysql named-lock waiter connections", () => {
    const made: NamedLockWaiters[] = [];
    const waiters = () => {
      const options = resolveMysqlOptions({ url });
      const statements = namedLockStatements({ tokens: "t", tokenRow: 1, holders: "h" });
      const w = new NamedLockWaiters(options.connection, statements.waitUntilFree);
      made.push(w);
      return w;
    };
    afterEach(async () => {
      await Promise.allSettled(made.splice(0).map((w) => w.close()));
    });

    it("waits that end leave no listener on the caller's signal, however many there were", async () => {
      const w = waiters();
      const signal = new AbortController().signal;
      const name = `free-${randomUUID()}`;
      for (let i = 0; i < 30; i++) expect(await w.waitUntilFree(name, 5, signal)).toBe(true);
      expect(getEventListeners(signal, "abort")).toHaveLength(0);
    });

    it("a wait aborted while the lock is held elsewhere rejects with the signal's reason, its listener gone", async () => {
      const w = waiters();
      const name = `held-${randomUUID()}`;
      const holder = await mysql.createConnection(url);
      try {
        await holder.query("SELECT GET_LOCK(?, 5)", [name]);
        const controller = new AbortController();
        const reason = new Error("stop waiting");
        const waiting = w.waitUntilFree(name, 20, controller.signal);
        setTimeout(() => controller.abort(reason), 100);
        const t = performance.now();
        await expect(waiting).rejects.toBe(reason);
        expect(performance.now() - t).toBeLessThan(10_000);
        expect(getEventListeners(controller.signal, "abort")).toHaveLength(0);
      } finally {
        await holder.end();
      }
    });
  });
});
