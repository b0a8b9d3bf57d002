import { DynamoDBClient, GetItemCommand } from "@aws-sdk/client-dynamodb";
import { describe, expect, it } from "vitest";
import {
  type CreateLockTableOptions,
  createLockTable,
  DynamoDBBackend,
  type DynamoDBClientLike,
} from "../src/index.js";

describe("dynamodb client shape", () => {
  it("a DynamoDBClient of the AWS SDK is a DynamoDBClientLike, for the backend and createLockTable", async () => {
    const client = new DynamoDBClient({ region: "us-east-1", endpoint: "http://127.0.0.1:1" });
    // Compile-time checks: the SDK's client is assignable where Baton takes a client.
    const like: DynamoDBClientLike = client;
    const create: (c: DynamoDBClient, t: string, o?: CreateLockTableOptions) => Promise<void> =
      createLockTable;
    expect(typeof create).toBe("function");
    const backend = new DynamoDBBackend({ table: "locks", client });
    expect(backend.table).toBe("locks");
    // The shape's send is the SDK's: a command and an abort signal.
    const controller = new AbortController();
    controller.abort();
    await expect(
      like.send(new GetItemCommand({ TableName: "locks", Key: { pk: { S: "x" } } }), {
        abortSignal: controller.signal,
      }),
    ).rejects.toBeDefined();
    await backend.close();
    client.destroy();
  });

  it("refuses an object without send, naming the field", () => {
    expect(() => new DynamoDBBackend({ table: "locks", client: {} as DynamoDBClientLike })).toThrow(
      /client/,
    );
  });
});
