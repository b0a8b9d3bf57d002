import { type ServerGroup, startServers } from "@baton/conformance/harness";
import { cpuPlacement, pinSelf } from "./cpu-placement.js";
import { formatHeld, formatSection, formatWatched } from "./format-table.js";
import { type HeldItems, permitItems, type ServerCounter, scaledLocks } from "./held-locks.js";
import type { InterleaveOptions } from "./interleave.js";
import { selected } from "./only.js";
import {
  HELD_SEMAPHORES,
  measurePermitHandoffs,
  measurePermitUncontended,
  type PermitBench,
  type PermitServer,
  semaphoreBackend,
} from "./permits.js";
import {
  type BackendResult,
  floorRow,
  type HeldLocksResult,
  type LatencySection,
  type Row,
  type WatchResult,
} from "./results.js";
import { processCpuMeter, type ServerMeter } from "./server-meter.js";
import { measureService, type ServiceBench } from "./service.js";
import { measureServiceProcesses } from "./service-processes.js";
import { measureTakeover } from "./takeover.js";
import { benchCoordinator } from "./telemetry.js";
import { measureThroughput } from "./throughput.js";
import { measureWaiters, type RawWaiters } from "./waiters.js";
import { measureWatchScale } from "./watch-scale.js";

/**
 * Collects one backend's results as its bench goes: prints each section when it is measured,
 * and turns a failing part into an error line of the report instead of ending the run.
 */
export class BackendRun {
  readonly backend: string;
  server = "unknown server";
  readonly #sections: LatencySection[] = [];
  readonly #errors: string[] = [];
  #held: HeldLocksResult | undefined;
  #heldPermits: HeldLocksResult | undefined;
  #heldScale: HeldLocksResult | undefined;
  #watched: WatchResult | undefined;
  /** What the backend's guarantees declare (undefined: not asked). */
  semaphores: boolean | undefined;
  /** Only the permit figures are measured (see {@link BackendResult.scope}). */
  scope: "permits" | undefined;
  /** Why the permit figures have no floor. */
  permitNoFloor: string | undefined;
  readonly #started = performance.now();

  constructor(backend: string) {
    this.backend = backend;
  }

  /** Records and prints a section. */
  add(section: LatencySection): LatencySection {
    this.#sections.push(section);
    console.log(formatSection(this.backend, section));
    return section;
  }

  /** Records and prints the held-locks figures. */
  addHeld(held: HeldLocksResult): void {
    this.#held = held;
    console.log(formatHeld(this.backend, held));
  }

  /** Records and prints the scale section's held-locks figures. */
  addHeldScale(held: HeldLocksResult): void {
    this.#heldScale = held;
    console.log(formatHeld(this.backend, held));
  }

  /** Records and prints the watched-names figures. */
  addWatched(watched: WatchResult): void {
    this.#watched = watched;
    console.log(formatWatched(this.backend, watched));
  }

  /** Records and prints the held-permits figures. */
  addHeldPermits(held: HeldLocksResult): void {
    this.#heldPermits = held;
    console.log(formatHeld(this.backend, held));
  }

  /** Runs one part; a failure is recorded (and printed) and yields undefined. */
  async step<T>(what: string, part: () => Promise<T>): Promise<T | undefined> {
    const t0 = performance.now();
    try {
      return await part();
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      const line = `${what} failed: ${message.split("\n")[0]}`;
      this.#errors.push(line);
      console.error(`\n${this.backend}: ${line}`);
      return undefined;
    } finally {
      if (process.env.BATON_BENCH_VERBOSE === "1") {
        console.error(
          `[bench] ${this.backend} ${what}: ${((performance.now() - t0) / 1000).toFixed(1)} s`,
        );
      }
    }
  }

  /** Records an error that is not a step's. */
  fail(line: string): void {
    this.#errors.push(line);
  }

