import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/helpers/manual-clock.js";
import { FIRST_PROBE_AFTER_MS, HandOffs, PROBE_EVERY_MS } from "../../src/kernel/hand-off.js";

const TTL = 2_000;
const WINDOW = HandOffs.windowMs(TTL);

describe("hand-offs on a backend without a queue", () => {
  it("the window is an eighth of the TTL, between 50 and 250 ms", () => {
    expect(HandOffs.windowMs(1_600)).toBe(200);
    expect(HandOffs.windowMs(100)).toBe(50);
    expect(HandOffs.windowMs(60_000)).toBe(250);
  });

  it("after a contended lock ends here, the next acquire of its name holds off the rest of the window", async () => {
    const clock = new ManualClock(1_000);
    const hand = new HandOffs(clock, true);
    hand.granted("job", 5n, true, false); // the acquire found it held
    await clock.advance(50);
    hand.ended("job", TTL);
    expect(hand.holdOffMs("job", TTL)).toBe(WINDOW);
    expect(hand.holdOffMs("other", TTL)).toBe(0);
    await clock.advance(WINDOW);
    expect(hand.holdOffMs("job", TTL)).toBe(0);
  });

  it("a name nobody else wants is taken at once, with one hand-off per probe period", async () => {
    const clock = new ManualClock(1_000);
    const hand = new HandOffs(clock, true);
    const holdOffs: number[] = [];
    let token = 1n;
    for (let i = 0; i < 60; i++) {
      const holdOff = hand.holdOffMs("job", TTL);
      holdOffs.push(holdOff);
      await clock.advance(holdOff);
      // Granted at once: the next token of the name, nobody else had it.
      hand.granted("job", token++, false, holdOff > 0);
      await clock.advance(50);
      hand.ended("job", TTL);
    }
    const probes = holdOffs.filter((ms) => ms > 0).length;
    // About 60 * 50 ms / PROBE_EVERY_MS probes, never one per acquire.
    expect(probes).toBeGreaterThan(0);
    expect(probes).toBeLessThanOrEqual(Math.ceil((60 * (50 + WINDOW)) / PROBE_EVERY_MS));
    expect(probes).toBeLessThan(6);
  });

  it("a name taken again at once from the start is handed off soon, then once per probe period", async () => {
    const clock = new ManualClock(1_000);
    const hand = new HandOffs(clock, true);
    const probedAt: number[] = [];
    let token = 1n;
    // Replicas that asked at the same moment wait unseen: this one never finds the name held.
    for (let i = 0; i < 60; i++) {
      const holdOff = hand.holdOffMs("job", TTL);
      if (holdOff > 0) probedAt.push(clock.now() - 1_000);
      await clock.advance(holdOff);
      hand.granted("job", token++, false, holdOff > 0);
      await clock.advance(50);
      hand.ended("job", TTL);
    }
    // The first hand-off comes within the first FIRST_PROBE_AFTER_MS and a few grants, not after
    // PROBE_EVERY_MS of grants all kept here.
    expect(probedAt[0]).toBeGreaterThanOrEqual(FIRST_PROBE_AFTER_MS);
    expect(probedAt[0]).toBeLessThan(FIRST_PROBE_AFTER_MS + 100);
    expect(probedAt[1]).toBeGreaterThanOrEqual((probedAt[0] ?? 0) + PROBE_EVERY_MS);
  });

  it("a grant after a hold-off with a token that skipped others keeps the hand-offs going", async () => {
    const clock = new ManualClock(1_000);
    const hand = new HandOffs(clock, true);
    hand.granted("job", 1n, false, false);
    await clock.advance(50);
    hand.ended("job", TTL);
    expect(hand.holdOffMs("job", TTL)).toBe(0); // the streak starts
    hand.granted("job", 2n, false, false);
    await clock.advance(PROBE_EVERY_MS);
    hand.ended("job", TTL);
    const probe = hand.holdOffMs("job", TTL);
    expect(probe).toBe(WINDOW);
    await clock.advance(probe);
    hand.granted("job", 5n, false, true); // two grants elsewhere meanwhile
    await clock.advance(50);
    hand.ended("job", TTL);
    expect(hand.holdOffMs("job", TTL)).toBe(WINDOW);
  });

  /** A streak of "job" with a probe due, on a shared counter; the next token is 3. */
  async function probedStreak(clock: ManualClock, hand: HandOffs): Promise<void> {
    hand.granted("job", 1n, false, false);
    await clock.advance(50);
    hand.ended("job", TTL);
    expect(hand.holdOffMs("job", TTL)).toBe(0); // the streak starts
    hand.granted("job", 2n, false, false);
    await clock.advance(PROBE_EVERY_MS);
    hand.ended("job", TTL);
    const probe = hand.holdOffMs("job", TTL);
    expect(probe).toBe(WINDOW);
    await clock.advance(probe);
  }

  it("with one token counter for every key, the tokens this process took for other names are no grant elsewhere", async () => {
    const clock = new ManualClock(1_000);
    const hand = new HandOffs(clock, false);
    await probedStreak(clock, hand);
    for (let t = 3n; t < 900n; t++) hand.granted(`other-${t}`, t, false, false);
    hand.granted("job", 900n, false, true);
    await clock.advance(50);
    hand.ended("job", TTL);
    expect(hand.holdOffMs("job", TTL)).toBe(0);
  });

  it("with one token counter, tokens another process took while this one held off keep the hand-offs going", async () => {
    const clock = new ManualClock(1_000);
    const hand = new HandOffs(clock, false);
    await probedStreak(clock, hand);
    hand.granted("other", 3n, false, false);
    hand.granted("job", 6n, false, true); // 4 and 5 went to another process
    await clock.advance(50);
    hand.ended("job", TTL);
    expect(hand.holdOffMs("job", TTL)).toBe(WINDOW);
  });

  it("with one token counter, the name found held still starts the hand-offs", async () => {
    const clock = new ManualClock(1_000);
    const hand = new HandOffs(clock, false);
    hand.granted("job", 7n, true, false);
    await clock.advance(50);
    hand.ended("job", TTL);
    expect(hand.holdOffMs("job", TTL)).toBe(WINDOW);
  });

  it("forgets old names once it remembers many", async () => {
    const clock = new ManualClock(1_000);
    const hand = new HandOffs(clock, true);
    for (let i = 0; i < 3_000; i++) {
      hand.granted(`slot-${i}`, 1n, true, false);
      hand.ended(`slot-${i}`, TTL);
      await clock.advance(10);
    }
    // Names of more than a few seconds ago are gone: no hold-off, and no growth without end.
    expect(hand.holdOffMs("slot-0", TTL)).toBe(0);
    expect(hand.holdOffMs("slot-2999", TTL)).toBeGreaterThan(0);
  });
});
