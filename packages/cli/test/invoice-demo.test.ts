import { BackendUnavailableError } from "@baton/core";
import { describe, expect, it } from "vitest";
import {
  DEFAULT_SETTINGS,
  formatReport,
  runInvoiceDemo,
  type VariantResult,
} from "../src/demo/invoice-demo.js";
import {
  DEFAULT_NIGHTLY_SETTINGS,
  formatNightlyReport,
  type NightlyResult,
  runNightlyDemo,
} from "../src/demo/nightly-demo.js";
import { runNightlyScene } from "../src/demo/nightly-scene.js";

// Plays the invoice story (three runners, runner 1 frozen past its lease between its lock
// check and its next write) once per variant, on real timers: a few seconds.
describe("invoice demo (npm run demo)", () => {
  it("the fence rejects the frozen runner's stale write; lock only lets it through", async () => {
    const rows = await runInvoiceDemo();
    const row = (name: string): VariantResult => {
      const found = rows.find((r) => r.variant === name);
      if (found === undefined) throw new Error(`no row for ${name}`);
      return found;
    };
    const ttl = DEFAULT_SETTINGS.ttlMs;

    for (const r of rows) {
      // Runner 2 took over with a higher token, after the freeze, within a generous bound.
      expect(r.runner1Token).not.toBeNull();
      expect(r.runner2Token).not.toBeNull();
      expect(r.runner2Token as bigint).toBeGreaterThan(r.runner1Token as bigint);
      expect(r.takeoverMs).not.toBeNull();
      expect(r.takeoverMs as number).toBeGreaterThan(0);
      expect(r.takeoverMs as number).toBeLessThan(5 * ttl);
      // The run finished: every client has an invoice.
      expect(r.billed).toBe(DEFAULT_SETTINGS.clients);
    }

    // Negative control: without a fence the woken runner's writes land. If this shows 0,
    // the demo no longer freezes runner 1 where it should, and the fenced row proves nothing.
    const lockOnly = row("lock only");
    expect(lockOnly.staleAccepted).toBeGreaterThanOrEqual(1);
    expect(lockOnly.duplicates).toBeGreaterThanOrEqual(1);
    expect(lockOnly.staleRejected).toBe(0);

    // The signal is checked before the freeze, so it cannot stop the write in flight.
    const signalOnly = row("lock + signal");
    expect(signalOnly.staleAccepted).toBeLessThanOrEqual(lockOnly.staleAccepted);
    expect(signalOnly.staleRejected).toBe(0);

    const fenced = row("lock + fence");
    expect(fenced.staleAccepted).toBe(0);
    expect(fenced.staleRejected).toBeGreaterThanOrEqual(1);
    expect(fenced.duplicates).toBe(0);
  }, 30_000);

  it("the report names the backend without its credentials", () => {
    for (const backend of ["redis://app:hunter2@cache:6379/0", "redis://hunter2@cache:6379"]) {
      const report = formatReport([], { ...DEFAULT_SETTINGS, backend });
      expect(report).toContain("redis://***@cache:6379");
      expect(report).not.toContain("hunter2");
    }
  });
});

// The nightly scene: three replicas whose clocks are 0, 1 and 2 s apart run the 02:00 billing
// on their own timers; a run takes longer than the first gap and shorter than the second.
describe("nightly scene (npm run demo)", () => {
  it("runOnce bills each of the 600 clients once; a lock alone lets the late replica bill them again", async () => {
    const rows = await runNightlyDemo();
    const row = (guard: string): NightlyResult => {
      const found = rows.find((r) => r.guard === guard);
      if (found === undefined) throw new Error(`no row for ${guard}`);
      return found;
    };
    const clients = DEFAULT_NIGHTLY_SETTINGS.clients;
    expect(clients).toBe(600);

    const once = row("runOnce");
    expect(once.refused).toBeUndefined();
    expect(once.replicas).toEqual(["ran", "skipped: done", "skipped: done"]);
    expect(once.invoices).toBe(clients);
    expect(once.billedOnce).toBe(clients);
    expect(once.billedTwice).toBe(0);
    expect(once.unbilled).toBe(0);
    // The slot comes from the cron tick, so replicas whose clocks differ agree on it.
    expect(once.slot).toBe("2026-12-01T02:00:00Z");

    // Negative control: the lock stops the replica that fires during the run, not the one that
    // fires after it. If this bills everyone once, the scene no longer shows what runOnce adds.
    const lockOnly = row("lock only");
    expect(lockOnly.replicas).toEqual(["ran", "skipped: held", "ran"]);
    expect(lockOnly.invoices).toBe(2 * clients);
    expect(lockOnly.billedTwice).toBe(clients);

    const report = formatNightlyReport(rows);
    expect(report).toContain("600 clients");
    expect(report).toContain("02:00:00, 02:00:01, 02:00:02");
    expect(report).toMatch(/runOnce\s+ran\s+skipped: done\s+skipped: done\s+600\s+600\s+0/);
  }, 30_000);

  it("a store that does not answer ends the scene with its error instead of waiting for the next night", async () => {
    const settings = { ...DEFAULT_NIGHTLY_SETTINGS, ttlMs: 1_000, backend: "redis://127.0.0.1:1" };
    await expect(runNightlyScene("runOnce", settings)).rejects.toBeInstanceOf(
      BackendUnavailableError,
    );
  }, 60_000);
});