  /** The result so far. */
  result(): BackendResult {
    return {
      backend: this.backend,
      server: this.server,
      sections: [...this.#sections],
      ...(this.#held ? { held: this.#held } : {}),
      ...(this.#heldPermits ? { heldPermits: this.#heldPermits } : {}),
      ...(this.#heldScale ? { heldScale: this.#heldScale } : {}),
      ...(this.#watched ? { watched: this.#watched } : {}),
      ...(this.semaphores === undefined ? {} : { semaphores: this.semaphores }),
      ...(this.scope === undefined ? {} : { scope: this.scope }),
      ...(this.permitNoFloor === undefined ? {} : { permitNoFloor: this.permitNoFloor }),
      errors: [...this.#errors],
      elapsedMs: performance.now() - this.#started,
    };
  }
}

/** What one backend's bench supplies to {@link runBackendBench}; every URL is the harness's. */
export interface BackendBench {
  readonly backend:
    | "redis"
    | "etcd"
    | "zookeeper"
    | "postgres"
    | "mysql"
    | "dynamodb"
    | "azure-blob";
  /** The URL coordinators use (default: the harness's URL as it is). */
  readonly clientUrl?: (url: string) => string;
  serverVersion(url: string): Promise<string>;
  /** `servers`: the harness's processes (their PIDs), for server CPU figures. */
  uncontended(url: string, servers: ServerGroup | undefined): Promise<LatencySection>;
  handoffs(
    url: string,
    floor: Row | undefined,
    servers: ServerGroup | undefined,
  ): Promise<LatencySection>;
  /** Holds 10,000 locks, or `items` (a semaphore's permits), on a backend of its own. */
  heldLocks(url: string, items?: HeldItems): Promise<HeldLocksResult>;
  /** The permit figures' own rows; measured when the backend's guarantees declare semaphores. */
  readonly permits: PermitBench;
  /** TTL of the takeover runs (the backend's least sensible one). */
  readonly takeoverTtlMs: number;
  /** TTL of the throughput clients. */
  readonly throughputTtlMs: number;
  /** How the throughput clients connect, for the report. */
  readonly connections: string;
  /** The service-pattern variants (bench/lib/service.ts), from the client URL. */
  readonly service?: (url: string) => ServiceBench;
  /** The service pattern's server meter (default: the server group's CPU, see groupCpuOptions). */
  serviceServer?(url: string, group: ServerGroup | undefined): Promise<ServiceServer>;
  /** The scale section's sizes on this backend, and why they are what they are. */
  readonly scale?: ScaleSizes;
  /** Counts the server's requests (many waiters: requests per handoff). */
  requestCounter?(url: string): Promise<ServerCounter & { close(): Promise<void> }>;
  /** The raw client's hand-off between processes beside the many waiters (on the harness's URL). */
  readonly rawWaiters?: Omit<RawWaiters, "url">;
}

/** The scale section's sizes for a backend. */
export interface ScaleSizes {
  /** Locks held by one coordinator. */
  readonly locks: number;
  /** Names watched by one coordinator. */
  readonly watched: number;
  /** Why these sizes (for the report), when they are not 100,000 and 10,000. */
  readonly why?: string;
}

/** The scale section's sizes where a backend names none. */
export const SCALE: ScaleSizes = { locks: 100_000, watched: 10_000 };

/** The server meter of the service-pattern sections, and what closes it. */
export interface ServiceServer {
  readonly options: Pick<InterleaveOptions, "server" | "idleMs">;
  close(): Promise<void>;
}

/**
 * One backend's whole bench, in the same order for every backend: private servers from the
 * conformance harness, then uncontended, handoff, takeover, throughput and held locks, then
 * the permit figures (see {@link runPermitSteps}). A part that fails is an error line of the
 * report; the servers are stopped in every case.
 */
export async function runBackendBench(bench: BackendBench): Promise<BackendResult> {
  const out = new BackendRun(bench.backend);
  // The servers start on their own CPU (they inherit this process's), then this process moves
  // to the others (see cpu-placement.ts).
  const placement = cpuPlacement();
  if (placement) pinSelf(placement.server);
  let servers: Awaited<ReturnType<typeof startServers>>;
  try {
    servers = await startServers({ backends: [bench.backend] });
  } finally {
    if (placement) pinSelf(placement.client);
  }
  const url = servers.servers[bench.backend];
  // Servers without processes of their own here (an emulator, a container) have no group.
  const group = (servers.groups as Readonly<Partial<Record<string, ServerGroup>>>)[bench.backend];
  try {
    if (url === undefined) throw new Error(`bench ${bench.backend}: no server`);
    const clientUrl = bench.clientUrl?.(url) ?? url;
    out.server = await bench.serverVersion(url);
    const lockSections = ["uncontended", "handoff", "takeover", "throughput", "held"] as const;
    if (selected("permits") && !lockSections.some((s) => selected(s))) out.scope = "permits";
    let unc: LatencySection | undefined;
    if (selected("uncontended")) {
      unc = await out.step("uncontended", () => bench.uncontended(url, group));
      if (unc) out.add(unc);
    }
    if (selected("handoff")) {
      const handoff = await out.step("handoff", () =>
        bench.handoffs(url, unc ? floorRow(unc) : undefined, group),
      );
      if (handoff) out.add(handoff);
    }
    if (selected("takeover")) {
      const takeover = await out.step("takeover", () =>
        measureTakeover({ url: clientUrl, ttlMs: bench.takeoverTtlMs, prefix: "bench-takeover" }),
      );
      if (takeover) out.add(takeover);
    }
    if (selected("throughput")) {
      const throughput = await out.step("throughput", () =>
        measureThroughput({
          client: () => benchCoordinator({ url: clientUrl, ttlMs: bench.throughputTtlMs }),
          prefix: "bench-throughput",
          connections: bench.connections,
        }),
      );
      if (throughput) out.add(throughput);
    }
    if (selected("held")) {
      const held = await out.step("held locks", () => bench.heldLocks(url));
      if (held) out.addHeld(held);
    }
    if (bench.service && (selected("service") || selected("processes"))) {
      await runServiceSteps(out, bench, url, clientUrl, group);
    }
    if (selected("scale")) await runScaleSteps(out, bench, url, clientUrl, group, unc);
    if (selected("permits")) {
      await runPermitSteps(out, {
        permits: bench.permits,
        url,
        clientUrl,
        group,
        held: (items) => bench.heldLocks(url, items),
      });
    }
  } finally {
    await servers.stop();
    if (placement) pinSelf(placement.all);
  }
  return out.result();
}

/**
 * The service-pattern sections (one process, then P processes) of a backend that has them,
 * with the bench's server meter.
 */
async function runServiceSteps(
  out: BackendRun,
  bench: BackendBench,
  url: string,
  clientUrl: string,
  group: ServerGroup | undefined,
): Promise<void> {
  const make = bench.service as (url: string) => ServiceBench;
  const server = await out.step("service server meter", async () =>
    bench.serviceServer
      ? await bench.serviceServer(url, group)
      : { options: groupCpuOptions(group), close: async () => undefined },
  );
  const meter = server?.options ?? {};
  try {
    if (selected("service")) {
      const sections = await out.step("service", () => measureService(make(clientUrl), meter));
      for (const s of sections ?? []) out.add(s);
    }
    if (selected("processes")) {
      const sections = await out.step("service processes", () =>
        measureServiceProcesses({
          backend: bench.backend,
          url: clientUrl,
          bench: make(clientUrl),
          ...meter,
        }),
      );
      for (const s of sections ?? []) out.add(s);
    }
  } finally {
    await server?.close();
  }
}

/**
 * The scale section: many locks held by one coordinator (with one more lock's acquire timed
 * with none and all held), many waiters on one name over 10 processes, many names watched.
 */
async function runScaleSteps(
  out: BackendRun,
  bench: BackendBench,
  url: string,
  clientUrl: string,
  group: ServerGroup | undefined,
  unc: LatencySection | undefined,
): Promise<void> {
  const sizes = bench.scale ?? SCALE;
  const why = sizes.why === undefined ? [] : [sizes.why];
  const held = await out.step("scale: held locks", () =>
    bench.heldLocks(url, scaledLocks({ locks: sizes.locks, ttlMs: 6_000, probes: 200 })),
  );
  if (held) out.addHeldScale({ ...held, notes: [...held.notes, ...why] });
  const server = await out.step("scale: server meter", async () =>
    bench.serviceServer
      ? await bench.serviceServer(url, group)
      : { options: groupCpuOptions(group), close: async () => undefined },
  );
  const requests = bench.requestCounter
    ? await out.step("scale: request counter", () =>
        (bench.requestCounter as NonNullable<BackendBench["requestCounter"]>)(url),
      )
    : undefined;
  try {
    const floor = unc ? floorRow(unc) : undefined;
    const waiters = await out.step("scale: waiters", () =>
      measureWaiters({
        url: clientUrl,
        ttlMs: bench.throughputTtlMs,
        ...(floor ? { floor } : {}),
        ...(server?.options ?? {}),
        ...(requests ? { requests } : {}),
        ...(bench.rawWaiters ? { raw: { ...bench.rawWaiters, url } } : {}),
      }),
    );
    if (waiters) out.add(waiters);
  } finally {
    await server?.close();
    await requests?.close();
  }
  const watched = await out.step("scale: watched names", () =>
    measureWatchScale({
      url: clientUrl,
      ttlMs: bench.throughputTtlMs,
      names: sizes.watched,
      prefix: "bench-watch",
      notes: why,
    }),
  );
  if (watched) out.addWatched(watched);
}

/**
 * CPU time of every member of a server group (all members summed; each member a part, by
 * name), or undefined without the group's processes (servers not started here).
 */
export function groupCpuMeter(group: ServerGroup | undefined): ServerMeter | undefined {
  if (group === undefined || group.pids.length === 0) return undefined;
  const names = new Map(group.members.map((m) => [m.pid, m.name]));
  const n = group.members.length;
  return processCpuMeter(
    n === 1 ? "server process CPU (schedstat)" : `server CPU, all ${n} members summed (schedstat)`,
    () => group.pids,
    (pid) => names.get(pid) ?? `pid ${pid}`,
  );
}

/**
 * The server time options of a bench on the harness's servers: {@link groupCpuMeter}, its
 * idle rate read over 1 s and taken off; none without the group's processes.
 */
export function groupCpuOptions(
  group: ServerGroup | undefined,
): Pick<InterleaveOptions, "server" | "idleMs"> {
  const meter = groupCpuMeter(group);
  return meter ? { server: meter, idleMs: 1_000 } : {};
}

/** What {@link runPermitSteps} runs on. */
export interface PermitSteps {
  readonly permits: PermitBench;
  /** The harness's URL (the backend's own rows connect to it). */
  readonly url: string;
  /** The URL Baton's backends and coordinators are created from. */
  readonly clientUrl: string;
  readonly group: ServerGroup | undefined;
  /** Holds the given permits on a backend of its own (the held-locks step, with its counters). */
  held(items: HeldItems): Promise<HeldLocksResult>;
}

/**
 * The permit figures of a backend whose guarantees declare semaphores (asked of a backend
 * created from the client URL): uncontended permit acquire + release, the permit handoff, and
 * 10,000 permits held by one session. A backend that declares none is recorded as such and
 * skipped.
 */
export async function runPermitSteps(out: BackendRun, steps: PermitSteps): Promise<void> {
  const { permits, url, group } = steps;
  const probe = await out.step("semaphores", async () => ({
    backend: await semaphoreBackend(steps.clientUrl),
  }));
  if (probe === undefined) return;
  const backend = probe.backend;
  out.semaphores = backend !== undefined;
  if (backend === undefined) return;
  if (permits.noFloor !== undefined) out.permitNoFloor = permits.noFloor;
  let server: PermitServer | undefined;
  try {
    server = await out.step("permit server meter", async () =>
      permits.server
        ? await permits.server(url, group)
        : { options: groupCpuOptions(group), close: async () => undefined },
    );
    const meter = server?.options ?? {};
    const unc = await out.step("permit uncontended", () =>
      measurePermitUncontended(permits, backend, url, group, meter),
    );
    if (unc) out.add(unc);
    const handoff = await out.step("permit handoff", () =>
      measurePermitHandoffs(
        permits,
        steps.clientUrl,
        unc ? floorRow(unc) : undefined,
        group,
        meter,
      ),
    );
    if (handoff) out.add(handoff);
  } finally {
    await backend.close();
    await server?.close();
  }
  const held = await out.step("held permits", () => steps.held(permitItems(HELD_SEMAPHORES)));
  if (held) out.addHeldPermits(held);
}
