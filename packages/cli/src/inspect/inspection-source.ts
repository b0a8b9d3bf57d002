import type { JobRecord } from "@baton/core";

/** What a lock, a semaphore, a read-write lock, an election or a job is. */
export type InspectionKind = "lock" | "semaphore" | "read-write-lock" | "election" | "job";

/** One holder of an inspected name, as the store tells it. */
export interface InspectionHolder {
  readonly ownerId: string;
  readonly value?: string;
  readonly token?: bigint;
  readonly heldMs?: number;
  readonly remainingMs?: number;
  readonly permits?: number;
  readonly mode?: string;
  readonly foreign?: string;
}

/** One name in the store: its kind, holders, waiters, permits and job slots. */
export interface Inspection {
  readonly kind: InspectionKind;
  readonly name: string;
  readonly holders: readonly InspectionHolder[];
  readonly waiters?: { readonly count: number; readonly ownerIds?: readonly string[] };
  readonly permits?: { readonly used: number; readonly limit: number };
  readonly slots?: readonly { readonly slot: string; readonly record: JobRecord }[];
}

/** What a forced release did. */
export interface ForceReleaseOutcome {
  readonly released: boolean;
}

/** The part of a coordinator that `ls`, `top`, `release` and `dashboard` use. */
export interface InspectionSource {
  list(options?: {
    prefix?: string;
    limit?: number;
    signal?: AbortSignal;
  }): AsyncIterable<Inspection>;
  forceRelease(
    name: string,
    options: { reason: string; token?: bigint; kind?: InspectionKind; signal?: AbortSignal },
  ): Promise<ForceReleaseOutcome>;
}
