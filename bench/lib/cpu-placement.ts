import { execFileSync } from "node:child_process";

/**
 * Where the bench runs its servers and itself: the servers on one CPU, the bench (client) on
 * the others, so a server process and the client never share a core, as with a server on
 * another machine.
 *
 * Why: on this kind of 2-vCPU machine, left to the scheduler, each connection's server
 * process settles either on the client's CPU or on the other one, and stays there. Measured
 * (PostgreSQL, five raw connections of one process doing the floor's try_lock + unlock, in
 * one run): three took 85 to 91 us per pair, two took 194 us. Pinned to separate CPUs, all
 * five took 192 to 194 us; pinned to the same CPU, all five 80 us. Unpinned, a ratio between
 * two variants on two connections was partly a draw of where their server processes landed.
 *
 * Linux with `taskset` (util-linux) and two CPUs or more only; elsewhere, or with
 * `BENCH_PIN=0`, nothing is pinned and the report says so.
 */
export interface CpuPlacement {
  /** CPUs the servers get (a taskset list), e.g. "1". */
  readonly server: string;
  /** CPUs the bench process gets, e.g. "0". */
  readonly client: string;
  /** Every CPU the bench process had at the start. */
  readonly all: string;
}

/** The placement for the machine the bench runs on, or undefined when nothing is pinned (see above). */
export function cpuPlacement(): CpuPlacement | undefined {
  if (process.platform !== "linux" || process.env.BENCH_PIN === "0") return undefined;
  let cpus: number[];
  try {
    // "pid 123's current affinity list: 0,1" (ranges like 0-3 are expanded below)
    const out = execFileSync("taskset", ["-p", "-c", String(process.pid)], { encoding: "utf8" });
    cpus = expand(out.slice(out.lastIndexOf(":") + 1).trim());
  } catch {
    return undefined;
  }
  if (cpus.length < 2) return undefined;
  try {
    // Setting the affinity may be refused (a restricted container): then nothing is pinned.
    pinSelf(cpus.join(","));
  } catch {
    return undefined;
  }
  const server = cpus[cpus.length - 1] as number;
  return {
    server: String(server),
    client: cpus.slice(0, -1).join(","),
    all: cpus.join(","),
  };
}

/** Pins every thread of this process to `cpus` (a taskset list); children inherit it. */
export function pinSelf(cpus: string): void {
  execFileSync("taskset", ["-a", "-p", "-c", cpus, String(process.pid)], { stdio: "ignore" });
}

/** A human line for the report. */
export function describePlacement(placement: CpuPlacement | undefined): string {
  if (placement === undefined) {
    return "not pinned (the scheduler placed server and client processes; see bench/lib/cpu-placement.ts)";
  }
  return `servers on CPU ${placement.server}, the bench client on CPU ${placement.client} (taskset), so no server process shares a core with the client`;
}

function expand(list: string): number[] {
  const cpus: number[] = [];
  for (const part of list.split(",")) {
    const [from, to] = part.split("-").map(Number);
    if (from === undefined || Number.isNaN(from)) continue;
    for (let cpu = from; cpu <= (to ?? from); cpu++) cpus.push(cpu);
  }
  return cpus;
}
