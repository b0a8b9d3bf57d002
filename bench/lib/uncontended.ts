import type { ServerGroup } from "@baton/conformance/harness";
import { groupCpuOptions } from "./backend-run.js";
import { type BatonVariantsOptions, openBatonVariants } from "./baton-variants.js";
import { type InterleaveOptions, interleave, latencySection, type Variant } from "./interleave.js";
import type { LatencySection } from "./results.js";

/** What {@link measureUncontended} measures: the backend's own rows around Baton's. */
export interface UncontendedBench extends Omit<BatonVariantsOptions, "sessionBackend"> {
  /** Rows before Baton's: the floor and its references. */
  readonly floor: readonly Variant[];
  /** Rows after Baton's: peer libraries. */
  readonly peers?: readonly Variant[];
  /** Warmup and rounds of the interleaved runs. */
  readonly rounds: Pick<InterleaveOptions, "warmup" | "rounds" | "perRound" | "maxMs">;
  /** The harness's servers: their CPU is every row's server time. */
  readonly group: ServerGroup | undefined;
  readonly title: string;
  readonly notes: readonly string[];
}

/**
 * The uncontended section of a backend whose Baton rows share one backend and whose server
 * time is the harness's server processes' CPU: the rows interleaved, then Baton's session,
 * coordinator and backend closed.
 */
export async function measureUncontended(bench: UncontendedBench): Promise<LatencySection> {
  const server = groupCpuOptions(bench.group);
  const baton = await openBatonVariants(bench);
  try {
    const variants = [...bench.floor, ...baton.variants, ...(bench.peers ?? [])];
    const results = await interleave(variants, { ...bench.rounds, ...server });
    const share = await baton.coreShare(bench.rounds);
    return latencySection("uncontended", bench.title, variants, results, bench.notes, share);
  } finally {
    await baton.close();
  }
}
