import "reflect-metadata";
import { randomUUID } from "node:crypto";
import { setTimeout as delay } from "node:timers/promises";
import { describeBackend } from "@baton/conformance/harness";
import { type Coordinator, CoordinatorClosedError, type TermContext } from "@baton/core";
import { type INestApplicationContext, Injectable, Module } from "@nestjs/common";
import { NestFactory } from "@nestjs/core";
import { Cron, ScheduleModule } from "@nestjs/schedule";
import { afterEach, describe, expect, it } from "vitest";
import { BATON_COORDINATOR, BatonModule, currentLock, Leader, RunOnce } from "../src/index.js";
import { Accounts, appModule, Journal, startContext, startHttp, Worker } from "./app-fixtures.js";

const apps: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.allSettled(apps.splice(0).map((app) => app.close()));
});

async function waitFor(what: string, check: () => boolean, ms = 20_000): Promise<void> {
  const until = performance.now() + ms;
  while (!check()) {
    if (performance.now() > until) throw new Error(`timed out waiting for ${what}`);
    await delay(20);
  }
}

/** No two entries of `locked` for one key overlap in time. */
function overlaps(entries: { enteredAt: number; leftAt: number }[]): number {
  const sorted = [...entries].sort((a, b) => a.enteredAt - b.enteredAt);
  let count = 0;
  for (let i = 1; i < sorted.length; i++) {
    if ((sorted[i]?.enteredAt ?? 0) < (sorted[i - 1]?.leftAt ?? 0)) count++;
  }
  return count;
}

describe("BatonModule", () => {
  it("provides one coordinator by token, and closes it when the application closes", async () => {
    const journal = new Journal();
    const app = await startContext({ url: "memory://" }, journal, ["accounts"]);
    const coordinator = app.get<Coordinator>(BATON_COORDINATOR);
    expect(app.get(Accounts).coordinator).toBe(coordinator);
    await coordinator.withLock("probe", () => undefined);
    await app.close();
    await expect(coordinator.acquire("probe")).rejects.toBeInstanceOf(CoordinatorClosedError);
  });

  it("forRootAsync makes the options with a factory that injects a configuration provider", async () => {
    @Injectable()
    class Settings {
      get(key: string): string | undefined {
        return { BATON_URL: "memory://", BATON_TTL_MS: "4000" }[key];
      }
    }
    @Module({ providers: [Settings], exports: [Settings] })
    class SettingsModule {}

    const baton = BatonModule.forRootAsync({
      imports: [SettingsModule],
      inject: [Settings],
      useFactory: async (settings: Settings) => ({
        url: settings.get("BATON_URL") as string,
        ttlMs: Number(settings.get("BATON_TTL_MS")),
      }),
    });
    const app = await NestFactory.createApplicationContext(
      appModule(baton, new Journal(), ["accounts"]),
      { logger: false },
    );
    apps.push(app);
    expect(app.get<Coordinator>(BATON_COORDINATOR).ttlMs).toBe(4_000);
  });

  it("exposes the coordinator's metrics in the registry given to it", async () => {
    const { Registry } = await import("prom-client");
    const registry = new Registry();
    const app = await startContext({ url: "memory://", prometheus: { registry } }, new Journal(), [
      "accounts",
    ]);
    apps.push(app);
    await app.get(Accounts).deposit("metrics");
    expect(await registry.metrics()).toContain(
      'baton_lock_acquire_seconds_count{name="account/metrics"} 1',
    );
  });

  it("a failing @Leader or @RunOnce method is written to Nest's logger", async () => {
    const lines: string[] = [];
    const logger = {
      log: () => undefined,
      warn: () => undefined,
      error: (message: unknown, ...rest: unknown[]) => {
        lines.push([message, ...rest].map(String).join(" "));
      },
    };
    @Injectable()
    class Failing {
      @Leader("failing")
      async lead(): Promise<void> {
        throw new Error("leader boom");
      }

      @Cron("* * * * * *")
      @RunOnce("failing", { maxAttempts: 1 })
      async tick(): Promise<void> {
        throw new Error("tick boom");
      }
    }
    @Module({
      imports: [ScheduleModule.forRoot(), BatonModule.forRoot({ url: "memory://" })],
      providers: [Failing],
    })
    class FailingModule {}
    const app = await NestFactory.createApplicationContext(FailingModule, { logger });
    apps.push(app);
    await app.init();
    await waitFor(
      "both errors logged",
      () =>
        lines.some((l) => l.includes("leader boom")) && lines.some((l) => l.includes("tick boom")),
    );
    expect(lines.find((l) => l.includes("leader boom"))).toContain('@Leader("failing")');
    expect(lines.find((l) => l.includes("tick boom"))).toContain('@RunOnce("failing")');
  });

  it("@Leader on a provider runs its lead() while it leads, and stops it when the app closes", async () => {
    const terms: string[] = [];
    @Leader("provider-leader")
    @Injectable()
    class Scheduler {
      async lead({ term, signal }: TermContext): Promise<void> {
        terms.push(`started ${term}`);
        await new Promise((resolve) => signal.addEventListener("abort", resolve));
        terms.push(`stopped ${term}`);
      }
    }
    @Module({ imports: [BatonModule.forRoot({ url: "memory://" })], providers: [Scheduler] })
    class LeaderModule {}
    const app = await NestFactory.createApplicationContext(LeaderModule, { logger: false });
    await app.init();
    await waitFor("the term", () => terms.length > 0);
    await app.close();
    expect(terms).toEqual(["started 1", "stopped 1"]);
    expect(() => Leader("x")(class NoLead {} as never)).toThrow(/lead\(term\)/);
  });

  it("@WithLock outside an application says what it needs", async () => {
    const accounts = new Accounts(new Journal(), 0, undefined as unknown as Coordinator);
    await expect(accounts.deposit("x")).rejects.toThrow(/BatonModule\.forRoot/);
    expect(currentLock()).toBeUndefined();
  });
});

