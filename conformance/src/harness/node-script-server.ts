import { basename, join } from "node:path";
import type { ServerKind } from "./backend-kind.js";
import { freePorts } from "./free-port.js";
import type { LocalStartOptions } from "./local-start-options.js";
import { withPortRetry } from "./port-retry.js";
import { type ServerGroup, startServerGroup } from "./server-group.js";
import { startTimeoutMs } from "./wait-for-ready.js";
import { makeSubdir } from "./work-dir.js";

const HOST = "127.0.0.1";

/** A server that is a Node.js script installed from npm (dynalite, Azurite): how to run one. */
export interface NodeScriptServer {
  /** Which backend it serves. */
  readonly kind: ServerKind;
  /** What it is, for messages, e.g. `"dynalite server"`. */
  readonly what: string;
  /** The member's name, also its directory's name. */
  readonly name: string;
  /** The process's name, for messages. */
  readonly processName: string;
  /** The script's path, run by the current Node.js binary. */
  readonly script: string;
  /** The script's arguments, to listen on `host:port`. */
  readonly args: (host: string, port: number) => readonly string[];
  /**
   * CommonJS code run in the server's process before its script (e.g. to change a setting
   * the server has no option for); the script then sees its usual `process.argv`.
   */
  readonly preload?: string;
  /** The connection URL handed to tests. */
  readonly url: (host: string, port: number) => string;
  /** Resolves true when the server answers on `host:port`. */
  readonly isReady: (host: string, port: number) => Promise<boolean>;
}

/**
 * Starts one Node.js script server on a free loopback port, with a data directory and a log
 * file under `options.dir`, and waits until it answers; tries new ports when the chosen one
 * gets taken before the server binds it.
 *
 * @throws ServerStartError (with the log tail) when it does not come up
 */
export function startNodeScriptServer(
  server: NodeScriptServer,
  options: LocalStartOptions,
): Promise<ServerGroup> {
  return withPortRetry(async (attempt) => {
    const [port] = (await freePorts(1, HOST)) as [number];
    const { name } = server;
    const dir = await makeSubdir(options.dir, attempt === 1 ? name : `${name}-try${attempt}`);
    const dataDir = await makeSubdir(dir, "data");
    return startServerGroup({
      kind: server.kind,
      what: server.what,
      url: server.url(HOST, port),
      members: [
        {
          name,
          address: `${HOST}:${port}`,
          ports: { client: port },
          dataDir,
          spec: {
            name: server.processName,
            command: process.execPath,
            args:
              server.preload === undefined
                ? [server.script, ...server.args(HOST, port)]
                : [
                    "-e",
                    `${server.preload};\nprocess.argv.splice(1, 0, ${JSON.stringify(server.script)});\nrequire(${JSON.stringify(server.script)});`,
                    "--",
                    ...server.args(HOST, port),
                  ],
            cwd: dir,
            logFile: join(dir, "server.log"),
            programs: [basename(process.execPath)],
          },
          isReady: () => server.isReady(HOST, port),
        },
      ],
      timeoutMs: options.timeoutMs ?? startTimeoutMs(options.env),
      ...(options.graceMs === undefined ? {} : { graceMs: options.graceMs }),
    });
  });
}
