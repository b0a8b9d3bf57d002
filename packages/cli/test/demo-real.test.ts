import { describeBackend } from "@baton/conformance/harness";
import { expect, it } from "vitest";
import { timelineSvg } from "../src/compare/timeline-svg.js";
import { DEFAULT_SETTINGS, runInvoiceDemo } from "../src/demo/invoice-demo.js";

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
});
