/**
 * The example of conformance/README.md, run as a test: two coordinators on one lock, every
 * operation recorded, a fence in front of the store, and the history checked.
 */
import { createCoordinator, MemoryBackend, MemoryFence } from "@baton/core";
import { expect, it } from "vitest";
import { checkHistory, History, RecordedCoordinator } from "../src/history/index.js";

it("README example: a recorded handover through a fence has no violation", async () => {
  const backend = new MemoryBackend();
  const history = new History();
  const fence = new MemoryFence();
  const a = new RecordedCoordinator(history, "a", createCoordinator({ backend, ttlMs: 1_000 }));
  const b = new RecordedCoordinator(history, "b", createCoordinator({ backend, ttlMs: 1_000 }));
  const write = async (process: string, token: bigint) => {
    const w = history.invokeWrite(process, "invoices", { token, fenced: true, value: process });
    await fence
      .write("invoices", token, () => undefined)
      .then(
        () => w.accepted(),
        () => w.rejected(),
      );
  };
  const first = await a.acquire("invoices");
  await write("a", first.token);
  await a.release(first);
  const second = await b.acquire("invoices");
  await write("b", second.token);
  await write("a", first.token); // a late write with the old token: the fence rejects it
  await b.release(second);
  expect(checkHistory(history, { fencing: true })).toEqual([]);
  expect(history.entries.filter((e) => e.type === "write" && e.result === "rejected")).toHaveLength(
    1,
  );
  await a.coordinator.close();
  await b.coordinator.close();
});
