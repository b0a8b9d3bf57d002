import { boundedCall } from "@baton/core";
import { toBatonError } from "./redis-errors.js";

/** What one node answered in a round: a value, a failure, or nothing yet. */
export type NodeAnswer<T> =
  | { readonly state: "ok"; readonly value: T }
  | { readonly state: "failed"; readonly error: unknown }
  | { readonly state: "pending" };

/**
 * Sends `call` to every node in parallel, each bounded by `timeoutMs`, and resolves with the
 * answers as soon as `enough(answers)` says the outcome is decided, or when every node has
 * answered or failed. Never rejects. Nodes still pending at that moment keep running. A
 * node's error starts with `node <names[i]>: ` (its `host:port`), or `node <i+1>: `; the
 * caller's message says what the round was (see {@link failures}).
 */
export function askNodes<N, T>(
  nodes: readonly N[],
  call: (node: N) => Promise<T>,
  options: {
    readonly timeoutMs: number;
    readonly enough?: (answers: readonly NodeAnswer<T>[]) => boolean;
    readonly names?: readonly string[];
  },
): Promise<NodeAnswer<T>[]> {
  const answers: NodeAnswer<T>[] = nodes.map(() => ({ state: "pending" }));
  return new Promise((resolve) => {
    let open = nodes.length;
    let done = false;
    const check = () => {
      if (done) return;
      if (open === 0 || options.enough?.(answers) === true) {
        done = true;
        resolve([...answers]);
      }
    };
    nodes.forEach((node, i) => {
      const what = `node ${options.names?.[i] ?? i + 1}`;
      boundedCall(call(node), {
        timeoutMs: options.timeoutMs,
        what,
        mapError: (e) => toBatonError(e, what),
      }).then(
        (value) => {
          answers[i] = { state: "ok", value };
          open--;
          check();
        },
        (error: unknown) => {
          answers[i] = { state: "failed", error };
          open--;
          check();
        },
      );
    });
    check();
  });
}

/** The failed nodes' errors (`node <host:port>: <why>`), `; `-separated; empty when none failed. */
export function failures<T>(answers: readonly NodeAnswer<T>[]): string {
  const messages: string[] = [];
  for (const a of answers) {
    if (a.state === "failed") {
      messages.push(a.error instanceof Error ? a.error.message : String(a.error));
    }
  }
  return messages.join("; ");
}

/** How many answers are in `state`. */
export function count<T>(
  answers: readonly NodeAnswer<T>[],
  test: (a: NodeAnswer<T>) => boolean,
): number {
  let n = 0;
  for (const a of answers) if (test(a)) n++;
  return n;
}