/** The tests every store runs: `url` is a store the apps share. */
function decoratorTests(url: string, ttlMs: number) {
  it("@WithLock serialises concurrent calls for one key across two applications, with increasing tokens", async () => {
    const journal = new Journal();
    const a = await startContext({ url, ttlMs }, journal, ["accounts"]);
    const b = await startContext({ url, ttlMs }, journal, ["accounts"]);
    apps.push(a, b);
    const key = randomUUID();
    const contexts = await Promise.all(
      Array.from({ length: 8 }, (_, i) => (i % 2 ? a : b).get(Accounts).deposit(key)),
    );
    expect(contexts.every((c) => c !== undefined && c.token > 0n)).toBe(true);
    expect(journal.locked).toHaveLength(8);
    expect(overlaps(journal.locked)).toBe(0);
    const byEntry = [...journal.locked].sort((x, y) => x.enteredAt - y.enteredAt);
    const tokens = byEntry.map((e) => e.token);
    expect(tokens).toEqual([...tokens].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0)));
    expect(new Set(tokens).size).toBe(8);
    // Another key does not wait for this one: its call runs meanwhile.
    const other = randomUUID();
    const [, , ctx] = await Promise.all([
      a.get(Accounts).deposit(key),
      b.get(Accounts).deposit(key),
      a.get(Accounts).deposit(other),
    ]);
    expect(ctx?.lock.name).toBe(`account/${other}`);
  });

  it("@RunOnce on a per-second @Cron runs each tick once across three applications", async () => {
    const journals = [new Journal(), new Journal(), new Journal()];
    const started = await Promise.all(
      journals.map((j) => startContext({ url, ttlMs }, j, ["reports"])),
    );
    apps.push(...started);
    await waitFor("4 slots run", () => journals.flatMap((j) => j.runs).length >= 4);
    await Promise.all(started.map((app) => app.close()));
    const runs = journals.flatMap((j) => j.runs);
    const slots = runs.map((r) => r.slot);
    expect(new Set(slots).size).toBe(slots.length);
    for (const slot of slots) expect(slot).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    // One second apart, as the cron says.
    const seconds = [...slots].sort().map((s) => Date.parse(s) / 1_000);
    for (let i = 1; i < seconds.length; i++) {
      expect((seconds[i] ?? 0) - (seconds[i - 1] ?? 0)).toBeGreaterThanOrEqual(1);
    }
  });

  it("@Leader runs in one application at a time and moves at once when the leader closes", async () => {
    const journals = [new Journal(), new Journal()];
    const started: INestApplicationContext[] = [];
    for (const j of journals) started.push(await startContext({ url, ttlMs }, j, ["worker"]));
    apps.push(...started);
    await waitFor("a leader", () => journals.some((j) => j.terms.length > 0));
    await delay(300);
    const leading = journals.findIndex((j) => j.terms.length > 0);
    expect(journals.flatMap((j) => j.terms)).toHaveLength(1);
    const closedAt = performance.now();
    await started[leading]?.close();
    const follower = journals[1 - leading] as Journal;
    await waitFor("the other leader", () => follower.terms.length > 0);
    const first = journals[leading]?.terms[0];
    const second = follower.terms[0];
    expect(first?.endedAt).toBeDefined();
    expect(second?.startedAt ?? 0).toBeGreaterThanOrEqual(
      first?.endedAt ?? Number.POSITIVE_INFINITY,
    );
    expect((second?.term ?? 0n) > (first?.term ?? 0n)).toBe(true);
    // It stepped down: the other did not wait for the lease to run out.
    console.info(
      `[baton nestjs] leader moved ${Math.round((second?.startedAt ?? 0) - closedAt)} ms after close, TTL ${ttlMs} ms`,
    );
    expect((second?.startedAt ?? 0) - closedAt).toBeLessThan(ttlMs);
    expect(follower.terms[0]?.endedAt).toBeUndefined();
    expect(started[1 - leading]?.get(Worker)).toBeInstanceOf(Worker);
  });

  it("@WithLock serialises HTTP requests for one key through Nest's HTTP server", async () => {
    const journal = new Journal();
    const http = await startHttp({ url, ttlMs }, journal);
    apps.push(http);
    const base = await http.getUrl();
    const key = randomUUID();
    const replies = await Promise.all(
      Array.from({ length: 5 }, async () => {
        const response = await fetch(`${base}/accounts/${key}/deposit`, { method: "POST" });
        expect(response.status).toBe(201);
        return (await response.json()) as { token: string };
      }),
    );
    expect(new Set(replies.map((r) => r.token)).size).toBe(5);
    expect(journal.locked).toHaveLength(5);
    expect(overlaps(journal.locked)).toBe(0);
  });
}

describe("memory", () => decoratorTests(`memory://nest-${randomUUID().slice(0, 8)}`, 3_000));
describeBackend("redis", (url) => decoratorTests(url, 3_000));
