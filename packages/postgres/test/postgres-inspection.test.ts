import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import type { BackendSession, Grant, KeySpace } from "@baton/core";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { PostgresBackend } from "../src/index.js";

const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
});

const signal = new AbortController().signal;

/** Resolves once `check()` resolves true; fails after `ms`. */
async function until(check: () => Promise<boolean> | boolean, ms = 15_000): Promise<void> {
  for (const started = Date.now(); !(await check()); ) {
    if (Date.now() - started > ms) throw new Error("timed out");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Every key of `space` with `prefix`, a page of `limit` at a time, and the pages' sizes. */
async function listAll(
  session: BackendSession,
  space: KeySpace,
  prefix: string,
  limit: number,
): Promise<{ keys: string[]; pages: number[] }> {
  const keys: string[] = [];
  const pages: number[] = [];
  let cursor: string | undefined;
  do {
    const page = await (session.listKeys as NonNullable<BackendSession["listKeys"]>)({
      space,
      prefix,
      limit,
      signal,
      ...(cursor === undefined ? {} : { cursor }),
    });
    keys.push(...page.keys);
    pages.push(page.keys.length);
    cursor = page.cursor;
  } while (cursor !== undefined);
  return { keys, pages };
}

/** The inspection tests, for the advisory mode and the row-lease mode. */
function inspectionTests(mode: "advisory" | "lease", url: string): void {
  const lease = mode === "lease";
  async function backend(): Promise<PostgresBackend> {
    const made = new PostgresBackend({ url, schema: `inspect_${randomUUID().slice(0, 8)}` });
    closers.push(() => made.close());
    return made;
  }
  async function session(of: PostgresBackend, ownerId: string, ttlMs = 10_000) {
    const opened = await of.openSession({ ttlMs, ownerId });
    closers.push(() => opened.close());
    return opened;
  }
  const inspect = (s: BackendSession, space: "lock" | "permit", key: string) =>
    (s.inspectKey as NonNullable<BackendSession["inspectKey"]>)(space, key);
  const forceRelease = (s: BackendSession, key: string, token: bigint, reason: string) =>
    (s.forceRelease as NonNullable<BackendSession["forceRelease"]>)("lock", key, {
      token,
      reason,
      signal,
    });

  it("declares inspection and what a forced release frees", async () => {
    const b = await backend();
    expect(b.guarantees.inspection).toBe(true);
    expect(b.guarantees.forceRelease).toBe("grant");
  });

  it("lists held locks and records by prefix, a page at a time", async () => {
    const b = await backend();
    const holder = await session(b, "holder");
    const observer = await session(b, "observer");
    const names = ["jobs/a", "jobs/b", "jobs/c", "jobs/d", "jobs/e", "other/x"];
    for (const name of names) {
      expect(await holder.acquire(name, { wait: false, signal })).not.toBeNull();
    }
    // A lock's name reaches the list with its holder's next renewal.
    await holder.keepAlive();
    expect(await listAll(observer, "lock", "jobs/", 2)).toEqual({
      keys: ["jobs/a", "jobs/b", "jobs/c", "jobs/d", "jobs/e"],
      pages: [2, 2, 1],
    });
    expect((await listAll(observer, "lock", "", 1000)).keys).toEqual(names);
    expect((await listAll(observer, "lock", "nothing/", 10)).keys).toEqual([]);

    for (const key of ["runs/1", "runs/2", "runs/3", "slots/1"]) {
      expect(await observer.writeRecord?.(key, "{}", null)).not.toBeNull();
    }
    expect(await listAll(observer, "record", "runs/", 2)).toEqual({
      keys: ["runs/1", "runs/2", "runs/3"],
      pages: [2, 1],
    });
    // Another namespace lists none of them.
    const elsewhere = new PostgresBackend({
      url,
      schema: b.options.schema,
      namespace: "elsewhere",
    });
    closers.push(() => elsewhere.close());
    expect((await listAll(await session(elsewhere, "x"), "lock", "", 100)).keys).toEqual([]);
  });

  it("inspects a held lock: owner, token, value, time left (and, row leases, time held); null once released", async () => {
    const b = await backend();
    const holder = await session(b, "holder");
    const observer = await session(b, "observer");
    const name = `held-${randomUUID()}`;
    expect(await inspect(observer, "lock", name)).toBeNull();
    for (const value of ["v", undefined]) {
      const grant = (await holder.acquire(name, {
        wait: false,
        signal,
        ...(value === undefined ? {} : { value }),
      })) as Grant;
      const state = await inspect(observer, "lock", name);
      expect(state?.holders).toHaveLength(1);
      const [h] = state?.holders ?? [];
      expect(h?.ownerId).toBe("holder");
      expect(h?.token).toBe(grant.token);
      expect(h?.value).toBe(value);
      expect(h?.remainingMs).toBeGreaterThan(0);
      expect(h?.remainingMs).toBeLessThanOrEqual(10_000);
      if (lease) {
        // The lease row keeps its grant time (the server's clock).
        await new Promise((resolve) => setTimeout(resolve, 300));
        const later = (await inspect(observer, "lock", name))?.holders[0];
        expect(later?.heldMs).toBeGreaterThanOrEqual(250);
        expect(later?.heldMs).toBeLessThan(60_000);
      } else {
        // The advisory mode stores no grant time.
        expect(h?.heldMs).toBeUndefined();
      }
      expect(await holder.release(grant)).toBe(true);
      expect(await inspect(observer, "lock", name)).toBeNull();
    }
  });

  it("an expired lock inspects as free", async () => {
    const b = await backend();
    // Nobody renews this session: its lease (advisory: its connection) ends after the TTL.
    const holder = await session(b, "frozen", 1_000);
    const observer = await session(b, "observer");
    const name = `expired-${randomUUID()}`;
    expect(await holder.acquire(name, { wait: false, signal })).not.toBeNull();
    expect((await inspect(observer, "lock", name))?.holders[0]?.ownerId).toBe("frozen");
    await until(async () => (await inspect(observer, "lock", name)) === null);
  });

  it("a forced release frees the grant by token, the waiter takes it with a greater token, and the holder's renewal reports it revoked", async () => {
    const b = await backend();
    const holder = await session(b, "holder");
    const waiter = await session(b, "waiter");
    const operator = await session(b, "operator");
    const name = `stuck-${randomUUID()}`;
    const grant = (await holder.acquire(name, { wait: false, signal })) as Grant;
    await holder.keepAlive();
    const waiting = waiter.acquire(name, { wait: true, signal });
    if (!lease) {
      // The waiter waits at the server, on its session's own connection.
      await until(
        async () => (await inspect(operator, "lock", name))?.waiters?.ownerIds?.[0] === "waiter",
      );
      expect((await inspect(operator, "lock", name))?.waiters?.count).toBe(1);
    }
    // An older token frees nothing.
    expect(await forceRelease(operator, name, grant.token - 1n, "wrong grant")).toBe(false);
    expect((await inspect(operator, "lock", name))?.holders[0]?.token).toBe(grant.token);

    const started = Date.now();
    expect(await forceRelease(operator, name, grant.token, "stuck since the deploy")).toBe(true);
    // The holder's next renewal reports it (and, in the advisory mode, lets go of it).
    expect(await holder.keepAlive()).toEqual({
      revoked: [{ space: "lock", key: name, token: grant.token, reason: "stuck since the deploy" }],
    });
    const next = (await waiting) as Grant;
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(next.ownerId).toBe("waiter");
    expect(next.token).toBeGreaterThan(grant.token);
    expect((await inspect(operator, "lock", name))?.holders[0]?.token).toBe(next.token);
    // Reported once; the revoked grant is no longer the holder's to release or to free.
    expect(await holder.keepAlive()).toBeUndefined();
    expect(await holder.release(grant)).toBe(false);
    expect(await forceRelease(operator, name, grant.token, "again")).toBe(false);
    expect((await inspect(operator, "lock", name))?.holders[0]?.ownerId).toBe("waiter");
    // The holder can take the lock again later, with a greater token still.
    expect(await waiter.release(next)).toBe(true);
    const again = (await holder.acquire(name, { wait: false, signal })) as Grant;
    expect(again.token).toBeGreaterThan(next.token);
  });

  it("a forced release of a lock nobody holds, or of an expired one, resolves false", async () => {
    const b = await backend();
    const holder = await session(b, "frozen", 1_000);
    const operator = await session(b, "operator");
    const name = `gone-${randomUUID()}`;
    expect(await forceRelease(operator, name, 1n, "nobody")).toBe(false);
    const grant = (await holder.acquire(name, { wait: false, signal })) as Grant;
    await until(async () => (await inspect(operator, "lock", name)) === null);
    expect(await forceRelease(operator, name, grant.token, "expired")).toBe(false);
  });

  it("a schema from before inspection: locks work, listing and forced release say to run migrate(), and the next backend that may create adds the tables", async () => {
    const b = await backend();
    const schema = b.options.schema;
    // The first session creates the schema.
    await session(b, "first");
    await b.close();
    const pool = new pg.Pool({ connectionString: url.replace(/[?&]locks=lease/, "") });
    closers.push(() => pool.end());
    // As an older release left it: no tables of inspection, leases without their grant time.
    await pool.query(
      `DROP TABLE "${schema}".lock_names, "${schema}".revocations, "${schema}".lease_revocations;
       ALTER TABLE "${schema}".leases DROP COLUMN granted_at`,
    );
    const old = new PostgresBackend({ url, schema, migrate: false });
    closers.push(() => old.close());
    const [holder, waiter] = [await session(old, "holder"), await session(old, "waiter")];
    const name = `old-${randomUUID()}`;
    const grant = (await holder.acquire(name, { wait: false, signal })) as Grant;
    expect(await holder.keepAlive()).toBeUndefined();
    expect((await inspect(waiter, "lock", name))?.holders[0]?.token).toBe(grant.token);
    await expect(listAll(waiter, "lock", "", 10)).rejects.toThrow(/run migrate\(\)/);
    await expect(forceRelease(waiter, name, grant.token, "old")).rejects.toThrow(/run migrate\(\)/);
    expect(await holder.release(grant)).toBe(true);

    const upgraded = new PostgresBackend({ url, schema });
    closers.push(() => upgraded.close());
    const [h2, o2] = [await session(upgraded, "holder"), await session(upgraded, "observer")];
    const again = (await h2.acquire(name, { wait: false, signal })) as Grant;
    await h2.keepAlive();
    expect((await listAll(o2, "lock", "", 10)).keys).toEqual([name]);
    if (lease) {
      // Rows from before the column have no grant time; new ones do.
      expect((await inspect(o2, "lock", name))?.holders[0]?.heldMs).toBeGreaterThanOrEqual(0);
    }
    expect(await forceRelease(o2, name, again.token, "upgraded")).toBe(true);
    expect((await h2.keepAlive())?.revoked?.[0]?.reason).toBe("upgraded");
  });

  if (!lease) {
    it("inspects and lists permit keys: holders with their permits, waiters in order, the limit", async () => {
      const b = await backend();
      const [a, c, d] = await Promise.all(["a", "c", "d"].map((o) => session(b, o)));
      const observer = await session(b, "observer");
      const name = `pool-${randomUUID()}`;
      const options = { wait: false, signal, limit: 3, permits: 2, mode: "permit" } as const;
      const first = (await a?.acquirePermits?.(name, options)) as Grant;
      expect(first).not.toBeNull();
      const waitingC = c?.acquirePermits?.(name, { ...options, wait: true });
      await until(async () => (await inspect(observer, "permit", name))?.waiters?.count === 1);
      const waitingD = d?.acquirePermits?.(name, { ...options, permits: 1, wait: true });
      await until(async () => (await inspect(observer, "permit", name))?.waiters?.count === 2);
      const state = await inspect(observer, "permit", name);
      expect(state?.limit).toBe(3);
      expect(state?.holders).toEqual([
        { ownerId: "a", token: first.token, permits: 2, mode: "permit" },
      ]);
      expect(state?.waiters).toEqual({ count: 2, ownerIds: ["c", "d"] });
      expect((await listAll(observer, "permit", "pool-", 10)).keys).toEqual([name]);
      expect(await a?.release(first)).toBe(true);
      const [gc, gd] = (await Promise.all([waitingC, waitingD])) as Grant[];
      expect((await inspect(observer, "permit", name))?.holders.map((h) => h.ownerId)).toEqual([
        "c",
        "d",
      ]);
      await c?.release(gc as Grant);
      await d?.release(gd as Grant);
      expect(await inspect(observer, "permit", name)).toBeNull();
    });

    it("a forced release of a permit grant frees its permits for the waiter at once and the holder's renewal reports it revoked", async () => {
      const b = await backend();
      const [holder, waiter, operator] = await Promise.all(
        ["holder", "waiter", "operator"].map((o) => session(b, o)),
      );
      const name = `pool-${randomUUID()}`;
      const options = { wait: false, signal, limit: 1, permits: 1, mode: "permit" } as const;
      const grant = (await holder?.acquirePermits?.(name, options)) as Grant;
      const waiting = waiter?.acquirePermits?.(name, { ...options, wait: true });
      await until(
        async () =>
          (await inspect(operator as BackendSession, "permit", name))?.waiters?.count === 1,
      );
      const release = (token: bigint, reason: string) =>
        (operator as BackendSession).forceRelease?.("permit", name, { token, reason, signal });
      expect(await release(grant.token - 1n, "wrong grant")).toBe(false);
      expect(await release(grant.token, "stuck pool")).toBe(true);
      // The waiter is granted at once, before the holder's renewal.
      const next = (await waiting) as Grant;
      expect(next.token).toBeGreaterThan(grant.token);
      expect(await holder?.keepAlive()).toEqual({
        revoked: [{ space: "permit", key: name, token: grant.token, reason: "stuck pool" }],
      });
      expect(await holder?.keepAlive()).toBeUndefined();
      expect(await holder?.release(grant)).toBe(false);
      expect(await release(grant.token, "again")).toBe(false);
      expect((await inspect(operator as BackendSession, "permit", name))?.holders).toEqual([
        { ownerId: "waiter", token: next.token, permits: 1, mode: "permit" },
      ]);
    });
  } else {
    it("has no permit keys", async () => {
      const b = await backend();
      const observer = await session(b, "observer");
      expect(await listAll(observer, "permit", "", 10)).toEqual({ keys: [], pages: [0] });
      expect(await inspect(observer, "permit", "any")).toBeNull();
    });
  }
}

describeBackend("postgres", (url) => {
  describe("inspection and forced release (advisory locks)", () => {
    inspectionTests("advisory", url);
  });
});

describeBackend("postgres-lease", (url) => {
  describe("inspection and forced release (row leases)", () => {
    inspectionTests("lease", url);
  });
});
