/** One thing that happened in a run of the invoice story, for the timeline picture. */
export interface TimelineEvent {
  /** Milliseconds from the start of the run. */
  readonly at: number;
  /** `"runner 1"`, `"runner 2"`, `"runner 3"`. */
  readonly runner: string;
  /** Lock grants and ends, runner 1's freeze and wake, and every write and its fate. */
  readonly kind:
    | "acquired"
    | "released"
    | "lost"
    | "freeze"
    | "resume"
    | "write"
    | "stale-write"
    | "rejected";
  /** The token involved, where there is one. */
  readonly token?: bigint;
}
