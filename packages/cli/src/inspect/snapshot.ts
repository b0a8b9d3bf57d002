import type { Inspection, InspectionSource } from "./inspection-source.js";

/** The most names one snapshot reads; past it, the snapshot says it was cut short. */
export const SNAPSHOT_LIMIT = 10_000;

/** Every name under a prefix at one moment, as `list()` gave them. */
export interface Snapshot {
  /** Wall-clock time (ms since the epoch) the snapshot was taken. */
  readonly at: number;
  readonly items: readonly Inspection[];
  /** True when there were more than {@link SNAPSHOT_LIMIT} names; the rest are left out. */
  readonly truncated: boolean;
  /** How long reading the snapshot took, in ms. */
  readonly tookMs: number;
}

/** Reads every name under `prefix` (at most `limit`) from `source`. */
export async function takeSnapshot(
  source: InspectionSource,
  prefix: string | undefined,
  signal?: AbortSignal,
  limit = SNAPSHOT_LIMIT,
): Promise<Snapshot> {
  const started = performance.now();
  const items: Inspection[] = [];
  let truncated = false;
  // One more than the limit, to tell a store with exactly `limit` names from one with more.
  const options = {
    limit: limit + 1,
    ...(prefix === undefined ? {} : { prefix }),
    ...(signal === undefined ? {} : { signal }),
  };
  for await (const item of source.list(options)) {
    if (items.length === limit) {
      truncated = true;
      break;
    }
    items.push(item);
  }
  return { at: Date.now(), items, truncated, tookMs: performance.now() - started };
}

/** The key that names one item across snapshots: its kind and name. */
export function itemKey(item: Pick<Inspection, "kind" | "name">): string {
  return `${item.kind}\u0000${item.name}`;
}
