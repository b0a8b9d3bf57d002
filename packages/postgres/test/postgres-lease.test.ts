import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import { ConfigError, createCoordinator, parseBackendUrl, SessionLostError } from "@baton/core";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { PostgresBackend, postgresOptionsFromUrl } from "../src/index.js";

describe("postgres row-lease options (no I/O)", () => {
  it("locks is advisory by default, lease by option or URL, anything else a ConfigError", () => {
    expect(new PostgresBackend({ url: "postgres://h/db" }).options.locks).toBe("advisory");
    expect(new PostgresBackend({ url: "postgres://h/db?locks=lease" }).options.locks).toBe("lease");
    expect(new PostgresBackend({ url: "postgres://h/db", locks: "lease" }).options.locks).toBe(
      "lease",
    );
    expect(postgresOptionsFromUrl(parseBackendUrl("postgres://h/db?locks=lease")).locks).toBe(
      "lease",
    );
    expect(() => new PostgresBackend({ url: "postgres://h/db?locks=rows" })).toThrow(
      /"locks" must be one of advisory, lease/,
    );
    expect(() => new PostgresBackend({ url: "postgres://h/db", locks: "rows" as never })).toThrow(
      ConfigError,
    );
  });
});

describeBackend("postgres-lease", (url) => {
  /** PgBouncer's URL without the mode: what a user of the advisory mode would pass. */
  const bouncer = () => url.replace(/[?&]locks=lease/, "");
  const closers: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
  });

  describe("through PgBouncer in transaction pooling mode", () => {
    it("the advisory mode is refused at the first session, naming the pooler and the row-lease mode", async () => {
      const coordinator = createCoordinator({ url: bouncer(), ttlMs: 1_000 });
      closers.push(() => coordinator.close());
      const error = await coordinator.acquire(`refused-${randomUUID()}`).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).message).toMatch(/pooler in transaction mode/);
      expect((error as ConfigError).message).toMatch(/locks=lease/);
    });

    it("renews a session holding 100 locks with one statement per interval", async () => {
      const backend = new PostgresBackend({ url });
      closers.push(() => backend.close());
      const session = await backend.openSession({ ttlMs: 3_000, ownerId: "many" });
      const signal = new AbortController().signal;
      for (let i = 0; i < 100; i++) {
        expect(await session.acquire(`many-${i}`, { wait: false, signal })).not.toBeNull();
      }
      const query = pg.Client.prototype.query;
      let sent = 0;
      pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
        sent++;
        return (query as (...a: unknown[]) => unknown).apply(this, args);
      } as typeof query;
      try {
        await session.keepAlive();
      } finally {
        pg.Client.prototype.query = query;
      }
      expect(sent).toBe(1);
      await session.close();
    });

    it("a session whose renewals stop loses its locks to the next acquirer after the TTL, with a greater token, and learns it on its next renewal", async () => {
      const backend = new PostgresBackend({ url });
      closers.push(() => backend.close());
      const signal = new AbortController().signal;
      const name = `expired-${randomUUID()}`;
      const stale = await backend.openSession({ ttlMs: 1_000, ownerId: "stale" });
      const next = await backend.openSession({ ttlMs: 10_000, ownerId: "next" });
      const first = await stale.acquire(name, { wait: false, signal });
      expect(first).not.toBeNull();
      expect(await next.acquire(name, { wait: false, signal })).toBeNull();
      const started = performance.now();
      const second = await next.acquire(name, { wait: true, signal });
      const waitedMs = performance.now() - started;
      expect(second?.token).toBeGreaterThan(first?.token ?? 0n);
      expect(waitedMs).toBeGreaterThan(500);
      expect(waitedMs).toBeLessThan(10_000);
      await expect(stale.keepAlive()).rejects.toBeInstanceOf(SessionLostError);
      expect((await next.holder(name))?.ownerId).toBe("next");
      await next.close();
    });

    it("a closed session frees every lock it held at once", async () => {
      const backend = new PostgresBackend({ url });
      closers.push(() => backend.close());
      const signal = new AbortController().signal;
      const a = await backend.openSession({ ttlMs: 10_000, ownerId: "a" });
      const b = await backend.openSession({ ttlMs: 10_000, ownerId: "b" });
      const names = [0, 1, 2].map((i) => `closed-${i}-${randomUUID()}`);
      for (const name of names)
        expect(await a.acquire(name, { wait: false, signal })).not.toBeNull();
      await a.close();
      for (const name of names)
        expect(await b.acquire(name, { wait: false, signal })).not.toBeNull();
      await b.close();
    });
  });
});
