import { afterEach, describe, expect, it } from "vitest";
import {
  ConfigError,
  type Coordinator,
  createCoordinator,
  type Election,
  type Leader,
  MemoryBackend,
  type RevokedReason,
} from "../../src/index.js";
import { ScriptedBackend } from "../support/scripted-backend.js";

const open: Coordinator[] = [];
afterEach(async () => {
  await Promise.allSettled(open.splice(0).map((c) => c.close()));
});

function coordinators(n: number, backend = new MemoryBackend(), ttlMs = 300): Coordinator[] {
  const list = Array.from({ length: n }, (_, i) =>
    createCoordinator({ backend, ttlMs, ownerId: `node-${i}` }),
  );
  open.push(...list);
  return list;
}

const until = async (check: () => boolean, timeoutMs = 5_000) => {
  const started = performance.now();
  while (!check()) {
    if (performance.now() - started > timeoutMs) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 10));
  }
};

interface Log {
  elected: bigint[];
  revoked: { term: bigint; reason: RevokedReason }[];
  errors: unknown[];
}

function campaign(
  c: Coordinator,
  name: string,
  log: Log,
  onElected?: () => void | Promise<void>,
): Election {
  return c.elect(name, {
    value: c.ownerId,
    onElected: async ({ term }) => {
      log.elected.push(term);
      await onElected?.();
    },
    onRevoked: ({ term, reason }) => {
      log.revoked.push({ term, reason });
    },
    onError: (error) => log.errors.push(error),
  });
}

const newLog = (): Log => ({ elected: [], revoked: [], errors: [] });

