import { describeBackend } from "@baton/conformance/harness";
import { expect, it } from "vitest";
import { contendInProcess, grantOrder } from "../../../bench/lib/grant-order.js";
import "../src/index.js";

describeBackend("azure-blob", (url) => {
  // Three coordinators loop acquire, hold 50 ms, release on one name for 10 s.
  it("the coordinator that released does not win most grants, and no waiter runs out its wait", async () => {
    const order = grantOrder(await contendInProcess(url, `grant-order-${Date.now()}`, 10_000));
    expect(order.timeouts).toBe(0);
    expect(order.grants).toBeGreaterThan(10);
    expect(order.regrabShare).toBeLessThan(0.5);
    expect(Math.min(...order.perWorker)).toBeGreaterThan(0);
  }, 60_000);
});
