import { describeBackend } from "@baton/conformance/harness";
import { expect, it } from "vitest";
import { timelineSvg } from "../src/compare/timeline-svg.js";
import { DEFAULT_SETTINGS, runInvoiceDemo } from "../src/demo/invoice-demo.js";
import {
  DEFAULT_NIGHTLY_SETTINGS,
  formatNightlyReport,
  runNightlyDemo,
} from "../src/demo/nightly-demo.js";

// The invoice story on a real store, with runner 1 in its own process frozen by a real SIGSTOP.
describeBackend("postgres", (url) => {
  it("lock only lets the woken runner bill; the fence rejects it; the timeline shows both", async () => {
    const rows = await runInvoiceDemo({ ...DEFAULT_SETTINGS, ttlMs: 1_000, backend: url });
    const [lockOnly, withSignal, fenced] = rows;
    expect(lockOnly?.staleAccepted).toBeGreaterThanOrEqual(1); // the negative control
    expect(lockOnly?.duplicates).toBeGreaterThanOrEqual(1);
    expect(withSignal?.staleAccepted).toBeLessThanOrEqual(lockOnly?.staleAccepted ?? 0);
    expect(fenced?.staleAccepted).toBe(0);
    expect(fenced?.staleRejected).toBeGreaterThanOrEqual(1);
    expect(fenced?.duplicates).toBe(0);
    for (const row of rows) {
      expect(row.billed).toBe(DEFAULT_SETTINGS.clients);
      expect(row.takeoverMs).not.toBeNull();
      expect(row.runner2Token as bigint).toBeGreaterThan(row.runner1Token as bigint);
    }
    const svg = timelineSvg("postgres", rows);
    expect(svg).toContain("runner 1 frozen");
    expect(svg).toContain("rejected by the fence at");
    expect(svg).toContain("(stale, accepted)");
  }, 60_000);

  it("the nightly scene bills each of the 600 clients once with runOnce; twice with a lock alone", async () => {
    const rows = await runNightlyDemo({ ...DEFAULT_NIGHTLY_SETTINGS, ttlMs: 1_000, backend: url });
    const [lockOnly, once] = rows;
    expect(once?.refused).toBeUndefined();
    expect(once?.replicas).toEqual(["ran", "skipped: done", "skipped: done"]);
    expect(once?.billedOnce).toBe(600);
    expect(once?.invoices).toBe(600);
    expect(lockOnly?.billedTwice).toBe(600); // the negative control
  }, 60_000);
});

// A backend that keeps no records: runOnce is refused, and the report says why.
describeBackend("redlock", (url) => {
  it("the nightly scene refuses runOnce on redlock:// and still plays the lock alone", async () => {
    const settings = { ...DEFAULT_NIGHTLY_SETTINGS, backend: url };
    const rows = await runNightlyDemo(settings);
    const once = rows.find((r) => r.guard === "runOnce");
    expect(once?.refused).toContain("keeps no durable records");
    expect(once?.invoices).toBe(0);
    const lockOnly = rows.find((r) => r.guard === "lock only");
    expect(lockOnly?.refused).toBeUndefined();
    expect(lockOnly?.replicas).toEqual(["ran", "skipped: held", "ran"]);
    expect(formatNightlyReport(rows, settings)).toContain("runOnce (refused)");
  }, 60_000);
});
