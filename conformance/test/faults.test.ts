import { connect, createServer, type Server } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { type LockWorker, spawnLockWorker, TcpProxy } from "../src/faults/index.js";

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

describe("lock worker", () => {
  let worker: LockWorker | undefined;
  afterEach(async () => {
    await worker?.kill();
    worker = undefined;
  });

  it("holds a lock in its own process; after SIGSTOP past the deadline it writes nothing more on SIGCONT", async () => {
    const ttlMs = 400;
    worker = await spawnLockWorker({ url: "memory://", ttlMs });
    const acquired = await worker.request(
      { op: "acquire", name: "job" },
      (e) => e.event === "acquired",
    );
    expect(acquired).toMatchObject({ event: "acquired", token: "1" });
    worker.send({ op: "tick", name: "job", everyMs: 20 });
    await worker.waitFor((e) => e.event === "wrote" && e.seq >= 3, 5_000);
    worker.pause();
    const frozenAt = worker.events.length;
    await new Promise((resolve) => setTimeout(resolve, ttlMs * 3));
    worker.resume();
    // On waking, the first thing the write loop sees is the loss: no write after the pause.
    await worker.waitFor((e) => e.event === "refused", 5_000, frozenAt);
    const afterPause = worker.events.slice(frozenAt);
    expect(afterPause.filter((e) => e.event === "wrote")).toEqual([]);
    expect(afterPause.some((e) => e.event === "lost" && e.reason === "deadline")).toBe(true);
  });
});
