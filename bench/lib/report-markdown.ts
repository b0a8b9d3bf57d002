import {
  fixed,
  heldCells,
  sectionCells,
  serverPartCells,
  times,
  watchedCells,
} from "./format-table.js";
import type { MachineInfo } from "./machine.js";
import { type BackendResult, type Figure, floorRow, sectionOf } from "./results.js";
import type { TargetCheck } from "./targets.js";

/** What the report is written from. */
export interface ReportInput {
  readonly machine: MachineInfo;
  readonly results: readonly BackendResult[];
  readonly targets: readonly TargetCheck[];
  /** Every backend the bench knows; those missing from `results` were not run. */
  readonly all: readonly string[];
  readonly totalMs: number;
  /** The chart's file name, relative to the report. */
  readonly chart: string;
}

const FIGURES: readonly { figure: Figure; heading: string; intro: string }[] = [
  {
    figure: "uncontended",
    heading: "Uncontended acquire + release",
    intro:
      "One client, one lock, acquire then release, back to back. The variants run interleaved (30 short rounds, each variant moved through every place of the order in turn) so drift of the machine hits each alike; the floor is the raw client doing the same round trips. Client CPU (this process, user + system, from `process.cpuUsage()`) and server time are per acquire + release, summed over each variant's own rounds only (warm-up and the other variants' rounds left out); core's share (coordinator minus session) is the median of the rounds' differences; the server column says what it counts under each table, with a split by part (member, process or Redis command) below it.",
  },
  {
    figure: "handoff",
    heading: "Handoff with 8 waiters",
    intro:
      "Nine coordinators loop on one lock (acquire, hold 2 ms, release, pause 1 ms), so up to 8 wait at each release; a sample is the time from one `release()` call to the next holder holding. Compared variants run in alternating blocks. The ratio base is the floor's uncontended acquire + release p50 (target: handoff within 2 of those).",
  },
  {
    figure: "takeover",
    heading: "Takeover",
    intro:
      "A lock worker process holds the lock and a coordinator here waits for it. Graceful: the worker is told to release. SIGKILL: the worker is killed and the store must notice (lease or session expiry), so this is bounded below by the TTL.",
  },
  {
    figure: "throughput",
    heading: "Throughput: 16 clients over 1,000 keys",
    intro: "Locks per second over all clients, each acquire + release on a key drawn at random.",
  },
  {
    figure: "service",
    heading: "The service pattern: one client object, C concurrent callers",
    intro:
      "One client object in one process (one coordinator; the raw client on one connection, or on the pool a service would give it; one instance of each peer library) serves C concurrent callers, each looping acquire + release: on a key of its own (distinct), on a key drawn at random from 1,000, or on one hot key. For each cell the variants run one after another, in one order in the first round and the opposite order in the second. Locks/s over the cell's time; p50/p99 of one acquire + release (waits and retries for a taken key included); client CPU (this process, `process.cpuUsage()`) and server time per lock.",
  },
  {
    figure: "service-processes",
    heading: "The service pattern over P processes",
    intro:
      "As above, with P processes (each its own client object per variant) and the C callers split evenly over them, started together: where the store, not one client process, is the limit. Locks/s: every process's locks over the cell's time; client CPU per lock: every process's CPU over every lock.",
  },
  {
    figure: "waiters",
    heading: "Many waiters on one name",
    intro:
      "Waiters on one lock spread over several processes, each process one coordinator with its share of the waiters; one holder at a time. A sample is the time from one `release()` call to the next holder holding; the ratio base is the uncontended floor's acquire + release p50 (no herd: server requests per handoff do not grow with the waiters). Where a row names a raw blocking wait, it is the raw client's hand-off between the same processes: each waiter its own connection blocked in the store's own wait, so nothing runs in the client between a release and the next grant.",
  },
  {
    figure: "permit-uncontended",
    heading: "Semaphores: uncontended permit acquire + release",
    intro:
      "One client takes 1 permit of a semaphore of 4 and releases it, back to back: the coordinator's `semaphore(name, { permits: 4 }).acquire()` then `release()`, the adapter's session alone (`acquirePermits` then `release`, waiting as the coordinator asks), and the raw client doing the adapter's round trips (the floor), interleaved as for locks. Client CPU and server time as for locks.",
  },
  {
    figure: "permit-handoff",
    heading: "Semaphores: permit handoff with 8 waiters",
    intro:
      "A semaphore of 4 permits, 3 of them held throughout by another holder; nine coordinators loop on the last one (acquire, hold 2 ms, release, pause 1 ms), so up to 8 wait at each release. A sample is the time from one `release()` call to the next holder holding. The ratio base is the floor's uncontended permit acquire + release p50.",
  },
];

