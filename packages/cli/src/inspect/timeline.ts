import type { Inspection, InspectionHolder } from "./inspection-source.js";
import { itemKey, type Snapshot } from "./snapshot.js";

/** What happened to a name between two snapshots. */
export type TimelineEventType = "acquired" | "released" | "lost" | "revoked" | "elected" | "job";

/** One entry of the timeline: derived from two successive snapshots. */
export interface TimelineEvent {
  /** Wall-clock time (ms since the epoch) of the snapshot that showed it. */
  readonly at: number;
  readonly type: TimelineEventType;
  readonly kind: Inspection["kind"];
  readonly name: string;
  readonly owner?: string;
  /** Decimal token, when the store gives one. */
  readonly token?: string;
  /** A job's slot and outcome; a revocation's reason. */
  readonly detail?: string;
}

/** A holder's identity across snapshots: its token, else its owner. */
function holderId(holder: InspectionHolder): string {
  return holder.token === undefined ? `o:${holder.ownerId}` : `t:${holder.token}`;
}

/** A lease that was this close to running out when last seen was lost, not released. */
const EXPIRY_SLACK_MS = 250;

/**
 * The events between `prev` and `next`. `revoked` names the grants (`kind`, name and token,
 * see {@link revocationKey}) a forced release freed, so their end is told as a revocation.
 */
export function diffSnapshots(
  prev: Snapshot,
  next: Snapshot,
  revoked: ReadonlyMap<string, string> = new Map(),
): TimelineEvent[] {
  const events: TimelineEvent[] = [];
  const before = new Map(prev.items.map((item) => [itemKey(item), item]));
  const after = new Map(next.items.map((item) => [itemKey(item), item]));
  const elapsed = next.at - prev.at;
  for (const [key, old] of before) {
    const now = after.get(key);
    const still = new Set(now?.holders.map(holderId) ?? []);
    for (const holder of old.holders) {
      if (still.has(holderId(holder))) continue;
      const token = holder.token === undefined ? undefined : `${holder.token}`;
      const reason =
        token === undefined ? undefined : revoked.get(revocationKey(old.kind, old.name, token));
      const ranOut =
        holder.remainingMs !== undefined && holder.remainingMs <= elapsed + EXPIRY_SLACK_MS;
      events.push(
        withOptional({
          at: next.at,
          type: reason !== undefined ? "revoked" : ranOut ? "lost" : "released",
          kind: old.kind,
          name: old.name,
          owner: holder.ownerId,
          token,
          detail: reason,
        }),
      );
    }
  }
  for (const [key, item] of after) {
    const old = before.get(key);
    const had = new Set(old?.holders.map(holderId) ?? []);
    for (const holder of item.holders) {
      if (had.has(holderId(holder))) continue;
      events.push(
        withOptional({
          at: next.at,
          type: item.kind === "election" ? "elected" : "acquired",
          kind: item.kind,
          name: item.name,
          owner: holder.ownerId,
          token: holder.token === undefined ? undefined : `${holder.token}`,
          detail:
            item.kind === "election" && holder.token !== undefined
              ? `term ${holder.token}`
              : undefined,
        }),
      );
    }
    const seen = new Set(
      (old?.slots ?? []).map((s) => `${s.slot}\u0000${s.record.state}\u0000${s.record.attempt}`),
    );
    for (const { slot, record } of item.slots ?? []) {
      if (seen.has(`${slot}\u0000${record.state}\u0000${record.attempt}`)) continue;
      // A job seen for the first time: only what it did since the previous snapshot.
      if (old === undefined && (record.endedAt ?? record.startedAt) < prev.at) continue;
      events.push({
        at: next.at,
        type: "job",
        kind: item.kind,
        name: item.name,
        owner: record.holder,
        token: `${record.token}`,
        detail: `${slot} ${record.state}${record.state === "failed" && record.error ? `: ${record.error}` : ""} (attempt ${record.attempt})`,
      });
    }
  }
  return events;
}

/** The key of one grant in the map of revocations {@link diffSnapshots} takes. */
export function revocationKey(kind: string, name: string, token: string): string {
  return `${kind}\u0000${name}\u0000${token}`;
}

function withOptional(
  event: {
    [K in keyof TimelineEvent]: TimelineEvent[K] | undefined;
  },
): TimelineEvent {
  return Object.fromEntries(
    Object.entries(event).filter(([, v]) => v !== undefined),
  ) as unknown as TimelineEvent;
}
