import { createCoordinator } from "@baton/core";
import { backendFrom, msOption, nameFrom, parse } from "../args.js";
import { EXIT } from "../exit-codes.js";
import { loadAdapter } from "../load-adapter.js";
import { type ChildRun, cannotRun, exitCodeOf, onSignals, runChild } from "../run-child.js";
import { UsageError } from "../usage-error.js";

export const ELECT_USAGE = `usage: baton elect NAME [--backend URL] [--ttl MS] [--value TEXT] [--once] [--grace MS] -- CMD [ARGS...]

Campaigns for leadership of NAME and runs CMD only while this instance leads. CMD gets
BATON_ELECTION_NAME, BATON_FENCING_TOKEN (the term; not set, with a warning, on a backend whose
grants carry no ordered token, such as redlock://) and BATON_BACKEND. When leadership is lost
CMD gets SIGTERM, then SIGKILL after --grace (default 5000); after re-election CMD runs again.
Signals reach CMD and every process it started (its process group); whatever CMD leaves
running when it ends is stopped the same way, so nothing it started outlives the term.
If CMD ends by itself, this instance resigns and campaigns again; with --once, baton exits
with CMD's code after the first term. SIGTERM/SIGINT to baton stop CMD (SIGKILL after
--grace) and resign once it has ended.`;

/** `baton elect`. Resolves with the exit code. */
export async function electCommand(
  argv: readonly string[],
  out: (s: string) => void,
  err: (s: string) => void,
): Promise<number> {
  const { values, positionals, command } = parse(argv, {
    backend: { type: "string" },
    ttl: { type: "string" },
    value: { type: "string" },
    once: { type: "boolean" },
    grace: { type: "string" },
  });
  if (values.help) {
    out(ELECT_USAGE);
    return 0;
  }
  const name = nameFrom(positionals, ELECT_USAGE);
  if (command.length === 0) throw new UsageError(`missing CMD after --\n${ELECT_USAGE}`);
  const backend = backendFrom(values.backend, process.env);
  const ttlMs = msOption(values.ttl, "ttl", 15_000, 10);
  const graceMs = msOption(values.grace, "grace", 5_000, 0);
  const once = values.once === true;
  await loadAdapter(backend);
  const coordinator = createCoordinator({ url: backend, ttlMs });
  const store = await coordinator.backend().catch(() => undefined); // errors reach onError
  const tokenless = store?.guarantees.fencing === "none";
  if (tokenless) {
    // Not even one inherited from an outer run: CMD must not mistake it for this term's.
    delete process.env.BATON_FENCING_TOKEN;
    err(
      `baton: warning: the ${store?.kind} backend hands out no ordered fencing token, so CMD gets no BATON_FENCING_TOKEN; terms do not order leaders there`,
    );
  }

  let finish: (code: number) => void = () => undefined;
  const finished = new Promise<number>((resolve) => {
    finish = resolve;
  });
  let child: ChildRun | undefined;
  const election = coordinator.elect(name, {
    ...(typeof values.value === "string" ? { value: values.value } : {}),
    onElected: ({ signal, term }) => {
      const run = runChild(
        command,
        {
          BATON_ELECTION_NAME: name,
          ...(tokenless ? {} : { BATON_FENCING_TOKEN: `${term}` }),
          BATON_BACKEND: backend,
        },
        graceMs,
      );
      child = run;
      signal.addEventListener("abort", () => void run.stop(), { once: true });
      void run.exited.then((exit) => {
        if (child === run) child = undefined;
        if (exit.spawnError !== undefined) {
          err(`baton: ${cannotRun(command, exit.spawnError)}`);
          finish(EXIT.cannotRun);
          return;
        }
        if (signal.aborted) return; // stopped because the term ended
        if (once) finish(exitCodeOf(exit));
        else void election.resign(); // CMD ended by itself: let another instance lead
      });
    },
    onRevoked: async ({ reason }) => {
      if (reason !== "resigned" && reason !== "closed")
        err(`baton: leadership of "${name}" ended (${reason})`);
      await child?.stop();
      if (once && reason !== "resigned" && reason !== "closed") finish(EXIT.lost);
    },
    onError: (error) => err(`baton: ${(error as Error).message ?? String(error)}`),
  });
  const off = onSignals((signal) => {
    void child?.stop(signal);
    finish(exitCodeOf({ code: null, signal }));
  });
  const code = await finished;
  off();
  // Resign only once CMD and every process it started have ended (SIGKILL after --grace):
  // the next leader's CMD must not start beside them.
  await child?.stop();
  await election.close();
  await coordinator.close().catch(() => undefined);
  return code;
}
