/**
 * Runner 1 of the demo in its own process, for real backends: a real SIGSTOP freezes it,
 * client library and all, so the store's lease really runs out. The invoices table and the
 * fence live in the demo's process; every write is a request that the demo answers.
 */
import { createInterface } from "node:readline";
import {
  createCoordinator,
  type Fence,
  type Lock,
  LockTimeoutError,
  StaleTokenError,
  sleep,
  systemClock,
} from "@baton/core";
import { loadAdapter } from "../load-adapter.js";
import type { DemoReply, WorkerMessage, WorkerSettings } from "./runner-protocol.js";

const settings = JSON.parse(process.env.BATON_DEMO_RUNNER ?? "{}") as WorkerSettings;
let nextId = 1;
const pending = new Map<number, (reply: DemoReply) => void>();
let stopped = false;

function send(message: WorkerMessage): void {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

/** A message that expects a reply, before its id is assigned. */
type Request = WorkerMessage extends infer M
  ? M extends { id: number }
    ? Omit<M, "id">
    : never
  : never;

function request(message: Request): Promise<DemoReply> {
  const id = nextId++;
  return new Promise((resolve) => {
    pending.set(id, resolve);
    send({ ...message, id } as WorkerMessage);
  });
}

createInterface({ input: process.stdin }).on("line", (line) => {
  const reply = JSON.parse(line) as DemoReply;
  if (reply.t === "stop") {
    stopped = true;
    return;
  }
  const resolve = pending.get(reply.id);
  pending.delete(reply.id);
  resolve?.(reply);
});

/** The demo's fence, one request away. */
const remoteFence: Fence = {
  async raise(_resource, token) {
    const reply = await request({ t: "raise", token: `${token}` });
    if (reply.t === "ack" && !reply.ok)
      throw new StaleTokenError(settings.lockName, token, token + 1n);
  },
};

await loadAdapter(settings.url);
const coordinator = createCoordinator({
  url: settings.url,
  ttlMs: settings.ttlMs,
  ownerId: "runner-1",
  ...(settings.fenced ? { mode: "correctness" as const, fence: remoteFence } : {}),
});
coordinator.on("acquired", ({ token }) =>
  send({ t: "event", kind: "acquired", token: `${token}` }),
);
coordinator.on("released", ({ token }) =>
  send({ t: "event", kind: "released", token: `${token}` }),
);
coordinator.on("lost", ({ token }) => send({ t: "event", kind: "lost", token: `${token}` }));

let bills = 0;
let frozen = false;

async function bill(lock: Lock): Promise<void> {
  const todo = await request({ t: "todo" });
  if (todo.t !== "todo") return;
  for (const clientId of todo.clients) {
    const [min, max] = settings.billMs;
    await sleep(systemClock, min + Math.random() * (max - min));
    if (settings.checkSignal && !lock.held) return;
    bills++;
    if (bills === settings.freezeBeforeBill && !frozen) {
      // The lock check passed; the process freezes before the write. A real SIGSTOP.
      frozen = true;
      send({ t: "freezing" });
      process.kill(process.pid, "SIGSTOP");
    }
    const ack = await request({
      t: "write",
      token: `${lock.token}`,
      clientId,
      amountCents: 10_000 + clientId * 125,
    });
    if (ack.t === "ack" && !ack.ok) return; // the fence has seen a newer token: stop writing
  }
  await request({ t: "done-write", token: `${lock.token}` });
}

try {
  send({ t: "ready" });
  while (!stopped) {
    const state = await request({ t: "todo" });
    if (state.t === "todo" && state.done) break;
    let lock: Lock;
    try {
      lock = await coordinator.acquire(settings.lockName, { waitMs: settings.waitMs });
    } catch (error) {
      if (error instanceof LockTimeoutError) continue;
      throw error;
    }
    try {
      await bill(lock);
    } finally {
      await lock.release().catch(() => undefined);
    }
  }
  await coordinator.close();
  send({ t: "exit" });
} catch (error) {
  const e = error as { code?: string; message?: string; stack?: string };
  send({
    t: "exit",
    error: String(e?.stack ?? error),
    ...(e?.code ? { code: e.code } : {}),
    message: String(e?.message ?? error),
  });
  await coordinator.close().catch(() => undefined);
}
process.exit(0);
