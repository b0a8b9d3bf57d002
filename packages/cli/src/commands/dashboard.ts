import { BackendUnavailableError, redactUrl } from "@baton/core";
import { backendFrom, countOption, msOption, parse } from "../args.js";
import { isLoopback } from "../dashboard/access.js";
import { Feed } from "../dashboard/feed.js";
import { createDashboardServer, listen } from "../dashboard/server.js";
import { openSource } from "../inspect/open-source.js";
import { takeSnapshot } from "../inspect/snapshot.js";
import { onSignals } from "../run-child.js";
import { UsageError } from "../usage-error.js";
import { prefixFrom } from "./ls.js";

/** The dashboard's port when --port is not given. */
export const DEFAULT_DASHBOARD_PORT = 7470;

export const DASHBOARD_USAGE = `usage: baton dashboard [PREFIX] --backend URL [--port P] [--host H] [--allow-release]
       [--token T] [--interval MS]

Serves a live page of every lock, semaphore, read-write lock, election and job under PREFIX
(all without it): holders, tokens, waiters and lease bars counting down; elections with
their leader and term; semaphores with the permits used; jobs with their last slots and
outcomes; and a timeline of what happened (acquired, released, lost or revoked, elected,
job ran), seen by comparing the store's state about once a second (--interval, default
1000 ms). The page is one self-contained file: it loads nothing from the internet.
Ctrl-C stops it.
  --port P          default ${DEFAULT_DASHBOARD_PORT}; 0 picks a free port (printed)
  --host H          the address to listen on, default 127.0.0.1. Any other than a loopback
                    address needs --token
  --token T         the page asks for T once (or send Authorization: Bearer T); every
                    request is checked. Also BATON_DASHBOARD_TOKEN
  --allow-release   the page offers Release on every lock and election: it asks for a reason
                    and force-releases the grant (as baton release NAME --force does)
Credentials in the backend URL are never shown on the page or printed.`;

/** `baton dashboard`. Resolves with the exit code once interrupted. */
export async function dashboardCommand(
  argv: readonly string[],
  out: (s: string) => void,
  err: (s: string) => void,
): Promise<number> {
  const { values, positionals } = parse(argv, {
    backend: { type: "string" },
    port: { type: "string" },
    host: { type: "string" },
    token: { type: "string" },
    interval: { type: "string" },
    "allow-release": { type: "boolean" },
  });
  if (values.help) {
    out(DASHBOARD_USAGE);
    return 0;
  }
  const prefix = prefixFrom(positionals, DASHBOARD_USAGE);
  const backend = backendFrom(values.backend, process.env);
  const port = countOption(values.port, "port", DEFAULT_DASHBOARD_PORT, 0, 65_535);
  const intervalMs = msOption(values.interval, "interval", 1_000, 100, 60_000);
  const host = typeof values.host === "string" ? values.host : "127.0.0.1";
  const token =
    typeof values.token === "string"
      ? values.token
      : process.env.BATON_DASHBOARD_TOKEN || undefined;
  if (token !== undefined && token.length < 8) {
    throw new UsageError("--token must be at least 8 characters");
  }
  if (!isLoopback(host) && token === undefined) {
    throw new UsageError(
      `--host ${host} is reachable from other machines: pass --token T (at least 8 characters), which the page asks for`,
    );
  }
  const allowRelease = values["allow-release"] === true;
  const shown = redactUrl(backend);
  const { source, coordinator } = await openSource(backend);
  const feed = new Feed(source, prefix, intervalMs);
  const server = createDashboardServer({
    backend: shown,
    prefix,
    allowRelease,
    feed,
    source,
    token,
    log: (line) => err(`baton dashboard: ${line}`),
  });
  const stopped = new Promise<void>((resolve) => {
    const off = onSignals(() => {
      off();
      resolve();
    });
  });
  try {
    // One read first, so a store that refuses us (credentials, a backend without inspection)
    // is a usage error now rather than a message on a page; one that does not answer yet is
    // retried by the page's feed.
    await takeSnapshot(source, prefix, undefined, 1).catch((error: unknown) => {
      if (!(error instanceof BackendUnavailableError)) throw error;
    });
    const bound = await listen(server, host, port);
    feed.start();
    const where = host.includes(":") ? `[${host}]` : host;
    out(
      `baton dashboard: http://${where}:${bound}/ (${shown}${prefix ? `, prefix ${prefix}` : ""}${allowRelease ? ", release allowed" : ""}); Ctrl-C stops it`,
    );
    await stopped;
    return 0;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "EADDRINUSE" || code === "EACCES" || code === "EADDRNOTAVAIL") {
      throw new UsageError(`cannot listen on ${host}:${port}: ${(error as Error).message}`);
    }
    throw error;
  } finally {
    await feed.stop();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await coordinator.close().catch(() => undefined);
  }
}