describe("election", () => {
  it("5 instances: exactly one leader, and leader() and observe() agree everywhere", async () => {
    const cs = coordinators(5);
    const logs = cs.map(newLog);
    const elections = cs.map((c, i) => campaign(c, "scheduler", logs[i] as Log));
    await until(() => elections.some((e) => e.isLeader));
    await new Promise((r) => setTimeout(r, 400)); // more than a TTL: renewals keep one leader
    const leaders = elections.filter((e) => e.isLeader);
    expect(leaders).toHaveLength(1);
    const leader = leaders[0] as Election;
    const seen = await Promise.all(elections.map((e) => e.leader()));
    for (const l of seen)
      expect(l).toEqual({ ownerId: expect.any(String), value: l?.ownerId, term: leader.term });
    const observed = await Promise.all(
      elections.map(async (e) => {
        const controller = new AbortController();
        for await (const l of e.observe({ signal: controller.signal })) {
          controller.abort();
          return l;
        }
        return undefined;
      }),
    );
    for (const l of observed) expect(l?.term).toBe(leader.term);
    expect(logs.reduce((n, log) => n + log.elected.length, 0)).toBe(1); // once per term, not per renewal
  });

  it("resign() hands over to a follower with a greater term; onRevoked ran before it resolved", async () => {
    const [a, b] = coordinators(2);
    const la = newLog();
    const lb = newLog();
    const ea = campaign(a as Coordinator, "jobs", la);
    await until(() => ea.isLeader);
    const eb = campaign(b as Coordinator, "jobs", lb);
    const firstTerm = ea.term as bigint;
    const changes: (Leader | null)[] = [];
    const controller = new AbortController();
    const watching = (async () => {
      for await (const l of eb.observe({ signal: controller.signal })) changes.push(l);
    })();
    await ea.resign();
    expect(la.revoked).toEqual([{ term: firstTerm, reason: "resigned" }]);
    await until(() => eb.isLeader);
    expect(eb.term as bigint).toBeGreaterThan(firstTerm);
    await until(() => changes.at(-1)?.term === eb.term);
    controller.abort();
    await watching;
    expect(changes.map((l) => l?.ownerId)).toContain("node-1");
  });

  it("close() stops campaigning, revokes a started term once, and no callback fires after it resolves", async () => {
    const [a, b] = coordinators(2);
    const la = newLog();
    const lb = newLog();
    const ea = campaign(a as Coordinator, "jobs", la);
    await until(() => ea.isLeader);
    const eb = campaign(b as Coordinator, "jobs", lb);
    await ea.close();
    expect(la.revoked).toMatchObject([{ reason: "closed" }]);
    const snapshot = JSON.stringify(la, (_k, v) => (typeof v === "bigint" ? `${v}` : v));
    await until(() => eb.isLeader);
    await new Promise((r) => setTimeout(r, 400));
    expect(JSON.stringify(la, (_k, v) => (typeof v === "bigint" ? `${v}` : v))).toBe(snapshot);
    expect(ea.isLeader).toBe(false);
    // A follower that never led gets no onRevoked when closed.
    const c = coordinators(1, undefined)[0] as Coordinator;
    const lc = newLog();
    const ec = campaign(c, "other-jobs-that-b-does-not-hold", lc);
    await until(() => ec.isLeader);
    await eb.close();
    expect(lb.revoked).toMatchObject([{ reason: "closed" }]);
    await ec.close();
    expect(lc.elected).toHaveLength(1);
  });

  it("a follower that never led is never revoked", async () => {
    const [a, b] = coordinators(2);
    const la = newLog();
    const lb = newLog();
    const ea = campaign(a as Coordinator, "jobs", la);
    await until(() => ea.isLeader);
    const eb = campaign(b as Coordinator, "jobs", lb);
    await new Promise((r) => setTimeout(r, 100));
    await eb.close();
    expect(lb.elected).toEqual([]);
    expect(lb.revoked).toEqual([]);
  });

  it("a lost lease ends the term (reason deadline), aborts its signal, and the instance campaigns again", async () => {
    const backend = new ScriptedBackend();
    const [a] = coordinators(1, backend as unknown as MemoryBackend, 300);
    const termSignals: AbortSignal[] = [];
    const log = newLog();
    const e = (a as Coordinator).elect("jobs", {
      onElected: ({ signal, term }) => {
        termSignals.push(signal);
        log.elected.push(term);
      },
      onRevoked: (info) => {
        log.revoked.push(info);
      },
    });
    await until(() => e.isLeader);
    let failing = true;
    backend.hooks.keepAlive = async (_session, next) => {
      if (failing) throw new Error("ECONNRESET");
      return await next();
    };
    await until(() => log.revoked.length === 1);
    expect(log.revoked[0]?.reason).toBe("deadline");
    expect(termSignals[0]?.aborted).toBe(true);
    failing = false;
    await until(() => e.isLeader && log.elected.length >= 2);
    expect(log.elected[1] as bigint).toBeGreaterThan(log.elected[0] as bigint);
  });

  it("onElected that throws steps down with reason failed and reports the error", async () => {
    const [a, b] = coordinators(2);
    const la = newLog();
    const lb = newLog();
    const boom = new Error("scheduler failed to start");
    let first = true;
    const ea = campaign(a as Coordinator, "jobs", la, () => {
      if (first) {
        first = false;
        throw boom;
      }
    });
    await until(() => la.revoked.length === 1);
    expect(la.revoked[0]?.reason).toBe("failed");
    expect(la.errors).toEqual([boom]);
    const eb = campaign(b as Coordinator, "jobs", lb);
    await until(() => ea.isLeader || eb.isLeader);
  });

  it("bad options are a ConfigError naming the field", () => {
    const [a] = coordinators(1);
    const c = a as Coordinator;
    expect(() => c.elect("", { onElected: () => undefined })).toThrow(ConfigError);
    expect(() => c.elect("x", {} as never)).toThrow(
      expect.objectContaining({ field: "onElected" }),
    );
    expect(() => c.elect("x", { onElected: () => undefined, onRevoked: 5 } as never)).toThrow(
      expect.objectContaining({ field: "onRevoked" }),
    );
    expect(() => c.elect("x", { onElected: () => undefined, color: "red" } as never)).toThrow(
      expect.objectContaining({ field: "options.color" }),
    );
  });

  it("closing the coordinator closes its elections", async () => {
    const [a] = coordinators(1);
    const log = newLog();
    const e = campaign(a as Coordinator, "jobs", log);
    await until(() => e.isLeader);
    await (a as Coordinator).close();
    expect(e.isLeader).toBe(false);
    expect(log.revoked).toMatchObject([{ reason: "closed" }]);
  });
});
