import {
  ConditionalCheckFailedException,
  DynamoDBClient,
  ListTablesCommand,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import type { ServerGroup } from "@baton/conformance/harness";
import { parseBackendUrl } from "@baton/core";
import { DynamoDBBackend, dynamodbOptionsFromUrl } from "@baton/dynamodb";
import { groupCpuOptions, runBackendBench } from "./lib/backend-run.js";
import { measureCoordinatorHandoffs, sleep } from "./lib/handoff.js";
import { type HeldItems, measureBackendHeldLocks } from "./lib/held-locks.js";
import type { BackendResult, LatencySection, Row } from "./lib/results.js";
import { pause, type ServiceBench } from "./lib/service.js";
import { benchCoordinator } from "./lib/telemetry.js";
import { measureUncontended } from "./lib/uncontended.js";

const WAITERS = 8;
const HANDOFFS = 200;

export function run(): Promise<BackendResult> {
  return runBackendBench({
    backend: "dynamodb",
    serverVersion: async (url) => {
      await rawClient(url).send(new ListTablesCommand({}));
      return "dynalite 4.0.0 (DynamoDB API on Node.js, in memory)";
    },
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
      locks: 10_000,
      watched: 1_000,
      why: "10,000 locks and 1,000 watched names: dynalite serves a few hundred requests per second here, and a watch on DynamoDB reads the item",
    },
    takeoverTtlMs: 2_000,
    throughputTtlMs: 15_000,
    connections: "each coordinator has its own DynamoDBBackend (its own DynamoDBClient)",
  });
}

/** A DynamoDBClient of the AWS SDK on the harness's dynalite, as a user would build one. */
function rawClient(url: string): DynamoDBClient {
  const options = dynamodbOptionsFromUrl(parseBackendUrl(url));
  return new DynamoDBClient({
    endpoint: options.endpoint as string,
    region: options.region as string,
    ...(options.credentials === undefined ? {} : { credentials: options.credentials }),
    maxAttempts: 1,
  });
}

function backendOf(url: string): DynamoDBBackend {
  return new DynamoDBBackend(dynamodbOptionsFromUrl(parseBackendUrl(url)));
}

/**
 * The floor: what the adapter sends for an uncontended acquire and release, made with the raw
 * SDK: one conditional UpdateItem that sets the holder and raises the counter (ReturnValues
 * UPDATED_NEW), one conditional UpdateItem that removes the holder if the token still matches.
 */
function rawGrant(client: DynamoDBClient, table: string, key: string, session: string) {
  return async (): Promise<void> => {
    const granted = await client.send(
      new UpdateItemCommand({
        TableName: table,
        Key: { pk: { S: key } },
        UpdateExpression: "SET #s = :me, #o = :me ADD #t :one",
        ConditionExpression: "attribute_not_exists(#s)",
        ExpressionAttributeNames: { "#s": "session", "#o": "owner", "#t": "token" },
        ExpressionAttributeValues: { ":me": { S: session }, ":one": { N: "1" } },
        ReturnValues: "UPDATED_NEW",
      }),
    );
    const token = granted.Attributes?.token?.N as string;
    await client.send(
      new UpdateItemCommand({
        TableName: table,
        Key: { pk: { S: key } },
        UpdateExpression: "REMOVE #s, #o",
        ConditionExpression: "#s = :me AND #t = :token",
        ExpressionAttributeNames: { "#s": "session", "#o": "owner", "#t": "token" },
        ExpressionAttributeValues: { ":me": { S: session }, ":token": { N: token } },
      }),
    );
  };
}

async function uncontended(url: string, group: ServerGroup | undefined): Promise<LatencySection> {
  const { table } = dynamodbOptionsFromUrl(parseBackendUrl(url));
  const raw = rawClient(url);
  try {
    return await measureUncontended({
      backend: backendOf(url),
      coordinatorTtlMs: 15_000,
      sessionTtlMs: 60_000,
      sessionLock: "bench-session",
      coordinatorLock: "bench-coordinator",
      floor: [
        {
          name: "raw conditional UpdateItem grant+release",
          role: "floor",
          op: rawGrant(raw, table, "bench-raw/lock", "bench-raw"),
        },
      ],
      rounds: { warmup: 50, rounds: 30, perRound: 20, maxMs: 60_000 },
      group,
      title: "uncontended acquire + release (dynalite)",
      notes: [
        "the floor on its own DynamoDBClient; Baton's session and coordinator share one DynamoDBBackend",
        "two requests per acquire + release in every row: a conditional UpdateItem each",
        "server time: dynalite's process CPU, its idle rate (read over 1 s before the rounds) taken off",
      ],
    });
  } finally {
    raw.destroy();
  }
}

