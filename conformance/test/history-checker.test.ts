import { describe, expect, it } from "vitest";
import {
  certainHolds,
  checkHistory,
  History,
  READ_SHARE,
  type ViolationKind,
  WRITE_SHARE,
} from "../src/history/index.js";

/** A history on a hand-driven clock: `at(t)` sets the time for what is recorded next. */
function manual(): { history: History; at: (t: number) => History } {
  let now = 0;
  const history = new History(() => now);
  return {
    history,
    at: (t: number) => {
      now = t;
      return history;
    },
  };
}

const kinds = (h: History, fencing = true): ViolationKind[] =>
  checkHistory(h, { fencing }).map((v) => v.kind);

describe("certain holds", () => {
  it("run from the acquire's reply to the earliest of release, loss, deadline, pause", () => {
    const { history, at } = manual();
    const a = at(0).invokeAcquire("a", "k");
    at(10);
    a.ok(1n);
    at(50).invokeRelease("a", "k").done(true, 55);
    const b = at(60).invokeAcquire("b", "k");
    b.ok(2n, { at: 70 });
    at(90).lost("b", "k", { token: 2n, reason: "key-lost" });
    const c = at(100).invokeAcquire("c", "k");
    c.ok(3n, { at: 110, deadline: 200 });
    const d = at(300).invokeAcquire("d", "k");
    d.ok(4n, { at: 310 });
    at(400).pause("d");
    const holds = certainHolds(history.entries).map((h) => [h.process, h.start, h.end, h.endedBy]);
    expect(holds).toEqual([
      ["a", 10, 50, "release"],
      ["b", 70, 90, "lost"],
      ["c", 110, 200, "deadline"],
      ["d", 310, 400, "pause"],
    ]);
  });

  it("a renewal confirmed before the deadline moves it; one confirmed after it does not", () => {
    const { history, at } = manual();
    at(0).invokeAcquire("a", "k").ok(1n, { at: 10, deadline: 100 });
    at(90).renew("a", { ok: true, deadline: 190 });
    at(200).renew("a", { ok: true, deadline: 300 }); // too late: the deadline passed at 190
    expect(certainHolds(history.entries).map((h) => [h.end, h.endedBy])).toEqual([
      [190, "deadline"],
    ]);
  });

  it("an unknown or pending acquire gives no hold, and a reply after the deadline an empty one", () => {
    const { history, at } = manual();
    at(0).invokeAcquire("a", "k").unknown("BATON_LOCK_TIMEOUT: waited");
    at(5).invokeAcquire("b", "k");
    at(10).invokeAcquire("c", "k").ok(3n, { at: 500, deadline: 400 });
    expect(certainHolds(history.entries)).toEqual([]);
  });
});

