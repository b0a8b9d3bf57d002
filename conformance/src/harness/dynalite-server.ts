import { request } from "node:http";
import { type LocalStartOptions, requireBinaries } from "./local-start-options.js";
import { startNodeScriptServer } from "./node-script-server.js";
import { findDynalite } from "./server-binaries.js";
import type { ServerGroup } from "./server-group.js";

/**
 * The table the harness URL names. The adapter's `createTable=true` creates it on first use:
 * dynalite starts empty.
 */
export const DYNALITE_TABLE = "baton-locks";

/**
 * Starts dynalite (a DynamoDB implementation on Node.js, in memory) on a free loopback port
 * and waits until it answers `ListTables`. The URL is
 * `dynamodb://local:local-secret@127.0.0.1:P/baton-locks?region=us-east-1&tls=false&createTable=true`:
 * dynalite checks that a request is signed, not by whom, so any credentials do.
 *
 * @throws ServerStartError (with the log tail) when it does not come up
 */
export function startDynalite(options: LocalStartOptions): Promise<ServerGroup> {
  return startNodeScriptServer(
    {
      kind: "dynamodb",
      what: "dynalite server",
      name: "dynalite",
      processName: "dynalite",
      script: requireBinaries(findDynalite(options.env)),
      args: (host, port) => ["--host", host, "--port", String(port)],
      url: (host, port) =>
        `dynamodb://local:local-secret@${host}:${port}/${DYNALITE_TABLE}?region=us-east-1&tls=false&createTable=true`,
      isReady: (host, port) => listTables(host, port),
    },
    options,
  );
}

/**
 * True when a DynamoDB `ListTables` call answers with a table list. The request carries an
 * Authorization header of the right shape (dynalite checks its presence, not its signature),
 * and no socket outlives the call.
 */
export function listTables(host: string, port: number, timeoutMs = 1_000): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request(
      {
        host,
        port,
        path: "/",
        method: "POST",
        agent: false,
        timeout: timeoutMs,
        headers: {
          "content-type": "application/x-amz-json-1.0",
          "x-amz-target": "DynamoDB_20120810.ListTables",
          "x-amz-date": "20260101T000000Z",
          authorization:
            "AWS4-HMAC-SHA256 Credential=baton/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host;x-amz-date, Signature=0",
        },
      },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          body += chunk;
        });
        res.on("end", () => resolve(res.statusCode === 200 && body.includes('"TableNames"')));
        res.on("error", () => resolve(false));
      },
    );
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(false));
    req.end("{}");
  });
}
