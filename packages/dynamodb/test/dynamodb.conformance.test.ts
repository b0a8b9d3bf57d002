import { runConformance } from "@baton/conformance";
import { describeBackend } from "@baton/conformance/harness";
import { parseBackendUrl } from "@baton/core";
import { DynamoDBBackend, dynamodbOptionsFromUrl } from "../src/index.js";

describeBackend("dynamodb", (url) => {
  runConformance(
    {
      name: "dynamodb",
      ttlMs: 1_500,
      url,
      createBackend: () => new DynamoDBBackend(dynamodbOptionsFromUrl(parseBackendUrl(url))),
    },
    {
      fencing: "monotonic",
      fifo: false,
      waiters: "poll-resets",
      watch: false,
      crossProcess: true,
      semaphores: false,
      timeLeft: true,
    },
  );
});
