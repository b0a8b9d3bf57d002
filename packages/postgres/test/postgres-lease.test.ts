import { randomUUID } from "node:crypto";
import { expectLooksSoonAfterChange } from "@baton/conformance";
import { TcpProxy } from "@baton/conformance/faults";
import { describeBackend } from "@baton/conformance/harness";
import { ConfigError, createCoordinator, parseBackendUrl, SessionLostError } from "@baton/core";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { DEFAULT_POOL_SIZE, PostgresBackend, postgresOptionsFromUrl } from "../src/index.js";

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

  it("defaults to 16, is set by option or URL, and anything but 1 to 1000 is a ConfigError naming it", () => {
    expect(DEFAULT_POOL_SIZE).toBe(16);
    expect(new PostgresBackend({ url: "postgres://h/db" }).options.poolSize).toBe(16);
    expect(new PostgresBackend({ url: "postgres://h/db", poolSize: 4 }).options.poolSize).toBe(4);
    expect(new PostgresBackend({ url: "postgres://h/db?pool_size=3" }).options.poolSize).toBe(3);
    expect(postgresOptionsFromUrl(parseBackendUrl("postgres://h/db?pool_size=8")).poolSize).toBe(8);
    for (const bad of [0, 1.5, -1, 1_001, "8" as never, Number.NaN]) {
      const error = (() => {
        try {
          new PostgresBackend({ url: "postgres://h/db", poolSize: bad });
        } catch (e) {
          return e;
        }
      })();
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).field).toBe("poolSize");
    }
    for (const bad of ["0", "x", "1001", "2.5", ""]) {
      expect(() => new PostgresBackend({ url: `postgres://h/db?pool_size=${bad}` })).toThrow(
        /"pool_size" must be a whole number from 1 to 1000/,
      );
    }
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

    it("a waiter that sees the name change hands looks again soon, and looks less often while one grant lasts", async () => {
      // A schema of its own: no other test takes tokens from its sequence meanwhile.
      const schema = `looks_${randomUUID().slice(0, 8)}`;
      const backend = new PostgresBackend({ url, schema });
      closers.push(async () => {
        await backend.close();
        const admin = new pg.Client({ connectionString: bouncer() });
        await admin.connect();
        await admin.query(`DROP SCHEMA ${schema} CASCADE`).finally(() => admin.end());
      });
      await expectLooksSoonAfterChange(backend);
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

    it("concurrent callers share at most poolSize connections and all get their locks with distinct tokens", async () => {
      const target = new URL(url);
      const proxy = await TcpProxy.start({ host: target.hostname, port: Number(target.port) });
      closers.push(() => proxy.close());
      const proxied = new URL(url);
      proxied.port = String(proxy.port);
      const backend = new PostgresBackend({ url: proxied.toString(), poolSize: 3 });
      closers.push(() => backend.close());
      const session = await backend.openSession({ ttlMs: 10_000, ownerId: "pool-size" });
      closers.push(() => session.close());
      const signal = new AbortController().signal;
      const names = Array.from({ length: 64 }, (_, i) => `pooled-${i}-${randomUUID()}`);
      let most = 0;
      const sampler = setInterval(() => {
        most = Math.max(most, proxy.connections);
      }, 1);
      try {
        const grants = await Promise.all(
          names.map((n) => session.acquire(n, { wait: false, signal })),
        );
        expect(grants.every((g) => g !== null)).toBe(true);
        expect(new Set(grants.map((g) => g?.token)).size).toBe(names.length);
        await Promise.all(grants.map((g) => (g === null ? false : session.release(g))));
      } finally {
        clearInterval(sampler);
      }
      most = Math.max(most, proxy.connections);
      // The pool's 3, and at most 2 more for the schema check when the first session opened.
      expect(most).toBeGreaterThan(0);
      expect(most).toBeLessThanOrEqual(3 + 2);
    });
  });
});
