import type { ContainerClient } from "@azure/storage-blob";
import { AzureBlobBackend, azureBlobOptionsFromUrl } from "@baton/azure-blob";
import type { ServerGroup } from "@baton/conformance/harness";
import { parseBackendUrl } from "@baton/core";
import { groupCpuOptions, runBackendBench } from "./lib/backend-run.js";
import { measureCoordinatorHandoffs } from "./lib/handoff.js";
import { type HeldItems, measureBackendHeldLocks } from "./lib/held-locks.js";
import type { BackendResult, LatencySection, Row } from "./lib/results.js";
import { measureUncontended } from "./lib/uncontended.js";

const WAITERS = 8;
const HANDOFFS = 200;

export function run(): Promise<BackendResult> {
  return runBackendBench({
    backend: "azure-blob",
    serverVersion: async () => "Azurite 3.35.0 (Azure Blob Storage emulator on Node.js, in memory)",
    uncontended: (url, group) => uncontended(url, group),
    handoffs: (url, floor, group) => handoffs(url, floor, group),
    heldLocks: (url, items) => heldLocks(url, items),
    permits: {
      rounds: { warmup: 50, rounds: 30, perRound: 20, maxMs: 60_000 },
      handoffs: HANDOFFS,
      ttlMs: 15_000,
    },
    takeoverTtlMs: 2_000,
    throughputTtlMs: 15_000,
    connections: "each coordinator has its own AzureBlobBackend (its own ContainerClient)",
  });
}

function backendOf(url: string): AzureBlobBackend {
  return new AzureBlobBackend(azureBlobOptionsFromUrl(parseBackendUrl(url)));
}

async function uncontended(url: string, group: ServerGroup | undefined): Promise<LatencySection> {
  // The floor's own backend only lends its ContainerClient (the SDK's, built from the URL).
  const rawOwner = backendOf(url);
  // The client the backend built from the URL: the SDK's own ContainerClient.
  const rawContainer = rawOwner.containerClient as ContainerClient;
  const raw = rawContainer.getBlockBlobClient("bench-raw/lock");
  const rawLease = raw.getBlobLeaseClient("00000000-0000-4000-8000-000000000001");
  let etag = "";
  let token = 0;
  try {
    return await measureUncontended({
      backend: backendOf(url),
      coordinatorTtlMs: 15_000,
      sessionTtlMs: 60_000,
      sessionLock: "bench-session",
      coordinatorLock: "bench-coordinator",
      floor: [
        {
          name: "raw Acquire Lease + Put Blob + Release Lease",
          role: "floor",
          setup: async () => {
            await rawContainer.createIfNotExists();
            etag = (await raw.upload("{}", 2, { metadata: { batontoken: "0" } })).etag as string;
          },
          // What the adapter sends for a lock its own session released last: the lease on the
          // ETag it left, the counter raised under the lease, the release on the new ETag.
          op: async () => {
            await rawLease.acquireLease(-1, { conditions: { ifMatch: etag } });
            token += 1;
            etag = (
              await raw.upload("{}", 2, {
                metadata: { batontoken: String(token), batonsession: "bench-raw" },
                conditions: { ifMatch: etag, leaseId: rawLease.leaseId },
              })
            ).etag as string;
            await rawLease.releaseLease({ conditions: { ifMatch: etag } });
          },
        },
      ],
      rounds: { warmup: 50, rounds: 30, perRound: 20, maxMs: 60_000 },
      group,
      title: "uncontended acquire + release (Azurite)",
      notes: [
        "the floor on its own ContainerClient; Baton's session and coordinator share one AzureBlobBackend",
        "three requests per acquire + release in every row (a lock this session released last): Acquire Lease, Put Blob under the lease, Release Lease; a lock last held by another session costs one more (a HEAD) on acquire, two more when this session held it before (the ETag it kept is refused first)",
        "server time: Azurite's process CPU, its idle rate (read over 1 s before the rounds) taken off",
      ],
    });
  } finally {
    await rawOwner.close();
  }
}

async function handoffs(
  url: string,
  floor: Row | undefined,
  group: ServerGroup | undefined,
): Promise<LatencySection> {
  return measureCoordinatorHandoffs({
    url,
    ttlMs: 15_000,
    waiters: WAITERS,
    options: { handoffs: HANDOFFS, ...groupCpuOptions(group) },
    floor,
    notes: [
      `${WAITERS + 1} contenders, each its own coordinator (own AzureBlobBackend); waiters in other processes' position poll the lock blob with a HEAD, backing off from 25-50 ms up to 250-500 ms, and read a holder's heartbeat once per its TTL`,
    ],
  });
}

async function heldLocks(url: string, items?: HeldItems) {
  return measureBackendHeldLocks(backendOf(url), {
    ...(items ? { items } : {}),
    locks: 2_000,
    notes: items
      ? []
      : [
          "every lock blob names its session; one heartbeat write per session renews them all (Azure leases are per blob: an infinite lease per lock, never renewed)",
        ],
  });
}
