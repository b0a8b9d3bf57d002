import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { ConfigError, createCoordinator, parseBackendUrl } from "@baton/core";
import { describe, expect, it } from "vitest";
import {
  DynamoDBBackend,
  type DynamoDBBackendOptions,
  dynamodbOptionsFromUrl,
} from "../src/index.js";

const fromUrl = (url: string) => dynamodbOptionsFromUrl(parseBackendUrl(url));

function configError(run: () => unknown): ConfigError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error("expected a ConfigError");
}

describe("dynamodb options from a URL", () => {
  it("reads the endpoint, table, region, credentials and every parameter", () => {
    expect(
      fromUrl(
        "dynamodb://AKID:s%2Fecret@127.0.0.1:8000/locks?region=eu-west-1&tls=false&prefix=app/&requestTimeoutMs=2000&createTable=true&pollMaxMs=250",
      ),
    ).toEqual({
      table: "locks",
      endpoint: "http://127.0.0.1:8000",
      region: "eu-west-1",
      credentials: { accessKeyId: "AKID", secretAccessKey: "s/ecret" },
      prefix: "app/",
      requestTimeoutMs: 2000,
      createTable: true,
      pollMaxMs: 250,
    });
  });

  it("uses https by default, and AWS's endpoint and credential chain without a host", () => {
    expect(fromUrl("dynamodb://dynamodb.eu-west-1.amazonaws.com/locks")).toEqual({
      table: "locks",
      endpoint: "https://dynamodb.eu-west-1.amazonaws.com",
    });
    expect(fromUrl("dynamodb:///locks?region=eu-west-1")).toEqual({
      table: "locks",
      region: "eu-west-1",
    });
  });

  it("refuses what it does not understand, before any I/O", () => {
    expect(configError(() => fromUrl("dynamodb://h:1/locks?prefx=a")).message).toContain("prefx");
    expect(configError(() => fromUrl("dynamodb://h:1")).message).toContain("table");
    expect(configError(() => fromUrl("dynamodb://h:1/a/b")).message).toContain("table");
    expect(configError(() => fromUrl("dynamodb://h:1,g:2/locks")).field).toBe("url");
    expect(configError(() => fromUrl("dynamodb://AKID@h:1/locks")).message).toContain("secret");
    expect(configError(() => fromUrl("dynamodb://h:1/locks?tls=yes")).message).toContain("tls");
    expect(configError(() => fromUrl("dynamodb:///locks?tls=false")).message).toContain("https");
    expect(configError(() => fromUrl("dynamodb://h:1/locks?requestTimeoutMs=x")).field).toBe(
      "requestTimeoutMs",
    );
  });

  it("a misspelt parameter fails in createCoordinator", () => {
    const error = configError(() =>
      createCoordinator({ url: "dynamodb://127.0.0.1:1/locks?tls=false&regoin=x" }),
    );
    expect(error.message).toContain("regoin");
  });
});

describe("dynamodb backend options", () => {
  const base: DynamoDBBackendOptions = {
    table: "locks",
    endpoint: "http://127.0.0.1:8000",
    region: "us-east-1",
  };

  it("each bad option is a ConfigError naming it", () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ table: "x" }, "table"],
      [{ table: "bad name" }, "table"],
      [{ prefix: 1 }, "prefix"],
      [{ requestTimeoutMs: 10 }, "requestTimeoutMs"],
      [{ pollMaxMs: 1.5 }, "pollMaxMs"],
      [{ createTable: "yes" }, "createTable"],
      [{ endpoint: "ftp://x" }, "endpoint"],
      [{ endpoint: "http://user:pw@x" }, "endpoint"],
      [{ region: "EU WEST" }, "region"],
      [{ credentials: { accessKeyId: "a" } }, "credentials"],
      [{ tableName: "x" }, "options.tableName"],
    ];
    for (const [patch, field] of cases) {
      const error = configError(
        () => new DynamoDBBackend({ ...base, ...patch } as DynamoDBBackendOptions),
      );
      expect(error.field, JSON.stringify(patch)).toBe(field);
    }
  });

  it("a client of your own excludes the connection options, and is not destroyed on close", async () => {
    const client = new DynamoDBClient({ region: "us-east-1" });
    expect(
      configError(() => new DynamoDBBackend({ table: "locks", client, region: "x" })).field,
    ).toBe("region");
    expect(
      configError(() => new DynamoDBBackend({ table: "locks", client: {} as DynamoDBClient }))
        .field,
    ).toBe("client");
    let destroyed = false;
    const original = client.destroy.bind(client);
    client.destroy = () => {
      destroyed = true;
      original();
    };
    await new DynamoDBBackend({ table: "locks", client }).close();
    expect(destroyed).toBe(false);
    client.destroy();
  });

  it("a session TTL below the minimum is a ConfigError before any I/O", async () => {
    const backend = new DynamoDBBackend(base);
    const error = await backend.openSession({ ttlMs: 100, ownerId: "a" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).field).toBe("ttlMs");
    await backend.close();
  });
});