describe("checkHistory", () => {
  describe("no two certain holds of a key overlap", () => {
    it("passes: the second holder's reply comes after the first released", () => {
      const { history, at } = manual();
      at(0).invokeAcquire("a", "k").ok(1n, { at: 10 });
      at(50).invokeRelease("a", "k").done(true, 60);
      const b = at(20).invokeAcquire("b", "k"); // waiting while a holds
      b.ok(2n, { at: 65 });
      expect(checkHistory(history, { fencing: true })).toEqual([]);
    });

    it("passes: a paused holder's hold ends at the pause, whatever it believes after SIGCONT", () => {
      const { history, at } = manual();
      at(0).invokeAcquire("a", "k").ok(1n, { at: 10 });
      at(100).pause("a");
      at(120).invokeAcquire("b", "k").ok(2n, { at: 1_200 });
      at(1_500).resume("a");
      at(1_510).lost("a", "k", { token: 1n, reason: "deadline" });
      expect(checkHistory(history, { fencing: true })).toEqual([]);
    });

    it("violates: the second holder's reply comes while the first still holds", () => {
      const { history, at } = manual();
      at(0).invokeAcquire("a", "k").ok(1n, { at: 10 });
      at(20).invokeAcquire("b", "k").ok(2n, { at: 30 });
      at(50).invokeRelease("a", "k").done(true, 60);
      const violations = checkHistory(history, { fencing: true });
      expect(violations.map((v) => v.kind)).toEqual(["overlap"]);
      expect(violations[0]?.message).toContain('overlap on "k"');
      expect(violations[0]?.message).toContain("a held token 1 from +10.0 ms to +50.0 ms");
    });

    it("violates: a holder told it holds while its deadline is still ahead and another holds", () => {
      const { history, at } = manual();
      at(0).invokeAcquire("a", "k").ok(1n, { at: 10, deadline: 1_000 });
      at(500).invokeAcquire("b", "k").ok(2n, { at: 600 });
      expect(kinds(history, false)).toEqual(["overlap"]);
    });
  });

  describe("a grant that comes after another has a greater token", () => {
    it("passes: tokens rise with real-time order, across an expiry", () => {
      const { history, at } = manual();
      at(0).invokeAcquire("a", "k").ok(5n, { at: 10, deadline: 100 });
      at(150).invokeAcquire("b", "k").ok(6n, { at: 160 });
      at(170).invokeRelease("b", "k").done(true, 175);
      at(180).invokeAcquire("a", "k").ok(7n, { at: 190 });
      expect(checkHistory(history, { fencing: true })).toEqual([]);
    });

    it("violates: a later grant with an equal or smaller token (and only with fencing declared)", () => {
      const { history, at } = manual();
      at(0).invokeAcquire("a", "k").ok(5n, { at: 10, deadline: 100 });
      at(150).invokeAcquire("b", "k").ok(5n, { at: 160 });
      at(170).invokeRelease("b", "k").done(true, 175);
      at(180).invokeAcquire("c", "k").ok(3n, { at: 190 });
      const violations = checkHistory(history, { fencing: true });
      expect(violations.map((v) => v.kind)).toEqual(["token-order", "token-order", "token-order"]);
      expect(violations.map((v) => v.message).join("\n")).toContain(
        "b got token 5, not greater than a's token 5",
      );
      expect(kinds(history, false)).toEqual([]);
    });

    it("violates: a waiter queued before the first grant, granted after its certain hold ended", () => {
      const { history, at } = manual();
      const a = at(0).invokeAcquire("a", "k");
      const b = at(1).invokeAcquire("b", "k"); // both asked before either was granted
      a.ok(9n, { at: 10 });
      at(50).invokeRelease("a", "k").done(true, 60);
      b.ok(8n, { at: 70 });
      expect(kinds(history)).toEqual(["token-order"]);
    });
  });

  describe("the fence accepts only non-decreasing tokens, and no acknowledged write is lost", () => {
    it("passes: stale writes rejected, every accepted write read back", () => {
      const { history, at } = manual();
      at(0).invokeWrite("a", "r", { token: 1n, fenced: true, value: "a1" }).accepted(1);
      at(10).invokeWrite("b", "r", { token: 2n, fenced: true, value: "b1" }).accepted(11);
      at(20).invokeWrite("a", "r", { token: 1n, fenced: true, value: "a2" }).rejected(21);
      at(30).invokeWrite("b", "r", { token: 2n, fenced: true, value: "b2" }).accepted(31);
      at(40).read("runner", "r", ["a1", "b1", "b2"]);
      expect(checkHistory(history, { fencing: true })).toEqual([]);
    });

    it("violates: a lower token accepted after a higher one", () => {
      const { history, at } = manual();
      at(10).invokeWrite("b", "r", { token: 2n, fenced: true, value: "b1" }).accepted(11);
      at(20).invokeWrite("a", "r", { token: 1n, fenced: true, value: "a2" }).accepted(21);
      expect(kinds(history)).toEqual(["fence-order"]);
    });

    it("violates: the current token rejected", () => {
      const { history, at } = manual();
      at(10).invokeWrite("b", "r", { token: 2n, fenced: true }).accepted(11);
      at(20).invokeWrite("b", "r", { token: 2n, fenced: true }).rejected(21);
      expect(kinds(history)).toEqual(["fence-rejected-current"]);
    });

    it("violates: an acknowledged write missing from a later read, a rejected one present", () => {
      const { history, at } = manual();
      at(0).invokeWrite("a", "r", { token: 1n, fenced: true, value: "a1" }).accepted(1);
      at(10).invokeWrite("b", "r", { token: 2n, fenced: true, value: "b1" }).accepted(11);
      at(20).invokeWrite("a", "r", { token: 1n, fenced: true, value: "a2" }).rejected(21);
      at(40).read("runner", "r", ["b1", "a2"]);
      expect(kinds(history).sort()).toEqual(["lost-write", "rejected-write-visible"]);
    });
  });

  describe("a plain write needs a certain hold while someone else holds", () => {
    it("passes: plain writes inside the writer's own hold, and after it when nobody holds", () => {
      const { history, at } = manual();
      at(0).invokeAcquire("a", "k").ok(1n, { at: 10 });
      at(20).plainWrite("a", "k", { token: 1n, value: "a1" });
      at(30).pause("a");
      at(40).plainWrite("a", "k", { token: 1n, value: "a2" }); // sent before the stop
      at(50).invokeAcquire("b", "k").ok(2n, { at: 60 });
      at(70).plainWrite("b", "k", { token: 2n, value: "b1" });
      expect(checkHistory(history, { fencing: true })).toEqual([]);
    });

    it("violates: a paused holder writes after SIGCONT while the next holder holds", () => {
      const { history, at } = manual();
      at(0).invokeAcquire("a", "k").ok(1n, { at: 10 });
      at(30).pause("a");
      at(50).invokeAcquire("b", "k").ok(2n, { at: 60 });
      at(100).resume("a");
      at(101).plainWrite("a", "k", { token: 1n, value: "a-stale" });
      const violations = checkHistory(history, { fencing: true });
      expect(violations.map((v) => v.kind)).toEqual(["unfenced-write"]);
      expect(violations[0]?.message).toContain('plain write "a-stale" to "k" by a (token 1)');
      expect(violations[0]?.message).toContain("b held token 2");
    });

    it("passes: the same stale write through a fence that rejects it", () => {
      const { history, at } = manual();
      at(0).invokeAcquire("a", "k").ok(1n, { at: 10 });
      at(30).pause("a");
      at(50).invokeAcquire("b", "k").ok(2n, { at: 60 });
      at(61).invokeWrite("b", "k", { token: 2n, fenced: true }).accepted(62);
      at(100).resume("a");
      at(101).invokeWrite("a", "k", { token: 1n, fenced: true }).rejected(102);
      expect(checkHistory(history, { fencing: true })).toEqual([]);
    });
  });

  describe("a timed-out acquire is unknown, never failed", () => {
    it("passes: timeouts recorded as unknown, a held lock as failed", () => {
      const { history, at } = manual();
      at(0).invokeAcquire("a", "k").ok(1n, { at: 10 });
      at(20).invokeAcquire("b", "k").unknown("BATON_LOCK_TIMEOUT: waited 100 ms", 120);
      at(130).invokeAcquire("c", "k").fail("BATON_LOCK_HELD: held by someone else", 140);
      expect(checkHistory(history, { fencing: true })).toEqual([]);
    });

    it("violates: a timeout recorded as a failure", () => {
      const { history, at } = manual();
      at(20).invokeAcquire("b", "k").fail("BATON_BACKEND_UNAVAILABLE: no answer", 120);
      expect(kinds(history)).toEqual(["timeout-as-failure"]);
    });
  });
});

