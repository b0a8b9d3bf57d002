import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/helpers/manual-clock.js";
import {
  FAST_LOOK_MS,
  FIRST_PROBE_AFTER_MS,
  HandOffs,
  PROBE_EVERY_MS,
  PROBE_MAX_MS,
  PROBE_SLACK_MS,
  WOKEN_WINDOW_MS,
} from "../../src/kernel/hand-off.js";

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
    hand.turnEnded("job", TTL);
    expect(hand.holdOffMs("job", TTL)).toBe(WINDOW);
    expect(hand.holdOffMs("other", TTL)).toBe(0);
    await clock.advance(WINDOW);
    expect(hand.holdOffMs("job", TTL)).toBe(0);
  });

  it("when the store wakes its waiters at a release, a contended name holds off a few ms, not a poll's window", async () => {
    const clock = new ManualClock(1_000);
    const hand = new HandOffs(clock, true, "woken");
    hand.granted("job", 5n, true, false); // the acquire found it held
    await clock.advance(1);
    hand.turnEnded("job", TTL);
    expect(hand.holdOffMs("job", TTL)).toBe(WOKEN_WINDOW_MS);
    expect(WOKEN_WINDOW_MS).toBeLessThan(WINDOW / 5);
    await clock.advance(WOKEN_WINDOW_MS);
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
      hand.turnEnded("job", TTL);
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
      hand.turnEnded("job", TTL);
    }
    // The first hand-off comes within the first FIRST_PROBE_AFTER_MS and a few grants, not after
    // PROBE_EVERY_MS of grants all kept here.
    expect(probedAt[0]).toBeGreaterThanOrEqual(FIRST_PROBE_AFTER_MS);
    expect(probedAt[0]).toBeLessThan(FIRST_PROBE_AFTER_MS + 100);
    expect(probedAt[1]).toBeGreaterThanOrEqual((probedAt[0] ?? 0) + PROBE_EVERY_MS);
  });

  /** Takes "job" again at once after each release for `forMs`, each held `heldMs`, granted in `tookMs`. */
  async function retakeTimed(
    clock: ManualClock,
    hand: HandOffs,
    forMs: number,
    heldMs: number,
    tookMs: number,
  ): Promise<number[]> {
    const start = clock.now();
    const holdOffs: number[] = [];
    let token = 1n;
    while (clock.now() - start < forMs) {
      const holdOff = hand.holdOffMs("job", TTL);
      if (holdOff > 0) holdOffs.push(holdOff);
      await clock.advance(holdOff + tookMs);
      hand.granted("job", token++, false, holdOff > 0, clock.now() - tookMs);
      await clock.advance(heldMs);
      hand.turnEnded("job", TTL);
    }
    return holdOffs;
  }

  it("where waiters look again soon after a change of hands, a probe waits as long as one needs to take the lock", async () => {
    const clock = new ManualClock(1_000);
    const hand = new HandOffs(clock, true, "poll-resets");
    // Held 1 ms, granted in 2 ms: the fast look, twice the hold, four round trips and the slack.
    const holdOffs = await retakeTimed(clock, hand, 10_000, 1, 2);
    expect(holdOffs.length).toBeGreaterThan(1);
    for (const ms of holdOffs) expect(ms).toBe(FAST_LOOK_MS + 2 + 8 + PROBE_SLACK_MS);
    expect(FAST_LOOK_MS + 2 + 8 + PROBE_SLACK_MS).toBeLessThan(WINDOW);
  });

  it.each([
    {
      what: "where waiters may keep backing off, however fast the store",
      waiters: "poll",
      heldMs: 1,
    },
    {
      what: "after a long hold, as a waiter's pause grows with it",
      waiters: "poll-resets",
      heldMs: 200,
    },
  ] as const)("a probe waits the whole window $what", async ({ waiters, heldMs }) => {
    const clock = new ManualClock(1_000);
    const hand = new HandOffs(clock, true, waiters);
    const holdOffs = await retakeTimed(clock, hand, 10_000, heldMs, 2);
    expect(holdOffs.length).toBeGreaterThan(1);
    for (const ms of holdOffs) expect(ms).toBe(WINDOW);
  });

  it("a contended name holds off the whole window, however fast the store answers", async () => {
    const clock = new ManualClock(1_000);
    const hand = new HandOffs(clock, true, "poll-resets");
    hand.granted("other", 1n, false, false, clock.now() - 2);
    hand.granted("job", 5n, true, false); // the acquire found it held
    await clock.advance(1);
    hand.turnEnded("job", TTL);
    expect(hand.holdOffMs("job", TTL)).toBe(WINDOW);
  });

  /**
   * Takes "job" again 50 ms after each grant for `forMs`, granted the next token each time
   * unless `takenElsewhere(at)` says another process took the hand-off that began at `at`.
   * Returns when each hand-off began (ms into the run) and the time spent holding off.
   */
  async function retake(
    clock: ManualClock,
    hand: HandOffs,
    forMs: number,
    takenElsewhere: (at: number) => boolean = () => false,
    token = { next: 1n },
  ): Promise<{ probedAt: number[]; heldOffMs: number }> {
    const start = clock.now();
    const probedAt: number[] = [];
    let heldOffMs = 0;
    while (clock.now() - start < forMs) {
      const holdOff = hand.holdOffMs("job", TTL);
      const at = clock.now() - start;
      if (holdOff > 0) probedAt.push(at);
      heldOffMs += holdOff;
      await clock.advance(holdOff);
      if (holdOff > 0 && takenElsewhere(at)) token.next += 1n;
      hand.granted("job", token.next++, false, holdOff > 0);
      await clock.advance(50);
      hand.turnEnded("job", TTL);
    }
    return { probedAt, heldOffMs };
  }

  it("a name nobody else takes is handed off less and less often, at least once per PROBE_MAX_MS", async () => {
    const clock = new ManualClock(1_000);
    const hand = new HandOffs(clock, true);
    const { probedAt, heldOffMs } = await retake(clock, hand, 60_000);
    const gaps = probedAt.slice(1).map((at, i) => at - (probedAt[i] ?? 0));
    // 2 s after the first, then twice as long after each hand-off nobody took, up to the cap.
    expect(gaps.slice(0, 3)).toEqual([PROBE_EVERY_MS, 2 * PROBE_EVERY_MS, PROBE_MAX_MS]);
    // A waiter elsewhere never waits longer than the cap and a window for a hand-off.
    for (const gap of gaps) expect(gap).toBeLessThanOrEqual(PROBE_MAX_MS + WINDOW);
    expect(probedAt.at(-1)).toBeGreaterThan(60_000 - PROBE_MAX_MS - WINDOW);
    // A minute of taking the name again costs a few windows, not one per 2 s (30 windows).
    expect(probedAt.length).toBeLessThanOrEqual(10);
    expect(heldOffMs).toBeLessThan(0.05 * 60_000);
  });

  it("a hand-off another process took starts the hand-offs of every release again", async () => {
    const clock = new ManualClock(1_000);
    const hand = new HandOffs(clock, true);
    const token = { next: 1n };
    const first = await retake(clock, hand, 30_000, () => false, token);
    expect((first.probedAt.at(-1) ?? 0) - (first.probedAt.at(-2) ?? 0)).toBe(PROBE_MAX_MS);
    // Another process starts waiting: it takes the next hand-off, then asks no more.
    let handOffs = 0;
    const second = await retake(clock, hand, 20_000, () => handOffs++ === 0, token);
    const firstAt = second.probedAt[0] ?? -1;
    expect(firstAt).toBeLessThanOrEqual(PROBE_MAX_MS + WINDOW);
    // Right after a hand-off it took, every release is handed off (a window each)...
    expect(second.probedAt[1]).toBe(firstAt + WINDOW + 50);
    // ... and once nobody takes them, hand-offs come 2 s apart again, not 8 s.
    const gaps = second.probedAt.slice(1).map((at, i) => at - (second.probedAt[i] ?? 0));
    expect(gaps).toContain(PROBE_EVERY_MS);
  });

  it("a grant after a hold-off with a token that skipped others keeps the hand-offs going", async () => {
    const clock = new ManualClock(1_000);
    const hand = new HandOffs(clock, true);
    hand.granted("job", 1n, false, false);
    await clock.advance(50);
    hand.turnEnded("job", TTL);
    expect(hand.holdOffMs("job", TTL)).toBe(0); // the streak starts
    hand.granted("job", 2n, false, false);
    await clock.advance(PROBE_EVERY_MS);
    hand.turnEnded("job", TTL);
    const probe = hand.holdOffMs("job", TTL);
    expect(probe).toBe(WINDOW);
    await clock.advance(probe);
    hand.granted("job", 5n, false, true); // two grants elsewhere meanwhile
    await clock.advance(50);
    hand.turnEnded("job", TTL);
    expect(hand.holdOffMs("job", TTL)).toBe(WINDOW);
  });

  /** A streak of "job" with a probe due, on a shared counter; the next token is 3. */
  async function probedStreak(clock: ManualClock, hand: HandOffs): Promise<void> {
    hand.granted("job", 1n, false, false);
    await clock.advance(50);
    hand.turnEnded("job", TTL);
    expect(hand.holdOffMs("job", TTL)).toBe(0); // the streak starts
    hand.granted("job", 2n, false, false);
    await clock.advance(PROBE_EVERY_MS);
    hand.turnEnded("job", TTL);
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
    hand.turnEnded("job", TTL);
    expect(hand.holdOffMs("job", TTL)).toBe(0);
  });

  it("with one token counter, tokens another process took while this one held off keep the hand-offs going", async () => {
    const clock = new ManualClock(1_000);
    const hand = new HandOffs(clock, false);
    await probedStreak(clock, hand);
    hand.granted("other", 3n, false, false);
    hand.granted("job", 6n, false, true); // 4 and 5 went to another process
    await clock.advance(50);
    hand.turnEnded("job", TTL);
    expect(hand.holdOffMs("job", TTL)).toBe(WINDOW);
  });

  it("with one token counter, the name found held still starts the hand-offs", async () => {
    const clock = new ManualClock(1_000);
    const hand = new HandOffs(clock, false);
    hand.granted("job", 7n, true, false);
    await clock.advance(50);
    hand.turnEnded("job", TTL);
    expect(hand.holdOffMs("job", TTL)).toBe(WINDOW);
  });

  it("forgets old names once it remembers many", async () => {
    const clock = new ManualClock(1_000);
    const hand = new HandOffs(clock, true);
    for (let i = 0; i < 3_000; i++) {
      hand.granted(`slot-${i}`, 1n, true, false);
      hand.turnEnded(`slot-${i}`, TTL);
      await clock.advance(10);
    }
    // Names of more than a few seconds ago are gone: no hold-off, and no growth without end.
    expect(hand.holdOffMs("slot-0", TTL)).toBe(0);
    expect(hand.holdOffMs("slot-2999", TTL)).toBeGreaterThan(0);
  });
});