/** A Markdown table; a column whose cells all start with a number (or "-") is right-aligned. */
function table(cells: readonly (readonly string[])[]): string {
  const [header, ...rows] = cells as [readonly string[], ...(readonly string[])[]];
  const esc = (c: string) => c.replaceAll("|", "\\|");
  const numeric = (i: number) => rows.length > 0 && rows.every((r) => /^[-\d.]/.test(r[i] ?? ""));
  return [
    `| ${header.map(esc).join(" | ")} |`,
    `| ${header.map((_, i) => (numeric(i) ? "---:" : "---")).join(" | ")} |`,
    ...rows.map((r) => `| ${r.map(esc).join(" | ")} |`),
  ].join("\n");
}

/** One backend's row of the semaphore summary. */
function permitSummaryRow(r: BackendResult): string[] {
  const unc = sectionOf(r, "permit-uncontended");
  const floor = unc ? floorRow(unc) : undefined;
  const byRole = (role: string) => unc?.rows.find((row) => row.role === role);
  const ratio = (role: string) => {
    const x = byRole(role);
    return floor && x ? times(x.p50 / floor.p50) : x ? `${fixed(x.p50, 3)} ms` : "-";
  };
  const coord = byRole("coordinator");
  const peers =
    unc?.rows
      .filter((x) => x.role === "peer")
      .map(
        (x) =>
          `${x.variant} ${floor ? times(x.p50 / floor.p50) : `${fixed(x.p50, 3)} ms`}${coord ? ` (coordinator ${times(coord.p50 / x.p50)} of it)` : ""}`,
      )
      .join(", ") || "-";
  const cost = (pick: (x: NonNullable<ReturnType<typeof byRole>>) => number | undefined) =>
    ["floor", "session", "coordinator"]
      .map((role) => {
        const x = byRole(role);
        return x ? fixed(pick(x), 1) : "-";
      })
      .join(" / ");
  const handoff = sectionOf(r, "permit-handoff");
  const hb = handoff?.rows.find((x) => x.role === "coordinator");
  const hf = handoff?.floor;
  const held = r.heldPermits;
  return [
    r.backend,
    floor ? `${fixed(floor.p50, 3)} ms` : "-",
    ratio("session"),
    ratio("coordinator"),
    peers,
    unc ? cost((x) => x.clientCpuUs) : "-",
    unc ? cost((x) => x.server?.usPerOp) : "-",
    hb ? `${fixed(hb.p50, 2)} ms (${hf ? times(hb.p50 / hf.p50) : "-"})` : "-",
    held?.renewals[0] ? fixed(held.renewals[0].perRenewal, 2) : "-",
    held
      ? `${fixed(held.gcExposed ? held.heapBytesPerLock : held.rssBytesPerLock, 0)} B${held.adapterHeapBytesPerLock === undefined ? "" : ` (adapter ${fixed(held.adapterHeapBytesPerLock, 0)} B)`}`
      : "-",
  ];
}

