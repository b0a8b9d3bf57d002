import { randomUUID } from "node:crypto";
import { connect, createServer, type Server } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import {
  type LockWorker,
  spawnLockWorker,
  TcpProxy,
  type TickCheck,
  type WorkerEvent,
} from "../src/faults/index.js";
import { ALL_BACKENDS, type BackendKind, describeBackend } from "../src/harness/index.js";
import {
  certainHolds,
  checkHistory,
  History,
  READ_SHARE,
  RecordedWorker,
  WRITE_SHARE,
} from "../src/history/index.js";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((f) => f()));
});

async function echoServer(): Promise<{ server: Server; port: number }> {
  const server = createServer((socket) => socket.pipe(socket));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  cleanups.push(() => new Promise((resolve) => server.close(() => resolve())));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no port");
  return { server, port: address.port };
}

function roundTrip(port: number, text: string, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error("timeout"));
    }, timeoutMs);
    socket.on("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    socket.on("close", () => {
      clearTimeout(timer);
      reject(new Error("closed"));
    });
    socket.once("data", (data) => {
      clearTimeout(timer);
      socket.removeAllListeners("close");
      socket.destroy();
      resolve(data.toString());
    });
    socket.write(text);
  });
}

describe("TcpProxy", () => {
  it("forwards, blackholes, cuts and forwards again", async () => {
    const { port } = await echoServer();
    const proxy = await TcpProxy.start({ host: "127.0.0.1", port });
    cleanups.push(() => proxy.close());
    expect(await roundTrip(proxy.port, "hello", 2_000)).toBe("hello");
    proxy.blackhole();
    await expect(roundTrip(proxy.port, "lost", 300)).rejects.toThrow("timeout");
    proxy.cut();
    await expect(roundTrip(proxy.port, "refused", 2_000)).rejects.toThrow();
    proxy.forward();
    expect(await roundTrip(proxy.port, "back", 2_000)).toBe("back");
    proxy.delay(200);
    const started = performance.now();
    expect(await roundTrip(proxy.port, "slow", 3_000)).toBe("slow");
    expect(performance.now() - started).toBeGreaterThanOrEqual(350);
  });
});

