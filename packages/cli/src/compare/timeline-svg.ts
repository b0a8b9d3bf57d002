import type { VariantResult } from "../demo/scenario.js";
import type { TimelineEvent } from "../demo/timeline.js";

const WIDTH = 960;
const LEFT = 130;
const RIGHT = 20;
const LANE = 26;
const RUNNERS = ["runner 1", "runner 2", "runner 3"];
const COLORS: Record<string, string> = {
  "runner 1": "#4e79a7",
  "runner 2": "#59a14f",
  "runner 3": "#9c755f",
};

function escapeXml(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

interface Hold {
  runner: string;
  from: number;
  to: number;
  token: bigint | undefined;
  ended: "released" | "lost" | "open";
}

/** Lock holds per runner: from each grant to its release or loss (or the end of the run). */
export function holdsOf(events: readonly TimelineEvent[], end: number): Hold[] {
  const open = new Map<string, { from: number; token: bigint | undefined }>();
  const holds: Hold[] = [];
  for (const e of events) {
    if (e.kind === "acquired") open.set(e.runner, { from: e.at, token: e.token });
    if (e.kind === "released" || e.kind === "lost") {
      const o = open.get(e.runner);
      if (o === undefined) continue;
      open.delete(e.runner);
      holds.push({ runner: e.runner, from: o.from, to: e.at, token: o.token, ended: e.kind });
    }
  }
  for (const [runner, o] of open)
    holds.push({ runner, from: o.from, to: end, token: o.token, ended: "open" });
  return holds;
}

/**
 * One SVG for one backend: a panel per variant, a lane per runner. Bars are lock holds
 * (labelled with the token; a dashed end means the lease was lost, not released), the grey
 * hatched band is runner 1's freeze, dots are bills written (green: by the holder; orange:
 * a stale bill that landed), red crosses are writes the fence rejected.
 */
export function timelineSvg(backend: string, rows: readonly VariantResult[]): string {
  const ran = rows.filter((r) => r.refused === undefined);
  const end = Math.max(1, ...ran.flatMap((r) => r.timeline.map((e) => e.at)));
  const x = (t: number) => LEFT + ((WIDTH - LEFT - RIGHT) * t) / end;
  const panelHeight = 34 + LANE * RUNNERS.length;
  const height = 70 + panelHeight * rows.length + 56;
  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-labelledby="title" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="sans-serif" font-size="12">`,
    `<title id="title">Invoice run on ${escapeXml(backend)}: lock holds per runner, runner 1's freeze, and every write accepted or rejected</title>`,
    `<defs><pattern id="frozen" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="3" height="6" fill="#bbb"/></pattern></defs>`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="10" y="22" font-size="16" font-weight="bold">Invoice run on ${escapeXml(backend)}: who held the lock, the freeze, and every write</text>`,
  );
  let top = 44;
  for (const row of rows) {
    parts.push(
      `<text x="10" y="${top + 14}" font-weight="bold">${escapeXml(row.variant)}${row.refused ? " (refused by correctness mode)" : ""}</text>`,
    );
    const lanesTop = top + 24;
    RUNNERS.forEach((runner, i) => {
      const y = lanesTop + i * LANE;
      parts.push(
        `<text x="10" y="${y + 16}">${runner}</text>`,
        `<line x1="${LEFT}" x2="${WIDTH - RIGHT}" y1="${y + LANE / 2}" y2="${y + LANE / 2}" stroke="#eee"/>`,
      );
    });
    const laneY = (runner: string) => lanesTop + Math.max(0, RUNNERS.indexOf(runner)) * LANE;
    const freeze = row.timeline.find((e) => e.kind === "freeze");
    const resume = row.timeline.find((e) => e.kind === "resume");
    if (freeze) {
      const to = resume?.at ?? end;
      parts.push(
        `<rect x="${x(freeze.at)}" y="${laneY("runner 1") + 1}" width="${Math.max(1, x(to) - x(freeze.at))}" height="${LANE - 2}" fill="url(#frozen)" opacity="0.8"><title>runner 1 frozen ${freeze.at}-${to} ms</title></rect>`,
        `<text x="${x(freeze.at) + 4}" y="${laneY("runner 1") - 2}" fill="#555">frozen</text>`,
      );
    }
    for (const h of holdsOf(row.timeline, end)) {
      const y = laneY(h.runner) + 6;
      const w = Math.max(2, x(h.to) - x(h.from));
      parts.push(
        `<rect x="${x(h.from)}" y="${y}" width="${w}" height="${LANE - 12}" fill="${COLORS[h.runner] ?? "#888"}" opacity="0.55"${h.ended === "lost" ? ' stroke="#c00" stroke-dasharray="4 2"' : ""}><title>${h.runner} holds token ${h.token ?? "-"} from ${h.from} to ${h.to} ms (${h.ended})</title></rect>`,
      );
      if (w > 30)
        parts.push(
          `<text x="${x(h.from) + 3}" y="${y + 11}" font-size="10">token ${h.token ?? "-"}</text>`,
        );
    }
    for (const e of row.timeline) {
      const cy = laneY(e.runner) + LANE / 2;
      if (e.kind === "write" || e.kind === "stale-write") {
        parts.push(
          `<circle cx="${x(e.at)}" cy="${cy}" r="3.5" fill="${e.kind === "write" ? "#2a9d2a" : "#f28e2b"}" stroke="black" stroke-width="0.5"><title>${e.runner} bill with token ${e.token} at ${e.at} ms${e.kind === "stale-write" ? " (stale, accepted)" : ""}</title></circle>`,
        );
      }
      if (e.kind === "rejected") {
        const cx = x(e.at);
        parts.push(
          `<g stroke="#d62728" stroke-width="2.5"><line x1="${cx - 5}" y1="${cy - 5}" x2="${cx + 5}" y2="${cy + 5}"/><line x1="${cx - 5}" y1="${cy + 5}" x2="${cx + 5}" y2="${cy - 5}"/><title>${e.runner} write with token ${e.token} rejected by the fence at ${e.at} ms</title></g>`,
        );
      }
    }
    top += panelHeight;
  }
  const axisY = top + 10;
  parts.push(
    `<line x1="${LEFT}" x2="${WIDTH - RIGHT}" y1="${axisY}" y2="${axisY}" stroke="#333"/>`,
  );
  const step = end > 8_000 ? 2_000 : end > 3_000 ? 1_000 : 500;
  for (let t = 0; t <= end; t += step) {
    parts.push(
      `<line x1="${x(t)}" x2="${x(t)}" y1="${axisY}" y2="${axisY + 5}" stroke="#333"/>`,
      `<text x="${x(t)}" y="${axisY + 18}" text-anchor="middle">${(t / 1000).toFixed(1)} s</text>`,
    );
  }
  parts.push(
    `<text x="${LEFT}" y="${axisY + 34}" fill="#333">bars: lock holds as each runner saw them (dashed red edge: it learned the lease was lost) · grey hatch: frozen</text>`,
    `<text x="${LEFT}" y="${axisY + 50}" fill="#333">green dot: bill by the current holder · orange dot: stale bill accepted · red cross: write rejected by the fence</text>`,
    "</svg>",
  );
  return parts.join("\n");
}
