import type { HeldLocksResult, LatencySection, WatchResult } from "./results.js";

/** `n` with `digits` decimals, or "-" for NaN / undefined. */
export function fixed(n: number | undefined, digits: number): string {
  return n === undefined || !Number.isFinite(n) ? "-" : n.toFixed(digits);
}

/** A ratio as "1.23x", or "-". */
export function times(n: number | undefined): string {
  return n === undefined || !Number.isFinite(n) ? "-" : `${n.toFixed(2)}x`;
}

/** The cells of a section: header then rows (shared by the console and Markdown). */
export function sectionCells(section: LatencySection): string[][] {
  const floor = section.floor;
  const opsAlike = floor?.opsPerSec !== undefined;
  // Takeover has no rate: drop the column when no row has one.
  const hasOps = section.rows.some((r) => Number.isFinite(r.opsPerSec));
  const hasCpu = section.rows.some((r) => r.clientCpuUs !== undefined);
  const hasServer = section.rows.some((r) => r.server !== undefined);
  const per = section.costLabel ?? "per op";
  const header = [
    "variant",
    ...(hasOps ? [section.opsLabel ?? "ops/s"] : []),
    "p50 ms",
    section.p99Label ?? "p99 ms",
    ...(floor ? ["p50 vs floor"] : []),
    ...(opsAlike
      ? [section.opsVsFloor ? `${section.opsLabel ?? "ops/s"} vs floor` : "time/op vs floor"]
      : []),
    ...(hasCpu ? [`client CPU us ${per}`] : []),
    ...(hasServer ? [`server us ${per}`] : []),
  ];
  const rows = section.rows.map((r) => [
    r.variant,
    ...(hasOps ? [fixed(r.opsPerSec, 0)] : []),
    fixed(r.p50, 3),
    fixed(r.p99, 3),
    ...(floor ? [times(r.p50 / floor.p50)] : []),
    ...(opsAlike
      ? [
          times(
            section.opsVsFloor
              ? r.opsPerSec / (floor.opsPerSec as number)
              : (floor.opsPerSec as number) / r.opsPerSec,
          ),
        ]
      : []),
    ...(hasCpu ? [fixed(r.clientCpuUs, 1)] : []),
    ...(hasServer ? [fixed(r.server?.usPerOp, 1)] : []),
  ]);
  return [header, ...rows];
}

/**
 * The server time of each row by part (a Redis command, a server process or member), one
 * line per row that has more than its total, e.g. "evalsha 7.3 + set 1.0"; empty when none has.
 */
export function serverPartCells(section: LatencySection): string[][] {
  // A split into one part that is the total says nothing more.
  const rows = section.rows.filter(
    (r) =>
      r.server && Object.keys(r.server.parts).length > (r.server.partsSource === undefined ? 1 : 0),
  );
  if (rows.length === 0) return [];
  const sources = [...new Set(rows.map((r) => r.server?.partsSource ?? r.server?.source))];
  return [
    ["variant", `server us ${section.costLabel ?? "per op"}, by part (${sources.join("; ")})`],
    ...rows.map((r) => [
      r.variant,
      Object.entries(r.server?.parts ?? {})
        .map(([part, us]) => `${part} ${us.toFixed(1)}`)
        .join(" + "),
    ]),
  ];
}

/** A plain-text table of a section, for the console. */
export function formatSection(backend: string, section: LatencySection): string {
  const [header, ...rows] = sectionCells(section) as [string[], ...string[][]];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === 0 ? c.padEnd(widths[i] as number) : c.padStart(widths[i] as number)))
      .join("  ");
  const floor = section.floor ? ` (floor: ${section.floor.label})` : "";
  const [partsHeader, ...parts] = serverPartCells(section);
  const partsWidth = Math.max(0, ...parts.map((p) => (p[0] ?? "").length));
  return [
    `\n${backend}: ${section.title}${floor}`,
    line(header),
    line(widths.map((w) => "-".repeat(w))),
    ...rows.map(line),
    ...(partsHeader ? [`  ${partsHeader[1]}:`] : []),
    ...parts.map(([v, p]) => `    ${(v ?? "").padEnd(partsWidth)}  ${p}`),
    ...section.notes.map((n) => `  ${n}`),
  ].join("\n");
}

