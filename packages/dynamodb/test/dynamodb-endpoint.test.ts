import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { createBackend } from "@baton/core";
import { describe, expect, it } from "vitest";
import { DynamoDBBackend } from "../src/index.js";

// The AWS SDK sends nothing until the first call: none of these tests connects.

describe("dynamodb endpoint (no server)", () => {
  it("is the URL's host:port, without the access key or secret", async () => {
    const backend = await createBackend(
      "dynamodb://AKIDEXAMPLE:s3cr3t@127.0.0.1:8000/locks?tls=false&region=eu-west-1",
    );
    try {
      expect(backend.endpoint).toBe("127.0.0.1:8000");
      expect(backend.endpoint).not.toContain("AKIDEXAMPLE");
      expect(backend.endpoint).not.toContain("s3cr3t");
    } finally {
      await backend.close();
    }
  });

  it("is the endpoint option's host, and its port when not the default", async () => {
    const credentials = { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "s3cr3t" };
    const plain = new DynamoDBBackend({
      table: "locks",
      endpoint: "https://dynamo.internal.example/",
      region: "us-east-1",
      credentials,
    });
    const ipv6 = new DynamoDBBackend({
      table: "locks",
      endpoint: "http://[::1]:8001",
      region: "us-east-1",
      credentials,
    });
    try {
      expect(plain.endpoint).toBe("dynamo.internal.example");
      expect(ipv6.endpoint).toBe("[::1]:8001");
    } finally {
      await plain.close();
      await ipv6.close();
    }
  });

  it("is the region's AWS host without an endpoint", async () => {
    const backend = await createBackend("dynamodb:///locks?region=eu-west-1");
    const china = new DynamoDBBackend({ table: "locks", region: "cn-north-1" });
    try {
      expect(backend.endpoint).toBe("dynamodb.eu-west-1.amazonaws.com");
      expect(china.endpoint).toBe("dynamodb.cn-north-1.amazonaws.com.cn");
    } finally {
      await backend.close();
      await china.close();
    }
  });

  it("is undefined for a given client, or a region left to the AWS SDK's chain", async () => {
    const client = new DynamoDBClient({ region: "eu-west-1", endpoint: "http://127.0.0.1:8000" });
    const given = new DynamoDBBackend({ table: "locks", client });
    const chained = new DynamoDBBackend({ table: "locks" });
    try {
      expect(given.endpoint).toBeUndefined();
      expect(chained.endpoint).toBeUndefined();
    } finally {
      await given.close();
      await chained.close();
      client.destroy();
    }
  });
});