function summaryRow(r: BackendResult): string[] {
  const unc = sectionOf(r, "uncontended");
  const floor = unc ? floorRow(unc) : undefined;
  const ratio = (role: string) => {
    const x = unc?.rows.find((row) => row.role === role);
    return floor && x ? times(x.p50 / floor.p50) : "-";
  };
  const peers =
    unc?.rows
      .filter((x) => x.role === "peer")
      .map((x) => `${x.variant} ${floor ? times(x.p50 / floor.p50) : "-"}`)
      .join(", ") || "-";
  const byRole = (role: string) => unc?.rows.find((row) => row.role === role);
  const cost = (pick: (x: NonNullable<ReturnType<typeof byRole>>) => number | undefined) =>
    ["floor", "session", "coordinator"]
      .map((role) => {
        const x = byRole(role);
        return x ? fixed(pick(x), 1) : "-";
      })
      .join(" / ");
  const handoff = sectionOf(r, "handoff");
  const hb = handoff?.rows.find((x) => x.role === "coordinator");
  const hf = handoff?.floor;
  const take = sectionOf(r, "takeover");
  const tk = (i: number) => fixed(take?.rows[i]?.p50, 0);
  const thr = sectionOf(r, "throughput")?.rows[0];
  const held = r.held;
  return [
    r.backend,
    floor ? `${fixed(floor.p50, 3)} ms` : "-",
    ratio("session"),
    ratio("coordinator"),
    peers,
    unc ? cost((x) => x.clientCpuUs) : "-",
    unc ? cost((x) => x.server?.usPerOp) : "-",
    hb ? `${fixed(hb.p50, 2)} ms (${hf ? times(hb.p50 / hf.p50) : "-"})` : "-",
    hb ? fixed(hb.clientCpuUs, 0) : "-",
    take ? `${tk(0)} / ${tk(1)} ms` : "-",
    thr ? `${fixed(thr.opsPerSec, 0)}/s (p99 ${fixed(thr.p99, 1)} ms)` : "-",
    held?.renewals[0] ? fixed(held.renewals[0].perRenewal, 2) : "-",
    held ? fixed(held.cpuMsPerSec, 1) : "-",
    held
      ? `${fixed(held.gcExposed ? held.heapBytesPerLock : held.rssBytesPerLock, 0)} B${held.adapterHeapBytesPerLock === undefined ? "" : ` (adapter ${fixed(held.adapterHeapBytesPerLock, 0)} B)`}`
      : "-",
  ];
}

/** One backend's rows of the service-pattern summary: a row per (keys, C) section. */
function serviceSummaryRows(r: BackendResult): string[][] {
  return r.sections
    .filter((s) => s.figure === "service" || s.figure === "service-processes")
    .map((s) => {
      const floor = floorRow(s);
      const coord = s.rows.find((x) => x.role === "coordinator");
      const vs = (a: number | undefined, b: number | undefined) =>
        a === undefined || b === undefined ? "-" : times(a / b);
      const peers =
        s.rows
          .filter((x) => x.role === "peer")
          .map(
            (x) => `${x.variant} ${fixed(x.opsPerSec, 0)} (${vs(coord?.opsPerSec, x.opsPerSec)})`,
          )
          .join(", ") || "-";
      const cell = s.service;
      return [
        r.backend,
        cell?.mode ?? "-",
        cell
          ? `${cell.callers}${cell.processes > 1 ? ` over ${cell.processes} processes` : ""}`
          : "-",
        floor ? fixed(floor.opsPerSec, 0) : "-",
        coord ? `${fixed(coord.opsPerSec, 0)} (${vs(coord.opsPerSec, floor?.opsPerSec)})` : "-",
        peers,
        `${fixed(floor?.p99, 1)} / ${fixed(coord?.p99, 1)}`,
        `${fixed(floor?.clientCpuUs, 1)} / ${fixed(coord?.clientCpuUs, 1)}`,
        `${fixed(floor?.server?.usPerOp, 1)} / ${fixed(coord?.server?.usPerOp, 1)}`,
      ];
    });
}

