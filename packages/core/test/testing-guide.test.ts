import {
  type Coordinator,
  createCoordinator,
  LockLostError,
  LockTimeoutError,
  ManualClock,
  MemoryBackend,
} from "@baton/core";
import { afterEach, describe, expect, it } from "vitest";

// The code under test: bills each invoice once, under the "billing" lock, and stops at the
// first invoice it reaches after the lock was lost.
export async function billAll(
  coordinator: Coordinator,
  invoices: readonly string[],
  charge: (invoice: string, options: { token: bigint; signal: AbortSignal }) => Promise<void>,
): Promise<"billed" | "busy"> {
  const lock = await coordinator.tryAcquire("billing");
  if (lock === null) return "busy"; // another replica is billing
  try {
    for (const invoice of invoices) {
      lock.throwIfLost();
      await charge(invoice, { token: lock.token, signal: lock.signal });
    }
    return "billed";
  } finally {
    await lock.release();
  }
}

// One clock and one in-memory store per test: coordinators built on the same backend
// exclude each other as replicas on one Redis would.
let clock: ManualClock;
let backend: MemoryBackend;
const coordinators: Coordinator[] = [];

function replica(ownerId: string): Coordinator {
  const coordinator = createCoordinator({ backend, clock, ttlMs: 1_000, ownerId });
  coordinators.push(coordinator);
  return coordinator;
}

afterEach(async () => {
  await Promise.all(coordinators.splice(0).map((c) => c.close()));
});

function setUp() {
  clock = new ManualClock();
  backend = new MemoryBackend({ clock });
}

describe("a job under a lock", () => {
  it("bills every invoice with the lock's fencing token, then releases the lock", async () => {
    setUp();
    const a = replica("a");
    const charged: string[] = [];
    const outcome = await billAll(a, ["inv-1", "inv-2"], async (invoice, { token }) => {
      charged.push(`${invoice}@${token}`);
    });
    expect(outcome).toBe("billed");
    expect(charged).toEqual(["inv-1@1", "inv-2@1"]);
    expect(await a.holder("billing")).toBeNull();
  });

  it("a second replica is turned away while the first one bills", async () => {
    setUp();
    const [a, b] = [replica("a"), replica("b")];
    let finish = () => {};
    const slowCharge = () => new Promise<void>((resolve) => (finish = resolve));
    const first = billAll(a, ["inv-1"], slowCharge);
    await clock.advance(0); // lets a take the lock and start charging
    expect(await b.holder("billing")).toMatchObject({ ownerId: "a" });
    expect(await billAll(b, ["inv-1"], slowCharge)).toBe("busy");
    finish();
    expect(await first).toBe("billed");
  });

  it("a lock stays held across many TTLs: the coordinator renews it", async () => {
    setUp();
    const a = replica("a");
    const lock = await a.acquire("billing");
    await clock.advance(10_000); // ten TTLs pass; renewals run on the way
    expect(lock.held).toBe(true);
    expect(lock.signal.aborted).toBe(false);
    await lock.release();
  });

  it("acquire with waitMs gives up with LockTimeoutError while another replica holds it", async () => {
    setUp();
    const [a, b] = [replica("a"), replica("b")];
    await a.acquire("billing");
    const waiting = b.acquire("billing", { waitMs: 2_000 });
    const outcome = expect(waiting).rejects.toBeInstanceOf(LockTimeoutError);
    await clock.advance(2_000);
    await outcome;
  });
});

describe("losing the lock", () => {
  it("a pause longer than the TTL: the job stops at its next check, and another replica takes over", async () => {
    setUp();
    const [a, b] = [replica("a"), replica("b")];
    const charged: string[] = [];
    const billing = billAll(a, ["inv-1", "inv-2", "inv-3"], async (invoice) => {
      charged.push(invoice);
      if (invoice === "inv-1") clock.jump(5_000); // the process froze for 5 s (GC, SIGSTOP)
    });
    // The lock was lost during the pause: the job throws before it charges inv-2.
    await expect(billing).rejects.toBeInstanceOf(LockLostError);
    expect(charged).toEqual(["inv-1"]);
    // Meanwhile the store let the lease run out: b takes over, with a greater token.
    const lock = await b.acquire("billing");
    expect(lock.token).toBeGreaterThan(1n);
  });

  it("work that listens to the lock's signal is aborted when the lock is lost", async () => {
    setUp();
    const a = replica("a");
    const lock = await a.acquire("billing");
    const reasons: unknown[] = [];
    lock.signal.addEventListener("abort", () => reasons.push(lock.signal.reason));
    clock.jump(5_000); // a pause: no renewal could run
    await clock.advance(0); // the timers that were due run now
    expect(lock.held).toBe(false);
    expect(reasons).toHaveLength(1);
    expect(reasons[0]).toBeInstanceOf(LockLostError);
  });
});

describe("an election", () => {
  it("one replica leads; when it steps down, the other is elected with a greater term", async () => {
    setUp();
    const [a, b] = [replica("a"), replica("b")];
    const terms: string[] = [];
    const campaign = (coordinator: Coordinator) =>
      coordinator.elect("scheduler", {
        value: coordinator.ownerId,
        onElected: ({ term }) => {
          terms.push(`${coordinator.ownerId} elected in term ${term}`);
        },
        onRevoked: ({ term, reason }) => {
          terms.push(`${coordinator.ownerId} term ${term} ended: ${reason}`);
        },
      });
    const electionA = campaign(a);
    await clock.advance(0);
    const electionB = campaign(b);
    await clock.advance(1_000);
    expect(electionA.isLeader).toBe(true);
    expect(electionB.isLeader).toBe(false);
    expect(await electionB.leader()).toMatchObject({ ownerId: "a", value: "a" });

    await electionA.close(); // what a SIGTERM with installStepDown() does
    await clock.advance(0);
    expect(electionB.isLeader).toBe(true);
    expect(terms).toEqual([
      "a elected in term 1",
      "a term 1 ended: closed",
      `b elected in term ${electionB.term}`,
    ]);
    expect(electionB.term).toBeGreaterThan(1n);
  });

  it("a leader that froze past its TTL loses its term at once, and a new term begins", async () => {
    setUp();
    const [a, b] = [replica("a"), replica("b")];
    const ended: string[] = [];
    const electionA = a.elect("scheduler", {
      onElected: ({ signal }) => {
        signal.addEventListener("abort", () => ended.push("a's work stopped"));
      },
      onRevoked: ({ reason }) => {
        ended.push(`a's term ended: ${reason}`);
      },
    });
    await clock.advance(0);
    const electionB = b.elect("scheduler", { onElected: () => {} });
    await clock.advance(0);
    const firstTerm = electionA.term;
    expect(firstTerm).toBe(1n);
    // The clock is shared: both replicas froze for 5 s. On waking, before any timer ran,
    // a no longer claims to lead.
    clock.jump(5_000);
    expect(electionA.isLeader).toBe(false);
    await clock.advance(1_000);
    expect(ended).toEqual(["a's work stopped", "a's term ended: deadline"]);
    const leader = await electionB.leader();
    expect(leader?.term).toBeGreaterThan(1n);
    expect([electionA.isLeader, electionB.isLeader].filter(Boolean)).toHaveLength(1);
  });
});
