import { BackendUnavailableError, sleep, systemClock } from "@baton/core";
import type { InspectionKind, InspectionSource } from "../inspect/inspection-source.js";
import { inspectionJson } from "../inspect/rows.js";
import { type Snapshot, takeSnapshot } from "../inspect/snapshot.js";
import { diffSnapshots, revocationKey, type TimelineEvent } from "../inspect/timeline.js";

/** How many timeline events the dashboard keeps (and sends a page that connects). */
export const TIMELINE_LENGTH = 200;

/** How many forced releases the feed remembers, to tell their ends as revocations. */
const REVOCATIONS_KEPT = 500;

/** What the feed tells its subscribers after every snapshot. */
export interface FeedUpdate {
  /** The state event's JSON text: the snapshot as the page reads it. */
  readonly state: string;
  /** Events since the previous snapshot. */
  readonly events: readonly TimelineEvent[];
}

/**
 * Takes a snapshot of every name under a prefix about every `intervalMs`, derives the
 * timeline from successive snapshots, and hands both to its subscribers (the page's
 * Server-Sent Events streams).
 */
export class Feed {
  readonly #source: InspectionSource;
  readonly #prefix: string | undefined;
  readonly #intervalMs: number;
  readonly #subscribers = new Set<(update: FeedUpdate) => void>();
  readonly #timeline: TimelineEvent[] = [];
  readonly #revoked = new Map<string, string>();
  readonly #stop = new AbortController();
  #last: Snapshot | undefined;
  #lastState: string | undefined;
  #error: string | undefined;
  #running: Promise<void> | undefined;

  constructor(source: InspectionSource, prefix: string | undefined, intervalMs: number) {
    this.#source = source;
    this.#prefix = prefix;
    this.#intervalMs = intervalMs;
  }

  /** Starts taking snapshots. */
  start(): void {
    this.#running ??= this.#loop();
  }

  /** Stops taking snapshots; resolves once the one under way has ended. */
  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#running;
  }

  /** The newest state's JSON text, and the timeline so far (oldest first). */
  current(): { state: string | undefined; timeline: readonly TimelineEvent[] } {
    return { state: this.#lastState, timeline: [...this.#timeline] };
  }

  /** Calls `listener` after every snapshot; returns the function that stops it. */
  subscribe(listener: (update: FeedUpdate) => void): () => void {
    this.#subscribers.add(listener);
    return () => this.#subscribers.delete(listener);
  }

  /** Notes a forced release, so the end of that grant shows as revoked, with `reason`. */
  noteRevoked(kind: InspectionKind, name: string, token: string | undefined, reason: string): void {
    if (token === undefined) return;
    this.#revoked.set(revocationKey(kind, name, token), reason);
    while (this.#revoked.size > REVOCATIONS_KEPT) {
      const oldest = this.#revoked.keys().next().value as string;
      this.#revoked.delete(oldest);
    }
  }

  async #loop(): Promise<void> {
    const signal = this.#stop.signal;
    while (!signal.aborted) {
      const started = performance.now();
      await this.#tick(signal);
      const rest = this.#intervalMs - (performance.now() - started);
      // At least a short pause, so a store that takes longer than the interval to list is not
      // read back to back.
      await sleep(systemClock, Math.max(rest, this.#intervalMs / 4), signal, {
        keepAlive: false,
      }).catch(() => undefined);
    }
  }

  async #tick(signal: AbortSignal): Promise<void> {
    let events: TimelineEvent[] = [];
    try {
      const next = await takeSnapshot(this.#source, this.#prefix, signal);
      if (this.#last !== undefined) events = diffSnapshots(this.#last, next, this.#revoked);
      this.#last = next;
      this.#error = undefined;
    } catch (error) {
      if (signal.aborted) return;
      this.#error =
        error instanceof BackendUnavailableError || error instanceof Error
          ? error.message
          : String(error);
    }
    this.#timeline.push(...events);
    if (this.#timeline.length > TIMELINE_LENGTH) {
      this.#timeline.splice(0, this.#timeline.length - TIMELINE_LENGTH);
    }
    const state = this.#stateJson();
    this.#lastState = state;
    for (const listener of this.#subscribers) listener({ state, events });
  }

  #stateJson(): string {
    const last = this.#last;
    const items = last === undefined ? "[]" : `[${last.items.map(inspectionJson).join(",")}]`;
    const head = JSON.stringify({
      at: last?.at ?? Date.now(),
      tookMs: last === undefined ? null : Math.round(last.tookMs),
      truncated: last?.truncated ?? false,
      error: this.#error ?? null,
    });
    return `${head.slice(0, -1)},"items":${items}}`;
  }
}
