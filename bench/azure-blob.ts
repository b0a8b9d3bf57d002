import { randomUUID } from "node:crypto";
import type { ContainerClient } from "@azure/storage-blob";
import { AzureBlobBackend, azureBlobOptionsFromUrl } from "@baton/azure-blob";
import type { ServerGroup } from "@baton/conformance/harness";
import { parseBackendUrl } from "@baton/core";
import { groupCpuOptions, runBackendBench } from "./lib/backend-run.js";
import { measureCoordinatorHandoffs } from "./lib/handoff.js";
import { type HeldItems, measureBackendHeldLocks } from "./lib/held-locks.js";
import type { BackendResult, LatencySection, Row } from "./lib/results.js";
import { pause, type ServiceBench } from "./lib/service.js";
import { benchCoordinator } from "./lib/telemetry.js";
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
    service: serviceBench,
    scale: {
      locks: 2_000,
      watched: 1_000,
      why: "2,000 locks and 1,000 watched names: Azurite serves a few hundred requests per second here, and each lock is a blob",
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
    notes:
      items?.noun === "permits"
        ? []
        : [
            "every lock blob names its session; one heartbeat write per session renews them all (Azure leases are per blob: an infinite lease per lock, never renewed)",
          ],
  });
}

/**
 * The service pattern on Azure Blob (bench/lib/service.ts): the raw floor (Acquire Lease,
 * Put Blob under it with the raised counter, Release Lease; a taken key retried every 1 ms)
 * on one ContainerClient, and one coordinator.
 */
export function serviceBench(url: string): ServiceBench {
  return {
    variants: [
      {
        name: "raw Acquire Lease + Put Blob + Release Lease",
        role: "floor",
        open: async () => {
          const owner = backendOf(url);
          const container = owner.containerClient as ContainerClient;
          await container.createIfNotExists();
          const tokens = new Map<string, number>();
          return {
            op: async (key, signal) => {
              const blob = container.getBlockBlobClient(`bench-svc/${key.name}`);
              const lease = blob.getBlobLeaseClient(randomUUID());
              for (;;) {
                try {
                  await lease.acquireLease(-1);
                  break;
                } catch (error) {
                  const status = (error as { statusCode?: number }).statusCode;
                  if (status === 404) await blob.upload("{}", 2).catch(() => undefined);
                  else if (status === 409) await pause(1, signal);
                  else throw error;
                }
              }
              const token = (tokens.get(key.name) ?? 0) + 1;
              tokens.set(key.name, token);
              await blob.upload("{}", 2, {
                metadata: { batontoken: String(token), batonsession: "bench-raw" },
                conditions: { leaseId: lease.leaseId },
              });
              await lease.releaseLease();
            },
            close: () => owner.close(),
          };
        },
      },
      {
        name: "baton coordinator",
        role: "coordinator",
        open: async () => {
          const coordinator = benchCoordinator({ url, ttlMs: 15_000, ownerId: "bench-service" });
          return {
            op: async (key, signal) => {
              const lock = await coordinator.acquire(key.name, { waitMs: 60_000, signal });
              await lock.release();
            },
            close: () => coordinator.close(),
          };
        },
      },
    ],
    notes: [
      "one ContainerClient per client object (the SDK's own HTTP agent); the coordinator: its AzureBlobBackend's",
      "a taken key: the raw floor retries its Acquire Lease every 1 ms; Baton waits as its adapter does",
    ],
    processVariants: ["raw Acquire Lease + Put Blob + Release Lease", "baton coordinator"],
  };
}
