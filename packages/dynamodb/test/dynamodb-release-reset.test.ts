import { releaseResetTests } from "@baton/conformance/faults";
import { describeBackend } from "@baton/conformance/harness";
import { parseBackendUrl } from "@baton/core";
import { dynamodbOptionsFromUrl } from "../src/dynamodb-options.js";
import { DynamoDBBackend } from "../src/index.js";

describeBackend("dynamodb", (url) => {
  releaseResetTests({
    url,
    createBackend: (u) => new DynamoDBBackend(dynamodbOptionsFromUrl(parseBackendUrl(u))),
  });
});