async function handoffs(
  url: string,
  floor: Row | undefined,
  group: ServerGroup | undefined,
): Promise<LatencySection> {
  const { table } = dynamodbOptionsFromUrl(parseBackendUrl(url));
  const clients = Array.from({ length: WAITERS + 1 }, () => rawClient(url));
  try {
    return await measureCoordinatorHandoffs({
      url,
      ttlMs: 15_000,
      waiters: WAITERS,
      after: [
        {
          name: "raw conditional UpdateItem, retry every 10 ms",
          role: "peer",
          contenders: clients.map((client, i) => ({
            acquire: async () => {
              const session = `raw-${i}`;
              for (;;) {
                try {
                  const granted = await client.send(
                    new UpdateItemCommand({
                      TableName: table,
                      Key: { pk: { S: "bench-raw-handoff" } },
                      UpdateExpression: "SET #s = :me ADD #t :one",
                      ConditionExpression: "attribute_not_exists(#s)",
                      ExpressionAttributeNames: { "#s": "session", "#t": "token" },
                      ExpressionAttributeValues: { ":me": { S: session }, ":one": { N: "1" } },
                      ReturnValues: "UPDATED_NEW",
                    }),
                  );
                  const token = granted.Attributes?.token?.N as string;
                  return async () => {
                    await client.send(
                      new UpdateItemCommand({
                        TableName: table,
                        Key: { pk: { S: "bench-raw-handoff" } },
                        UpdateExpression: "REMOVE #s",
                        ConditionExpression: "#s = :me AND #t = :token",
                        ExpressionAttributeNames: { "#s": "session", "#t": "token" },
                        ExpressionAttributeValues: {
                          ":me": { S: session },
                          ":token": { N: token },
                        },
                      }),
                    );
                  };
                } catch (error) {
                  if (!(error instanceof ConditionalCheckFailedException)) throw error;
                  await sleep(10);
                }
              }
            },
          })),
        },
      ],
      options: { handoffs: HANDOFFS, ...groupCpuOptions(group) },
      floor,
      notes: [
        `${WAITERS + 1} contenders, each its own coordinator (own DynamoDBBackend) or DynamoDBClient; Baton's waiters poll with a consistent read, backing off from 25-50 ms up to 250-500 ms; the raw loop retries its conditional write every 10 ms`,
      ],
    });
  } finally {
    for (const c of clients) c.destroy();
  }
}

async function heldLocks(url: string, items?: HeldItems) {
  return measureBackendHeldLocks(backendOf(url), {
    ...(items ? { items } : {}),
    notes:
      items?.noun === "permits"
        ? []
        : [
            "every lock item points at its session's item: one conditional UpdateItem of the session renews them all",
          ],
  });
}

/**
 * The service pattern on DynamoDB (bench/lib/service.ts): the raw floor's two conditional
 * UpdateItems (retrying a taken key every 1 ms) on one DynamoDBClient, and one coordinator.
 */
export function serviceBench(url: string): ServiceBench {
  const { table } = dynamodbOptionsFromUrl(parseBackendUrl(url));
  return {
    variants: [
      {
        name: "raw conditional UpdateItem grant+release",
        role: "floor",
        open: async () => {
          const raw = rawClient(url);
          return {
            op: async (key, signal) => {
              const grant = rawGrant(raw, table, `bench-svc/${key.name}`, "bench-raw");
              for (;;) {
                try {
                  await grant();
                  return;
                } catch (error) {
                  if ((error as { name?: string }).name !== "ConditionalCheckFailedException") {
                    throw error;
                  }
                  await pause(1, signal);
                }
              }
            },
            close: async () => raw.destroy(),
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
      "one DynamoDBClient per client object (the SDK's own HTTP agent); the coordinator: its DynamoDBBackend's",
      "a taken key: the raw floor retries every 1 ms; Baton waits as its adapter does",
    ],
    processVariants: ["raw conditional UpdateItem grant+release", "baton coordinator"],
  };
}
