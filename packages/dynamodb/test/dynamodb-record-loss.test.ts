import { DeleteItemCommand } from "@aws-sdk/client-dynamodb";
import { runRecordLoss } from "@baton/conformance";
import { describeBackend } from "@baton/conformance/harness";
import { parseBackendUrl } from "@baton/core";
import { afterAll, describe, expect, it } from "vitest";
import { encodeKey } from "../src/dynamodb-codec.js";
import { recordKey } from "../src/dynamodb-keys.js";
import { dynamodbOptionsFromUrl, resolveDynamoDBOptions } from "../src/dynamodb-options.js";
import { nextVersion } from "../src/dynamodb-records.js";
import { DynamoDBBackend } from "../src/index.js";

describe("dynamodb record versions", () => {
  it("come from the writer's clock with random bits below each millisecond, and rise with every write", () => {
    const now = 1_800_000_000_000;
    const created = nextVersion(null, now);
    expect(created >= BigInt(now) << 20n && created < BigInt(now + 1) << 20n).toBe(true);
    const later = nextVersion(created, now + 1);
    expect(later >= BigInt(now + 1) << 20n).toBe(true);
    // A clock behind the version expected (another writer's clock was ahead): one above it.
    expect(nextVersion(later, now - 60_000)).toBe(later + 1n);
    const sameMs = new Set(Array.from({ length: 50 }, () => nextVersion(null, now)));
    expect(sameMs.size).toBeGreaterThan(45);
  });
});

describeBackend("dynamodb", (url) => {
  const admin = resolveDynamoDBOptions(dynamodbOptionsFromUrl(parseBackendUrl(url)));
  afterAll(() => admin.destroyClient?.());
  runRecordLoss({
    name: "dynamodb",
    ttlMs: 1_500,
    url,
    createBackend: () => new DynamoDBBackend(dynamodbOptionsFromUrl(parseBackendUrl(url))),
    deleteRecord: async (key) => {
      await admin.client.send(
        new DeleteItemCommand({
          TableName: admin.table,
          Key: encodeKey(recordKey(admin.prefix, key)),
        }),
      );
    },
  });
});