/** The held-locks figures as label/value pairs (shared by the console and Markdown). */
export function heldCells(h: HeldLocksResult): [string, string][] {
  const one = singular(h.noun);
  return [
    [`${h.noun} held (one coordinator, one session)`, `${h.locks}`],
    ...(h.layout === undefined ? [] : [["held as", h.layout] as [string, string]]),
    ["TTL / renewal interval", `${h.ttlMs} ms / ${h.intervalMs} ms`],
    [
      `acquire / release all (${h.parallelism} in flight)`,
      `${fixed(h.acquireMs / 1000, 1)} s (${fixed((h.locks * 1000) / h.acquireMs, 0)}/s) / ${fixed(h.releaseMs / 1000, 1)} s`,
    ],
    ...h.renewals.map((r): [string, string] => [
      `renewal requests (${r.source})`,
      `${fixed(r.perRenewal, 2)} per renewal, ${fixed(r.perInterval, 2)} per interval (${r.total} in ${fixed(h.windowMs / 1000, 2)} s)`,
    ]),
    ["CPU while holding", `${fixed(h.cpuMsPerSec, 1)} ms per s`],
    [
      h.gcExposed ? `memory per held ${one} (heap+external, after GC)` : `memory per held ${one}`,
      h.gcExposed ? `${fixed(h.heapBytesPerLock, 0)} B` : "- (run with node --expose-gc)",
    ],
    ...(h.adapterHeapBytesPerLock === undefined
      ? []
      : [
          [
            "of which the adapter alone (a bare backend session, same measure)",
            h.heapBytesPerLock >= h.adapterHeapBytesPerLock
              ? `${fixed(h.adapterHeapBytesPerLock, 0)} B (core and the ${one === "lock" ? "Lock" : "Permit"} objects: ${fixed(h.heapBytesPerLock - h.adapterHeapBytesPerLock, 0)} B)`
              : `${fixed(h.adapterHeapBytesPerLock, 0)} B (more than the whole: the two measures differ by more than core's share, so it is not told apart)`,
          ] as [string, string],
        ]),
    [`RSS growth per held ${one} (coarse)`, `${fixed(h.rssBytesPerLock, 0)} B`],
    ...(h.probe === undefined
      ? []
      : [
          [
            `acquire p50 of one more lock (${h.probe.probes} acquires): none held / all held / after release`,
            `${fixed(h.probe.emptyP50, 3)} / ${fixed(h.probe.heldP50, 3)} / ${fixed(h.probe.emptyAfterP50, 3)} ms (held ${times(h.probe.heldP50 / ((h.probe.emptyP50 + h.probe.emptyAfterP50) / 2))} of empty)`,
          ] as [string, string],
        ]),
  ];
}

/** A plain-text block of the held-locks figures, for the console. */
export function formatHeld(backend: string, h: HeldLocksResult): string {
  const cells = heldCells(h);
  const width = Math.max(...cells.map(([k]) => k.length));
  return [
    `\n${backend}: holding ${h.locks} ${h.noun} in one process`,
    ...cells.map(([k, v]) => `${k.padEnd(width)}  ${v}`),
    ...h.notes.map((n) => `  ${n}`),
  ].join("\n");
}

/** "locks" -> "lock", "permits" -> "permit". */
function singular(noun: string): string {
  return noun.endsWith("s") ? noun.slice(0, -1) : noun;
}

/** The watched-names figures as label/value pairs (shared by the console and Markdown). */
export function watchedCells(w: WatchResult): [string, string][] {
  return [
    ["names watched (one coordinator)", w.names.toLocaleString("en-US")],
    [
      "set-up: first watch() to every watch's first value",
      `${fixed(w.setupMs / 1000, 2)} s (${fixed((w.names * 1000) / w.setupMs, 0)} names/s)`,
    ],
    ["memory per watched name (heap+external, after GC)", `${fixed(w.heapBytesPerName, 0)} B`],
    [
      `notification p50 / p99, acquire (${w.samples} samples)`,
      `${fixed(w.acquiredP50, 3)} / ${fixed(w.acquiredP99, 3)} ms`,
    ],
    [
      `notification p50 / p99, release (${w.samples} samples)`,
      `${fixed(w.releasedP50, 3)} / ${fixed(w.releasedP99, 3)} ms`,
    ],
    ...(w.oneNameP50 === undefined
      ? []
      : [
          [
            "notification p50, acquire, with one name watched",
            `${fixed(w.oneNameP50, 3)} ms (${times(w.acquiredP50 / w.oneNameP50)} with all watched)`,
          ] as [string, string],
        ]),
  ];
}

/** A plain-text block of the watched-names figures, for the console. */
export function formatWatched(backend: string, w: WatchResult): string {
  const cells = watchedCells(w);
  const width = Math.max(...cells.map(([k]) => k.length));
  return [
    `\n${backend}: watching ${w.names} names in one process`,
    ...cells.map(([k, v]) => `${k.padEnd(width)}  ${v}`),
    ...w.notes.map((n) => `  ${n}`),
  ].join("\n");
}