/** The Markdown report (bench/RESULTS.md) of one run. */
export function reportMarkdown(input: ReportInput): string {
  const { machine: m, results } = input;
  const ran = results.map((r) => r.backend);
  const missing = input.all.filter((b) => !ran.includes(b));
  const lines: string[] = [];
  const push = (...l: string[]) => lines.push(...l);
  push(
    "# Baton benchmark results",
    "",
    `Generated by \`npm run bench${missing.length > 0 ? ` -- ${ran.join(" ")}` : ""}\` on ${m.date} (commit ${m.commit}); do not edit by hand, run it again.`,
    "",
  );
  if (missing.length > 0) {
    push(
      `**Partial run:** only ${ran.join(", ")}; not run: ${missing.join(", ")}. A full \`npm run bench\` writes RESULTS.md.`,
      "",
    );
  }
  push(
    `Machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGb} GB RAM, ${m.os}; Node ${m.node}; load average ${fixed(m.loadAtStart, 2)} at the start (other work on the machine makes runs noisy: compare ratios within one run). CPUs: ${m.placement}. Whole run: ${fixed(input.totalMs / 1000, 0)} s.`,
    "",
    "Servers (private, on loopback, started by the conformance harness):",
    "",
    ...results.map(
      (r) => `- ${r.backend}: ${r.server} (bench took ${fixed(r.elapsedMs / 1000, 0)} s)`,
    ),
    "",
    `Packages: ${Object.entries(m.packages)
      .map(([k, v]) => `${k} ${v}`)
      .join(", ")}.`,
    "",
    "The bench runs the TypeScript sources through TypeScript's own transpiler (bench/lib/register-ts.mjs), as `tsc` emits them for the published packages; not through tsx, whose esbuild `keepNames` adds an `Object.defineProperty` per closure created (measured: about 1.8 KB more per held lock, and a slower acquire).",
    "",
    `![p50 latency per backend against its floor](${input.chart})`,
    "",
  );
  const lockResults = results.filter((r) => r.scope !== "permits");
  if (lockResults.length > 0) {
    push(
      "## Summary",
      "",
      table([
        [
          "backend",
          "floor p50",
          "adapter alone",
          "coordinator",
          "peers",
          "client CPU us/op: floor / session / coordinator",
          "server us/op: floor / session / coordinator",
          "handoff p50 (vs floor)",
          "client CPU us per handoff grant",
          "takeover graceful / SIGKILL",
          "throughput 16 x 1,000 keys",
          "requests per renewal",
          "CPU ms/s holding",
          "memory per lock",
        ],
        ...lockResults.map(summaryRow),
      ]),
      "",
      "Ratios are p50 over the floor's p50 (lower is better). Client CPU: this process's user + system time per acquire + release over the measured rounds only; server: the server's own time per acquire + release (what each backend's section says it is). Requests per renewal: for the one session holding all the locks, from the first source listed under Holding locks; core renews once per interval (a third of the TTL), so this is also the requests per interval.",
      "",
    );
  }
  const serviceRows = results.flatMap(serviceSummaryRows);
  if (serviceRows.length > 0) {
    push(
      "## Service pattern summary",
      "",
      table([
        [
          "backend",
          "keys",
          "C",
          "floor locks/s",
          "coordinator locks/s (vs floor)",
          "peers locks/s (coordinator vs peer)",
          "p99 ms: floor / coordinator",
          "client CPU us/lock: floor / coordinator",
          "server us/lock: floor / coordinator",
        ],
        ...serviceRows,
      ]),
      "",
      "One client object in one process serving C concurrent callers (see the section below); the floor is the raw client on one connection or, where the section marks it so, on a pool.",
      "",
    );
  }
  const withPermits = results.filter((r) => r.semaphores === true);
  const withoutPermits = results.filter((r) => r.semaphores === false).map((r) => r.backend);
  if (withPermits.length > 0 || withoutPermits.length > 0) {
    push("## Semaphores summary", "");
    if (withPermits.length > 0) {
      push(
        table([
          [
            "backend",
            "permit floor p50",
            "adapter alone",
            "coordinator",
            "peers",
            "client CPU us/op: floor / session / coordinator",
            "server us/op: floor / session / coordinator",
            "permit handoff p50 (vs floor)",
            "requests per renewal, 10,000 permits",
            "memory per permit",
          ],
          ...withPermits.map(permitSummaryRow),
        ]),
        "",
        "Per acquire + release of 1 permit of a semaphore of 4; ratios are p50 over the permit floor's p50 (where a backend has no floor, the p50 itself). A peer's parenthesis is the coordinator's p50 over the peer's.",
        "",
      );
    }
    if (withoutPermits.length > 0) {
      push(
        `Not measured: ${withoutPermits.join(", ")} (their guarantees declare \`semaphores: false\`).`,
        "",
      );
    }
  }
  push(
    "## Targets",
    "",
    table([
      ["backend", "target", "measured", "met"],
      ...input.targets.map((t) => [
        t.backend,
        t.target,
        t.measured,
        t.met === undefined ? "n/a" : t.met ? "yes" : "**no**",
      ]),
    ]),
    "",
  );
  for (const f of FIGURES) {
    if (!results.some((r) => sectionOf(r, f.figure))) continue;
    push(`## ${f.heading}`, "", f.intro, "");
    for (const r of results) {
      for (const section of r.sections.filter((x) => x.figure === f.figure)) {
        const floor = section.floor ? ` (floor: ${section.floor.label})` : "";
        push(`### ${r.backend}: ${section.title}${floor}`, "", table(sectionCells(section)), "");
        const parts = serverPartCells(section);
        if (parts.length > 0) push(table(parts), "");
        for (const n of section.notes) push(`- ${n}`);
        if (section.notes.length > 0) push("");
      }
    }
  }
  const heldSection = (
    what: "locks" | "permits",
    intro: string,
    of: (r: (typeof results)[number]) => (typeof results)[number]["held"],
  ) => {
    const holding = results.filter((r) => of(r) !== undefined);
    if (holding.length === 0) return;
    push(
      `## Holding ${of(holding[0] as (typeof results)[number])?.locks.toLocaleString("en-US")} ${what} in one process`,
      "",
      intro,
      "",
    );
    for (const r of holding) {
      const h = of(r);
      if (!h) continue;
      push(`### ${r.backend}`, "", table([["figure", "value"], ...heldCells(h)]), "");
      for (const n of h.notes) push(`- ${n}`);
      push("");
    }
  };
  heldSection(
    "locks",
    "One coordinator (one session) acquires the locks with bounded parallelism, then holds them over several renewal intervals: renewal requests (server side where the store counts them, and core's `keepAlive()` calls), process CPU, and memory per lock (heap and external growth after a full GC, the bench's array of lock references included). Before that, the same number of locks is taken through a bare backend session (no core) to split the memory into the adapter's share and core's.",
    (r) => r.held,
  );
  heldSection(
    "permits",
    "As for locks: one coordinator (one session) acquires the permits, 1 per acquire, spread over semaphores as each table says, then holds them over several renewal intervals; the same number is taken through a bare backend session first for the adapter's share of the memory.",
    (r) => r.heldPermits,
  );
  const scaled = results.filter((r) => r.heldScale !== undefined);
  if (scaled.length > 0) {
    push(
      "## Scale: many locks held by one coordinator",
      "",
      "As under Holding locks, at the count each table gives (a 6 s TTL, renewal every 2 s, no bare-session pass), with one more lock's acquire timed 200 times one after another before the locks are taken, while they are all held, and after they were all released.",
      "",
    );
    for (const r of scaled) {
      const h = r.heldScale;
      if (!h) continue;
      push(
        `### ${r.backend}: ${h.locks.toLocaleString("en-US")} locks`,
        "",
        table([["figure", "value"], ...heldCells(h)]),
        "",
      );
      for (const n of h.notes) push(`- ${n}`);
      push("");
    }
  }
  const watching = results.filter((r) => r.watched !== undefined);
  if (watching.length > 0) {
    push(
      "## Scale: many names watched by one coordinator",
      "",
      "One coordinator runs a `watch(name)` loop per name; another coordinator acquires and releases names drawn at random, one at a time: the set-up time, the memory per watched name, and the time from the other coordinator's acquire (or release) resolving to the watcher's loop seeing it.",
      "",
    );
    for (const r of watching) {
      const w = r.watched;
      if (!w) continue;
      push(`### ${r.backend}`, "", table([["figure", "value"], ...watchedCells(w)]), "");
      for (const n of w.notes) push(`- ${n}`);
      push("");
    }
  }
  const errors = results.flatMap((r) => r.errors.map((e) => `- ${r.backend}: ${e}`));
  if (errors.length > 0) push("## Errors", "", ...errors, "");
  return `${lines.join("\n")}\n`;
}
