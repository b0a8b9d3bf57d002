import { spawn } from "node:child_process";
import { BackendUnavailableError, StaleTokenError, siblingModuleArgs } from "@baton/core";
import type { InvoiceTable } from "./invoice-table.js";
import type { RecordingFence } from "./recording-fence.js";
import type { InvoiceJob } from "./runner.js";
import type { DemoReply, WorkerMessage, WorkerSettings } from "./runner-protocol.js";

const WORKER_ARGS = siblingModuleArgs(import.meta.url, "./runner-worker");

/** Options of {@link startRemoteRunner}. */
export interface RemoteRunnerOptions {
  readonly settings: WorkerSettings;
  readonly table: InvoiceTable;
  readonly job: InvoiceJob;
  readonly fence: RecordingFence | undefined;
  readonly onLockEvent: (kind: "acquired" | "released" | "lost", token: bigint) => void;
  /** The worker is about to SIGSTOP itself (its lock check passed, its write not yet sent). */
  readonly onFreezing: () => void;
}

/** Runner 1 in a worker process: the demo answers its reads and writes against the table. */
export function startRemoteRunner(options: RemoteRunnerOptions): {
  done: Promise<void>;
  resume: () => void;
} {
  const { table, job, fence } = options;
  const child = spawn(process.execPath, WORKER_ARGS, {
    env: { ...process.env, BATON_DEMO_RUNNER: JSON.stringify(options.settings) },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (d: string) => {
    stderr = (stderr + d).slice(-4_000);
  });
  const reply = (message: DemoReply) => {
    if (!child.stdin.destroyed) child.stdin.write(`${JSON.stringify(message)}\n`);
  };
  /** A write through the fence when there is one; false when the fence rejected it. */
  const save = async (token: bigint, write: () => unknown): Promise<boolean> => {
    if (fence === undefined) {
      write();
      return true;
    }
    try {
      await fence.write(job.lockName, token, write);
      return true;
    } catch (error) {
      if (error instanceof StaleTokenError) return false;
      throw error;
    }
  };
  const handle = async (m: WorkerMessage): Promise<void> => {
    switch (m.t) {
      case "event":
        options.onLockEvent(m.kind, BigInt(m.token));
        return;
      case "todo":
        reply({
          t: "todo",
          id: m.id,
          done: table.isDone(job.month),
          clients: table.unbilled(job.month, job.clientIds),
        });
        return;
      case "raise": {
        const ok = await save(BigInt(m.token), () => undefined);
        reply({ t: "ack", id: m.id, ok });
        return;
      }
      case "write": {
        const token = BigInt(m.token);
        const invoice = {
          clientId: m.clientId,
          month: job.month,
          amountCents: m.amountCents,
          token,
          runner: "runner 1",
        };
        reply({ t: "ack", id: m.id, ok: await save(token, () => table.insert(invoice)) });
        return;
      }
      case "done-write":
        reply({
          t: "ack",
          id: m.id,
          ok: await save(BigInt(m.token), () => table.markDone(job.month)),
        });
        return;
      case "freezing":
        options.onFreezing();
        return;
      default:
        return;
    }
  };
  const done = new Promise<void>((resolve, reject) => {
    let buffer = "";
    let failure: string | undefined;
    let unavailable: string | undefined;
    // Messages are handled one at a time, in order, as a database serves one connection.
    let queue = Promise.resolve();
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk: string) => {
      buffer += chunk;
      for (let at = buffer.indexOf("\n"); at >= 0; at = buffer.indexOf("\n")) {
        const line = buffer.slice(0, at);
        buffer = buffer.slice(at + 1);
        if (line.trim() === "") continue;
        const message = JSON.parse(line) as WorkerMessage;
        if (message.t === "exit" && message.error !== undefined) {
          failure = message.error;
          if (message.code === "BATON_BACKEND_UNAVAILABLE") unavailable = message.message;
        }
        queue = queue
          .then(() => handle(message))
          .catch((error: unknown) => {
            failure = String(error);
          });
      }
    });
    child.on("exit", () => {
      void queue.then(() => {
        if (unavailable !== undefined)
          reject(new BackendUnavailableError(`runner 1: ${unavailable}`));
        else if (failure !== undefined) reject(new Error(`runner 1 failed: ${failure}\n${stderr}`));
        else resolve();
      });
    });
  });
  return {
    done,
    resume: () => {
      child.kill("SIGCONT");
    },
  };
}
