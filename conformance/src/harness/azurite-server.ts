import { dirname, join } from "node:path";
import { httpGet } from "./http-get.js";
import { type LocalStartOptions, requireBinaries } from "./local-start-options.js";
import { startNodeScriptServer } from "./node-script-server.js";
import { findAzuriteBlob } from "./server-binaries.js";
import type { ServerGroup } from "./server-group.js";

/** Azurite's account, whose published key the adapter uses by default. */
export const AZURITE_ACCOUNT = "devstoreaccount1";

/** The container the harness URL names; the adapter creates it on first use. */
export const AZURITE_CONTAINER = "baton";

/**
 * Starts Azurite's Blob service (Microsoft's Azure Storage emulator, on Node.js, in memory)
 * on a free loopback port and waits until it answers HTTP. The URL is
 * `azblob://devstoreaccount1@127.0.0.1:P/baton`: the emulator's account, with its published
 * key (the adapter's default for that account), path-style over plain HTTP.
 *
 * @throws ServerStartError (with the log tail) when it does not come up
 */
export function startAzurite(options: LocalStartOptions): Promise<ServerGroup> {
  const script = requireBinaries(findAzuriteBlob(options.env));
  return startNodeScriptServer(
    {
      kind: "azure-blob",
      what: "Azurite blob service",
      name: "azurite",
      processName: "azurite-blob",
      script,
      // Azurite sweeps unreferenced extents 10 minutes after it starts and every 10 minutes
      // after; with tens of thousands of blobs written, a sweep stopped it answering for over
      // two minutes. It has no option for the interval, and a test run needs no sweep.
      preload: `require(${JSON.stringify(join(dirname(script), "utils", "constants.js"))}).DEFAULT_GC_INTERVAL_MS = 86400000`,
      args: (host, port) => [
        "--blobHost",
        host,
        "--blobPort",
        String(port),
        "--inMemoryPersistence",
        "--skipApiVersionCheck",
        "--disableTelemetry",
        "--silent",
      ],
      url: (host, port) => `azblob://${AZURITE_ACCOUNT}@${host}:${port}/${AZURITE_CONTAINER}`,
      isReady: azuriteAnswers,
    },
    options,
  );
}

/**
 * True when Azurite answers an HTTP request for the account (unsigned, so it is refused: any
 * Azure error reply means the service is up).
 */
export async function azuriteAnswers(host: string, port: number): Promise<boolean> {
  try {
    const reply = await httpGet(host, port, `/${AZURITE_ACCOUNT}?comp=list`, 1_000);
    return reply.status >= 200 && reply.status < 500;
  } catch {
    return false;
  }
}
