/** Messages from the runner-1 worker process to the demo (one JSON object per stdout line). */
export type WorkerMessage =
  | { t: "ready" }
  | { t: "event"; kind: "acquired" | "released" | "lost"; token: string }
  | { t: "todo"; id: number }
  | { t: "raise"; id: number; token: string }
  | { t: "write"; id: number; token: string; clientId: number; amountCents: number }
  | { t: "done-write"; id: number; token: string }
  | { t: "freezing" }
  | { t: "exit"; error?: string; code?: string; message?: string };

/** Replies from the demo to the worker (one JSON object per stdin line). */
export type DemoReply =
  | { t: "todo"; id: number; done: boolean; clients: number[] }
  | { t: "ack"; id: number; ok: boolean }
  | { t: "stop" };

/** What the worker is told at start (in the BATON_DEMO_RUNNER environment variable). */
export interface WorkerSettings {
  readonly url: string;
  readonly ttlMs: number;
  readonly lockName: string;
  readonly month: string;
  readonly billMs: readonly [number, number];
  readonly waitMs: number;
  readonly checkSignal: boolean;
  readonly fenced: boolean;
  readonly freezeBeforeBill: number;
}