/** An echo server that also records when each chunk arrived. */
async function recordingEchoServer(): Promise<{
  port: number;
  received: { at: number; text: string }[];
}> {
  const received: { at: number; text: string }[] = [];
  const server = createServer((socket) => {
    socket.on("data", (data) => {
      received.push({ at: performance.now(), text: data.toString() });
      socket.write(data);
    });
    socket.on("error", () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  cleanups.push(() => new Promise((resolve) => server.close(() => resolve())));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no port");
  return { port: address.port, received };
}

describe("TcpProxy one-way faults", () => {
  it("delayReplies: the request reaches the server at once, the reply comes late", async () => {
    const { port, received } = await recordingEchoServer();
    const proxy = await TcpProxy.start({ host: "127.0.0.1", port });
    cleanups.push(() => proxy.close());
    proxy.delayReplies(400);
    const sent = performance.now();
    const reply = await roundTrip(proxy.port, "late", 3_000);
    const answered = performance.now();
    expect(reply).toBe("late");
    expect(received.map((r) => r.text)).toEqual(["late"]);
    expect((received[0] as { at: number }).at - sent).toBeLessThan(300);
    expect(answered - sent).toBeGreaterThanOrEqual(390);
    // Back to forwarding: with nothing delayed on the way, a reply arrives at once.
    proxy.forward();
    const quick = performance.now();
    expect(await roundTrip(proxy.port, "quick", 3_000)).toBe("quick");
    expect(performance.now() - quick).toBeLessThan(300);
  });

  it("a reply forwarded after delayReplies ends never overtakes one still delayed", async () => {
    const { port } = await recordingEchoServer();
    const proxy = await TcpProxy.start({ host: "127.0.0.1", port });
    cleanups.push(() => proxy.close());
    const socket = connect(proxy.port, "127.0.0.1");
    cleanups.push(async () => {
      socket.destroy();
    });
    let text = "";
    socket.on("data", (data) => {
      text += data.toString();
    });
    await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
    proxy.delayReplies(300);
    socket.write("first;");
    await new Promise((r) => setTimeout(r, 100));
    proxy.forward();
    socket.write("second;");
    await new Promise((r) => setTimeout(r, 100));
    expect(text).toBe(""); // the second reply waits behind the first
    await new Promise((r) => setTimeout(r, 400));
    expect(text).toBe("first;second;");
  });

  it("dropReplies: the server gets the request, the client never hears back", async () => {
    const { port, received } = await recordingEchoServer();
    const proxy = await TcpProxy.start({ host: "127.0.0.1", port });
    cleanups.push(() => proxy.close());
    expect(await roundTrip(proxy.port, "first", 2_000)).toBe("first");
    proxy.dropReplies();
    expect(proxy.mode).toBe("drop-replies");
    await expect(roundTrip(proxy.port, "unanswered", 500)).rejects.toThrow("timeout");
    expect(received.map((r) => r.text)).toEqual(["first", "unanswered"]);
    proxy.forward();
    expect(await roundTrip(proxy.port, "again", 2_000)).toBe("again");
  });
});

/** Lease length per backend in these tests: the shortest each accepts in the conformance suite. */
const TTL_MS: Record<BackendKind, number> = {
  memory: 400,
  redis: 1_000,
  redlock: 1_000,
  etcd: 2_000,
  zookeeper: 2_000,
  postgres: 1_000,
  "postgres-lease": 1_000,
  dynamodb: 1_000,
  "azure-blob": 2_000,
  mysql: 1_000,
  "mysql-lease": 1_000,
};

/** Every way a user's write loop asks whether it may write. */
const CHECKS: readonly TickCheck[] = ["held", "throwIfLost", "aborted", "throwIfAborted"];

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

for (const kind of ALL_BACKENDS) {
  describeBackend(kind, (serverUrl) => {
    // A coordinator's URL for the embedded backend (one per worker process: the pause is
    // the worker's own either way).
    const url = kind === "memory" ? "memory://" : serverUrl;
    describe("a holder in a write loop, frozen past its TTL (SIGSTOP) and woken (SIGCONT)", () => {
      const workers: LockWorker[] = [];
      afterEach(async () => {
        await Promise.allSettled(workers.splice(0).map((w) => w.kill()));
      });

      it(`starts no write after waking, without a fence, whichever check its loop makes (${CHECKS.join(", ")})`, async () => {
        const ttlMs = TTL_MS[kind];
        // One worker per check, so each loop's own check is the first look at its lock on waking.
        workers.push(...(await Promise.all(CHECKS.map(() => spawnLockWorker({ url, ttlMs })))));
        const run = randomUUID();
        const names = CHECKS.map((check) => `paused-loop-${check}-${run}`);
        await Promise.all(
          workers.map((w, i) =>
            w.request(
              { op: "acquire", name: names[i] as string, waitMs: 20_000 },
              (e) => e.event === "acquired",
              30_000,
            ),
          ),
        );
        workers.forEach((w, i) => {
          w.send({ op: "tick", name: names[i] as string, everyMs: 10, check: CHECKS[i] });
        });
        await Promise.all(
          workers.map((w) => w.waitFor((e) => e.event === "wrote" && e.seq >= 5, 10_000)),
        );
        for (const w of workers) w.pause();
        // What they wrote before the freeze arrives; after this nothing can until SIGCONT.
        await sleep(300);
        const frozenAt = workers.map((w) => w.events.length);
        await sleep(2 * ttlMs + 500);
        // A check that passes from here on is a check made after waking. A write emitted after
        // the freeze whose check passed before it is the window only a fence closes: on a busy
        // host the stop can land between a loop's check and its write.
        const wokeAt = process.hrtime.bigint();
        for (const w of workers) w.resume();
        await Promise.all(
          workers.map((w, i) => w.waitFor((e) => e.event === "refused", 10_000, frozenAt[i])),
        );
        const afterWaking = CHECKS.map((_, i) =>
          (workers[i] as LockWorker).events.slice(frozenAt[i]),
        );
        const context = `${kind}; events after waking: ${JSON.stringify(afterWaking)}`;
        const perCheck = <T>(f: (events: WorkerEvent[]) => T) =>
          Object.fromEntries(CHECKS.map((check, i) => [check, f(afterWaking[i] as WorkerEvent[])]));
        // 0 writes started after waking, whichever check the loop makes.
        const checkedAfterWaking = (e: WorkerEvent) =>
          e.event === "wrote" && (e.checkedAt === undefined || BigInt(e.checkedAt) >= wokeAt);
        expect(
          perCheck((events) => events.filter(checkedAfterWaking).length),
          context,
        ).toEqual(perCheck(() => 0));
        // Each check told why: the lease ran out during the pause (the local deadline passed,
        // or, if the client heard it first, the store ended the session).
        const PAUSED = "lost during the pause";
        const lossOf = (events: WorkerEvent[], type: "refused" | "lost") => {
          const e = events.find((event) => event.event === type) as { reason?: string } | undefined;
          return e?.reason === "deadline" || e?.reason === "session-lost" ? PAUSED : e?.reason;
        };
        expect(
          perCheck((events) => lossOf(events, "refused")),
          context,
        ).toEqual(perCheck(() => PAUSED));
        expect(
          perCheck((events) => lossOf(events, "lost")),
          context,
        ).toEqual(perCheck(() => PAUSED));
      }, 60_000);
    });
  });
}

describeBackend("memory", () => {
  describe("a permit holder in a worker process", () => {
    const workers: LockWorker[] = [];
    afterEach(async () => {
      await Promise.allSettled(workers.splice(0).map((w) => w.kill()));
    });

    it("takes and releases permits, reads and writes by hold id; frozen past its TTL, each hold's signal aborts on SIGCONT", async () => {
      const ttlMs = TTL_MS.memory;
      const worker = await spawnLockWorker({ url: "memory://", ttlMs });
      workers.push(worker);
      const history = new History();
      const recorded = new RecordedWorker(history, "w", worker);
      const acquired = (hold: string) => (e: WorkerEvent) =>
        e.event === "permits-acquired" && e.hold === hold;
      recorded.acquirePermits("sem", { permits: 2, limit: 3, mode: "permit" }, "p1");
      recorded.acquirePermits("sem", { permits: 1, limit: 3, mode: "permit" }, "p2");
      recorded.acquirePermits("rw", READ_SHARE, "r1");
      const [p1, p2, r1] = await Promise.all(
        ["p1", "p2", "r1"].map((hold) => worker.waitFor(acquired(hold), 10_000)),
      );
      expect(p1).toMatchObject({ name: "sem", mode: "permit" });
      expect(BigInt((p2 as { token: string }).token)).toBeGreaterThan(
        BigInt((p1 as { token: string }).token),
      );
      expect(r1).toMatchObject({ name: "rw", mode: "read", token: "0" });
      // A fourth permit does not fit: the error names the hold.
      recorded.acquirePermits("sem", { permits: 1, limit: 3, mode: "permit" }, "p3", { waitMs: 0 });
      recorded.acquirePermits("sem", { permits: 4, limit: 3, mode: "permit" }, "p4");
      const errors = await Promise.all(
        ["p3", "p4"].map((hold) =>
          worker.waitFor((e) => e.event === "error" && e.hold === hold, 10_000),
        ),
      );
      expect(errors.map((e) => (e as { code: string }).code)).toEqual([
        "BATON_LOCK_HELD",
        "BATON_CONFIG",
      ]);
      recorded.releasePermits("sem", "p2");
      await worker.waitFor((e) => e.event === "permits-released" && e.hold === "p2", 10_000);
      recorded.acquirePermits("rw", READ_SHARE, "r2");
      await worker.waitFor(acquired("r2"), 10_000);
      recorded.pause();
      await sleep(2 * ttlMs + 300);
      const from = worker.events.length;
      recorded.resume();
      const lost = await Promise.all(
        ["p1", "r1", "r2"].map((hold) =>
          worker.waitFor((e) => e.event === "permits-lost" && e.hold === hold, 10_000, from),
        ),
      );
      for (const e of lost) expect((e as { reason: string }).reason).toBe("deadline");
      recorded.acquirePermits("rw", WRITE_SHARE, "w1");
      const w1 = await worker.waitFor(acquired("w1"), 10_000, from);
      expect(BigInt((w1 as { token: string }).token)).toBeGreaterThan(0n);
      recorded.releasePermits("rw", "w1");
      await worker.waitFor((e) => e.event === "permits-released" && e.hold === "w1", 10_000);
      recorded.detach();
      const holds = certainHolds(history.entries).map((h) => [h.hold, h.endedBy]);
      expect(holds).toEqual([
        ["p1", "pause"],
        ["p2", "release"],
        ["r1", "pause"],
        ["r2", "pause"],
        ["w1", "release"],
      ]);
      expect(
        history.entries.filter((e) => e.type === "acquire").map((e) => e.result?.status),
      ).toEqual(["ok", "ok", "ok", "fail", "fail", "ok", "ok"]);
      expect(checkHistory(history, { fencing: true })).toEqual([]);
    }, 60_000);
  });
});
