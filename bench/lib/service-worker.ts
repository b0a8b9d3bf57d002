/**
 * A child process of the service-pattern bench with P processes (see service-processes.ts):
 * `node <execArgv> service-worker.ts <backend> <url>`. It loads `bench/<backend>.ts`, whose
 * `serviceBench(url)` gives the variants, opens each variant it is asked for once (one client
 * object per process, as a service has), and runs cells on request:
 *
 * - `{ op: "run", variant, v, mode, callers, firstCaller, ms }` -> `{ op: "done", cell }` (see runCell);
 * - `{ op: "close" }` closes every client and exits.
 */
import { type KeyMode, runCell, type ServiceBench, type ServiceClient } from "./service.js";

interface RunMessage {
  readonly op: "run";
  readonly variant: string;
  readonly v: number;
  readonly mode: KeyMode;
  readonly callers: number;
  readonly firstCaller: number;
  readonly ms: number;
}

const [backend, url] = process.argv.slice(2) as [string, string];
const mod = (await import(`../${backend}.ts`)) as { serviceBench(url: string): ServiceBench };
const bench = mod.serviceBench(url);
const clients = new Map<string, ServiceClient>();

async function clientOf(name: string): Promise<ServiceClient> {
  let c = clients.get(name);
  if (c === undefined) {
    const variant = bench.variants.find((x) => x.name === name);
    if (variant === undefined) throw new Error(`service worker: no variant "${name}"`);
    c = await variant.open();
    clients.set(name, c);
  }
  return c;
}

process.on("message", (message: RunMessage | { op: "close" }) => {
  void (async () => {
    if (message.op === "close") {
      for (const c of clients.values()) await c.close().catch(() => undefined);
      process.exit(0);
    }
    try {
      const client = await clientOf(message.variant);
      const cell = await runCell(
        client,
        message.v,
        message.mode,
        message.callers,
        message.ms,
        message.firstCaller,
      );
      process.send?.({ op: "done", cell });
    } catch (error) {
      process.send?.({
        op: "error",
        message: error instanceof Error ? error.message : String(error),
      });
    }
  })();
});
process.send?.({ op: "ready" });
