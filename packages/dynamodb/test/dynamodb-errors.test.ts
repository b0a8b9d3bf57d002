import {
  ConditionalCheckFailedException,
  ProvisionedThroughputExceededException,
  ResourceNotFoundException,
} from "@aws-sdk/client-dynamodb";
import { BackendUnavailableError, ConfigError, isTransient, SessionLostError } from "@baton/core";
import { describe, expect, it } from "vitest";
import { dynamodbContext, isConditionFailed, toBatonError } from "../src/dynamodb-errors.js";

const context = dynamodbContext('could not acquire "job"', "locks", "127.0.0.1:8000");
const meta = { $metadata: { httpStatusCode: 400 } };

/** An SDK service error as the client throws it for `name` (dynalite's and DynamoDB's shape). */
function serviceError(name: string, message: string): Error {
  return Object.assign(new Error(message), { name, $fault: "client", ...meta });
}

describe("dynamodb toBatonError", () => {
  it("throttling and server errors are transient BackendUnavailableErrors naming the table", () => {
    const throttled = toBatonError(
      new ProvisionedThroughputExceededException({
        message: "The level of configured provisioned throughput for the table was exceeded",
        ...meta,
      }),
      context,
    );
    expect(throttled).toBeInstanceOf(BackendUnavailableError);
    expect(isTransient(throttled)).toBe(true);
    expect(throttled.message).toContain('DynamoDB table "locks" at 127.0.0.1:8000');
    for (const name of ["ThrottlingException", "InternalServerError", "RequestLimitExceeded"]) {
      const mapped = toBatonError(serviceError(name, "busy"), context);
      expect(mapped).toBeInstanceOf(BackendUnavailableError);
      expect(isTransient(mapped)).toBe(true);
    }
  });

  it("a missing table is a ConfigError on table that says how to create it", () => {
    const mapped = toBatonError(
      new ResourceNotFoundException({ message: "Requested resource not found", ...meta }),
      context,
    );
    expect(mapped).toBeInstanceOf(ConfigError);
    expect((mapped as ConfigError).field).toBe("table");
    expect(mapped.message).toContain("createTable");
    expect(isTransient(mapped)).toBe(false);
  });

  it("a key the table's schema refuses is a ConfigError on table", () => {
    const mapped = toBatonError(
      serviceError("ValidationException", "The provided key element does not match the schema"),
      context,
    );
    expect(mapped).toBeInstanceOf(ConfigError);
    expect(mapped.message).toContain('partition key "pk"');
  });

  it("refused or missing credentials are a ConfigError on credentials", () => {
    for (const error of [
      serviceError(
        "UnrecognizedClientException",
        "The security token included in the request is invalid",
      ),
      serviceError(
        "MissingAuthenticationTokenException",
        "Request is missing Authentication Token",
      ),
      Object.assign(new Error("Could not load credentials from any providers"), {
        name: "CredentialsProviderError",
      }),
    ]) {
      const mapped = toBatonError(error, context);
      expect(mapped).toBeInstanceOf(ConfigError);
      expect((mapped as ConfigError).field).toBe("credentials");
    }
  });

  it("a refused connection is a BackendUnavailableError naming the endpoint and the cause", () => {
    const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:8000"), {
      code: "ECONNREFUSED",
    });
    const mapped = toBatonError(refused, context);
    expect(mapped).toBeInstanceOf(BackendUnavailableError);
    expect(mapped.message).toContain("ECONNREFUSED 127.0.0.1:8000");
    expect(mapped.cause).toBe(refused);
  });

  it("a Baton error passes through unchanged", () => {
    const lost = new SessionLostError("gone");
    expect(toBatonError(lost, context)).toBe(lost);
  });

  it("a failed condition is told apart from a failure", () => {
    expect(
      isConditionFailed(
        new ConditionalCheckFailedException({ message: "The conditional request failed", ...meta }),
      ),
    ).toBe(true);
    expect(isConditionFailed(serviceError("ValidationException", "x"))).toBe(false);
  });
});
