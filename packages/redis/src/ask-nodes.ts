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
 * answered or failed. Never rejects. Nodes still pending at that moment keep running; `late`
 * receives each of their calls.
 */
export function askNodes<N, T>(
  nodes: readonly N[],
  call: (node: N) => Promise<T>,
  options: {
    readonly timeoutMs: number;
    readonly what: string;
    readonly enough?: (answers: readonly NodeAnswer<T>[]) => boolean;
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
      const what = `${options.what} (node ${i + 1})`;
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

/** How many answers are in `state`. */
export function count<T>(
  answers: readonly NodeAnswer<T>[],
  test: (a: NodeAnswer<T>) => boolean,
): number {
  let n = 0;
  for (const a of answers) if (test(a)) n++;
  return n;
}