describe("permits: semaphores and read-write locks", () => {
  const permits = (n: number, limit = 3) => ({ permits: n, limit, mode: "permit" as const });
  const read = READ_SHARE;
  const write = WRITE_SHARE;

  it("certain holds: several of one process at once, each ended by its own release or loss", () => {
    const { history, at } = manual();
    at(0).invokePermits("a", "s", permits(1), "p1").ok(1n, { at: 10 });
    at(20).invokePermits("a", "s", permits(1), "p2").ok(2n, { at: 30 });
    at(40).invokeRelease("a", "s", 40, "p1").done(true, 45);
    at(60).lost("a", "s", { hold: "p2", token: 2n, reason: "deadline" });
    at(70).invokePermits("a", "s", permits(2), "p3").ok(3n, { at: 80 });
    at(90).pause("a");
    expect(certainHolds(history.entries).map((h) => [h.hold, h.start, h.end, h.endedBy])).toEqual([
      ["p1", 10, 40, "release"],
      ["p2", 30, 60, "lost"],
      ["p3", 80, 90, "pause"],
    ]);
  });

  it("passes: up to the limit held at once, tokens rising per grant", () => {
    const { history, at } = manual();
    at(0).invokePermits("a", "s", permits(2), "a1").ok(1n, { at: 10 });
    at(11).invokePermits("b", "s", permits(1), "b1").ok(2n, { at: 20 });
    at(30).invokeRelease("b", "s", 30, "b1").done(true, 35);
    at(31).invokePermits("c", "s", permits(1), "c1").ok(3n, { at: 40 });
    at(50).invokeRelease("a", "s", 50, "a1").done(true, 55);
    expect(checkHistory(history, { fencing: true })).toEqual([]);
  });

  it("violates: more permits certainly held at once than the semaphore has", () => {
    const { history, at } = manual();
    at(0).invokePermits("a", "s", permits(2), "a1").ok(1n, { at: 10 });
    at(11).invokePermits("b", "s", permits(2), "b1").ok(2n, { at: 20 });
    at(30).invokeRelease("b", "s", 30, "b1").done(true, 35);
    const violations = checkHistory(history, { fencing: true });
    expect(violations.map((v) => v.kind)).toEqual(["capacity"]);
    expect(violations[0]?.message).toContain('capacity of "s": 4 permits of 3');
    expect(violations[0]?.message).toContain("b held 2 permits of 3 token 2 from +20.0 ms");
  });

  it("violates: a paused holder's permits counted until its lease runs out (not at the pause) overlap a waiter's", () => {
    const { history, at } = manual();
    at(0).invokePermits("a", "s", permits(3), "a1").ok(1n, { at: 10, deadline: 1_000 });
    at(100).pause("a");
    at(150).invokePermits("b", "s", permits(1), "b1").ok(2n, { at: 500 });
    expect(kinds(history)).toEqual([]);
    const noPause = history.entries.filter((e) => e.type !== "pause");
    expect(checkHistory(noPause, { fencing: true }).map((v) => v.kind)).toEqual(["capacity"]);
  });

  it("violates: two writers, or a writer beside a reader; many readers pass", () => {
    const { history, at } = manual();
    at(0).invokePermits("r", "rw", read, "r1").ok(0n, { at: 10 });
    at(0).invokePermits("q", "rw", read, "q1").ok(0n, { at: 12 });
    at(20).invokeRelease("r", "rw", 20, "r1").done(true, 21);
    at(20).invokeRelease("q", "rw", 20, "q1").done(true, 21);
    expect(kinds(history)).toEqual([]);
    at(30).invokePermits("w", "rw", write, "w1").ok(1n, { at: 40 });
    at(45).invokePermits("r", "rw", read, "r2").ok(1n, { at: 50 });
    at(60).invokeRelease("r", "rw", 60, "r2").done(true, 61);
    at(62).invokePermits("v", "rw", write, "v1").ok(2n, { at: 70 });
    const violations = checkHistory(history, { fencing: true });
    expect(violations.map((v) => v.kind)).toEqual(["capacity", "capacity"]);
    expect(violations[0]?.message).toContain("a writer beside another holder");
  });

  it("a lock and a semaphore of one name are unrelated", () => {
    const { history, at } = manual();
    at(0).invokeAcquire("a", "x").ok(7n, { at: 10 });
    at(0).invokePermits("b", "x", permits(1, 1), "b1").ok(1n, { at: 10 });
    at(20).invokePermits("c", "x", permits(1, 1), "c1").ok(2n, { at: 30 });
    at(25).invokeRelease("b", "x", 25, "b1").done(true, 26);
    expect(kinds(history)).toEqual([]);
  });

  it("violates: a later permit or write without a greater token, a later read with a smaller one", () => {
    const { history, at } = manual();
    at(0).invokePermits("w", "rw", write, "w1").ok(5n, { at: 10 });
    at(20).invokeRelease("w", "rw", 20, "w1").done(true, 21);
    at(30).invokePermits("r", "rw", read, "r1").ok(5n, { at: 40 }); // the newest write's: fine
    at(50).invokeRelease("r", "rw", 50, "r1").done(true, 51);
    expect(kinds(history)).toEqual([]);
    at(60).invokePermits("q", "rw", read, "q1").ok(4n, { at: 70 });
    at(80).invokeRelease("q", "rw", 80, "q1").done(true, 81);
    at(90).invokePermits("v", "rw", write, "v1").ok(5n, { at: 100 });
    const violations = checkHistory(history, { fencing: true });
    expect(violations.map((v) => v.message).join("\n")).toContain(
      "q got token 4 for a read, smaller than w's token 5",
    );
    expect(violations.map((v) => v.message).join("\n")).toContain(
      "v got token 5, not greater than r's token 5",
    );
    expect(kinds(history, false)).toEqual([]);
  });

  it("violates: two concurrent permit grants that share a token; concurrent reads may", () => {
    const { history, at } = manual();
    at(0).invokePermits("r", "rw", read, "r1").ok(3n, { at: 10 });
    at(0).invokePermits("q", "rw", read, "q1").ok(3n, { at: 10 });
    expect(kinds(history)).toEqual([]);
    at(0).invokePermits("a", "s", permits(1), "a1").ok(3n, { at: 10 });
    at(0).invokePermits("b", "s", permits(1), "b1").ok(3n, { at: 11 });
    const violations = checkHistory(history, { fencing: true });
    expect(violations.map((v) => v.kind)).toEqual(["token-order"]);
    expect(violations[0]?.message).toContain("share token 3");
  });
});

describe("permits: token order across holds", () => {
  const permits = (n: number) => ({ permits: n, limit: 3, mode: "permit" as const });

  it("passes: permits granted together, the one with the smaller token told last", () => {
    const { history, at } = manual();
    const b = at(0).invokePermits("b", "s", permits(1), "b1"); // queued first: token 7
    at(1).invokePermits("a", "s", permits(1), "a1").ok(8n, { at: 10 });
    at(20).invokeRelease("a", "s", 20, "a1").done(true, 21);
    b.ok(7n, { at: 30 });
    expect(kinds(history)).toEqual([]);
  });

  it("violates: the same order for permits that cannot be held at once", () => {
    const { history, at } = manual();
    const b = at(0).invokePermits("b", "s", permits(2), "b1");
    at(1).invokePermits("a", "s", permits(2), "a1").ok(8n, { at: 10 });
    at(20).invokeRelease("a", "s", 20, "a1").done(true, 21);
    b.ok(7n, { at: 30 });
    expect(kinds(history)).toEqual(["token-order"]);
  });
});
