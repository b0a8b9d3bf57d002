import { basename, join } from "node:path";
import { freePorts } from "./free-port.js";
import { httpGet } from "./http-get.js";
import { type LocalStartOptions, requireBinaries } from "./local-start-options.js";
import { withPortRetry } from "./port-retry.js";
import { findAzuriteBlob } from "./server-binaries.js";
import { type ServerGroup, startServerGroup } from "./server-group.js";
import { startTimeoutMs } from "./wait-for-ready.js";
import { makeSubdir } from "./work-dir.js";

const HOST = "127.0.0.1";

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
export async function startAzurite(options: LocalStartOptions): Promise<ServerGroup> {
  const main = requireBinaries(findAzuriteBlob(options.env));
  return withPortRetry(async (attempt) => {
    const [port] = (await freePorts(1, HOST)) as [number];
    const name = "azurite";
    const dir = await makeSubdir(options.dir, attempt === 1 ? name : `${name}-try${attempt}`);
    const dataDir = await makeSubdir(dir, "data");
    return startServerGroup({
      kind: "azure-blob",
      what: "Azurite blob service",
      url: `azblob://${AZURITE_ACCOUNT}@${HOST}:${port}/${AZURITE_CONTAINER}`,
      members: [
        {
          name,
          address: `${HOST}:${port}`,
          ports: { client: port },
          dataDir,
          spec: {
            name: "azurite-blob",
            command: process.execPath,
            args: [
              main,
              "--blobHost",
              HOST,
              "--blobPort",
              String(port),
              "--inMemoryPersistence",
              "--skipApiVersionCheck",
              "--disableTelemetry",
              "--silent",
            ],
            cwd: dir,
            logFile: join(dir, "server.log"),
            programs: [basename(process.execPath)],
          },
          isReady: () => azuriteAnswers(HOST, port),
        },
      ],
      timeoutMs: options.timeoutMs ?? startTimeoutMs(options.env),
      ...(options.graceMs === undefined ? {} : { graceMs: options.graceMs }),
    });
  });
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
