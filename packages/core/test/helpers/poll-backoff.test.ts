import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { PollBackoff } from "../../src/index.js";

// With the jitter pinned to its top, each pause is its ceiling: 20, 40, 80, 160, then 250.
const options = { minMs: 20, maxMs: 250 };

describe("PollBackoff", () => {
  beforeEach(() => {
    vi.spyOn(Math, "random").mockReturnValue(1);
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it("grows the pause while the same grant is seen, up to maxMs", () => {
    const pauses = new PollBackoff(options);
    const seen = Array.from({ length: 7 }, () => pauses.next("7"));
    expect(seen).toEqual([20, 40, 80, 160, 250, 250, 250]);
  });

  it("starts over at minMs when a look shows a new grant, and grows again from there", () => {
    const pauses = new PollBackoff(options);
    for (let i = 0; i < 6; i++) pauses.next("7");
    expect([pauses.next("8"), pauses.next("8"), pauses.next("9")]).toEqual([20, 40, 20]);
  });

  it("a look that does not tell the grant neither resets nor forgets the one seen", () => {
    const pauses = new PollBackoff(options);
    pauses.next("7");
    pauses.next("7");
    expect([pauses.next(), pauses.next("7"), pauses.next("8")]).toEqual([80, 160, 20]);
  });

  it("tells grants apart by bigint tokens as well", () => {
    const pauses = new PollBackoff(options);
    expect([pauses.next(7n), pauses.next(7n), pauses.next(8n)]).toEqual([20, 40, 20]);
  });

  it("the first grant seen is not a change of hands", () => {
    const pauses = new PollBackoff(options);
    expect([pauses.next(), pauses.next("7")]).toEqual([20, 40]);
  });

  it("draws each pause between half its ceiling and all of it", () => {
    vi.restoreAllMocks();
    const pauses = new PollBackoff(options);
    for (const ceiling of [20, 40, 80, 160, 250, 250]) {
      const pause = pauses.next("7");
      expect(pause).toBeGreaterThanOrEqual(ceiling / 2);
      expect(pause).toBeLessThanOrEqual(ceiling);
    }
  });
});
