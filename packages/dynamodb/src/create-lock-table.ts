import { CreateTableCommand, DescribeTableCommand } from "@aws-sdk/client-dynamodb";
import { BackendUnavailableError, sleep, systemClock } from "@baton/core";
import type { DynamoDBClientLike } from "./dynamodb-client.js";
import { toBatonError } from "./dynamodb-errors.js";
import { PARTITION_KEY } from "./dynamodb-keys.js";
import type { SdkClient } from "./dynamodb-table.js";

/** Options of {@link createLockTable}. */
export interface CreateLockTableOptions {
  /** How long to wait for the table to become active, in ms (default 60000). */
  readonly timeoutMs?: number;
}

/** Pause between looks at a table being created, in ms. */
const TABLE_POLL_MS = 200;

/**
 * Creates a table Baton can use: string partition key `pk`, no sort key, on-demand capacity
 * (`PAY_PER_REQUEST`), and waits until it is `ACTIVE`. A table of that name that exists
 * already is left as it is. The same as
 * `aws dynamodb create-table --table-name NAME --attribute-definitions AttributeName=pk,AttributeType=S --key-schema AttributeName=pk,KeyType=HASH --billing-mode PAY_PER_REQUEST`.
 */
export async function createLockTable(
  client: DynamoDBClientLike,
  table: string,
  options: CreateLockTableOptions = {},
): Promise<void> {
  const deadline = performance.now() + (options.timeoutMs ?? 60_000);
  const sdk = client as SdkClient;
  try {
    await sdk.send(
      new CreateTableCommand({
        TableName: table,
        AttributeDefinitions: [{ AttributeName: PARTITION_KEY, AttributeType: "S" }],
        KeySchema: [{ AttributeName: PARTITION_KEY, KeyType: "HASH" }],
        BillingMode: "PAY_PER_REQUEST",
      }),
    );
  } catch (error) {
    if ((error as { name?: unknown }).name !== "ResourceInUseException") {
      throw toBatonError(error, `could not create the DynamoDB table "${table}"`);
    }
  }
  for (;;) {
    const described = await sdk
      .send(new DescribeTableCommand({ TableName: table }))
      .catch((error: unknown) => {
        throw toBatonError(error, `could not describe the DynamoDB table "${table}"`);
      });
    if (described.Table?.TableStatus === "ACTIVE") return;
    if (performance.now() > deadline) {
      throw new BackendUnavailableError(
        `the DynamoDB table "${table}" is not active after ${options.timeoutMs ?? 60_000} ms (status ${described.Table?.TableStatus ?? "unknown"})`,
      );
    }
    await sleep(systemClock, TABLE_POLL_MS);
  }
}
