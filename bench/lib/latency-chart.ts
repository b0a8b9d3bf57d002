import { type BackendResult, floorRow, type Role, sectionOf } from "./results.js";

/** Bar colours by role, and the legend's words for them. */
const ROLES: readonly { role: Role; label: string; color: string }[] = [
  { role: "floor", label: "raw client (floor)", color: "#8c8c8c" },
  { role: "reference", label: "raw, other shape", color: "#c8c8c8" },
  { role: "session", label: "Baton adapter alone", color: "#79aee0" },
  { role: "coordinator", label: "Baton coordinator", color: "#1f5fa8" },
  { role: "peer", label: "peer library", color: "#e08a2c" },
];

const WIDTH = 920;
const LABEL_RIGHT = 300;
const BAR_LEFT = 310;
const BAR_MAX = 470;
const ROW = 22;
const BAR = 15;

/** Escapes text for XML. */
function esc(text: string): string {
  return text
    .replaceAll("&", "&amp;")
    .replaceAll("<", "&lt;")
    .replaceAll(">", "&gt;")
    .replaceAll('"', "&quot;");
}

/**
 * A hand-written SVG of uncontended acquire + release p50 per backend: one panel per backend
 * (each on its own scale, the stores differ by 40x), a bar per variant coloured by role, the
 * floor's p50 as a dashed line, and each bar's value and ratio to the floor.
 */
export function latencyChart(results: readonly BackendResult[], subtitle: string): string {
  const out: string[] = [];
  let y = 0;
  const text = (x: number, yy: number, s: string, attrs = "") =>
    out.push(`<text x="${x}" y="${yy}"${attrs ? ` ${attrs}` : ""}>${esc(s)}</text>`);
  y += 28;
  text(
    20,
    y,
    "Uncontended acquire + release: p50 latency per backend against its raw floor",
    'class="title"',
  );
  y += 20;
  text(20, y, subtitle, 'class="sub"');
  y += 22;
  // Legend.
  let x = 20;
  for (const r of ROLES) {
    out.push(`<rect x="${x}" y="${y - 11}" width="12" height="12" fill="${r.color}"/>`);
    text(x + 17, y, r.label, 'class="legend"');
    x += Math.round(30 + r.label.length * 6.6);
  }
  out.push(
    `<line x1="${x}" y1="${y - 13}" x2="${x}" y2="${y + 2}" class="floorline"/>`,
    `<text x="${x + 6}" y="${y}" class="legend">floor p50</text>`,
  );
  y += 16;
  for (const result of results) {
    const section = sectionOf(result, "uncontended");
    y += 22;
    text(20, y, `${result.backend}: ${result.server}`, 'class="panel"');
    if (!section || section.rows.length === 0) {
      y += ROW;
      text(40, y, "not measured in this run", 'class="note"');
      continue;
    }
    const floor = floorRow(section);
    const max = Math.max(...section.rows.map((r) => (Number.isFinite(r.p50) ? r.p50 : 0)));
    const scale = max > 0 ? BAR_MAX / max : 0;
    const top = y + 6;
    for (const r of section.rows) {
      y += ROW;
      const color = ROLES.find((c) => c.role === r.role)?.color ?? "#000";
      const w = Number.isFinite(r.p50) ? Math.max(1, r.p50 * scale) : 0;
      text(LABEL_RIGHT, y, r.variant, 'class="label" text-anchor="end"');
      out.push(
        `<rect x="${BAR_LEFT}" y="${y - BAR + 3}" width="${w.toFixed(1)}" height="${BAR}" fill="${color}"/>`,
      );
      const ratio = floor ? ` \u00b7 ${(r.p50 / floor.p50).toFixed(2)}x` : "";
      text(BAR_LEFT + w + 6, y, `${r.p50.toFixed(3)} ms${ratio}`, 'class="value"');
    }
    if (floor && Number.isFinite(floor.p50)) {
      const fx = BAR_LEFT + floor.p50 * scale;
      out.push(
        `<line x1="${fx.toFixed(1)}" y1="${top}" x2="${fx.toFixed(1)}" y2="${y + 6}" class="floorline"/>`,
      );
    }
    y += 8;
  }
  y += 20;
  const height = y;
  return [
    `<?xml version="1.0" encoding="UTF-8"?>`,
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" role="img" aria-labelledby="chart-title">`,
    `<title id="chart-title">Baton uncontended acquire + release p50 latency per backend against the raw client floor</title>`,
    "<style>",
    "text { font-family: -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; fill: #222; }",
    ".title { font-size: 17px; font-weight: 600; }",
    ".sub { font-size: 12px; fill: #555; }",
    ".legend { font-size: 12px; }",
    ".panel { font-size: 14px; font-weight: 600; }",
    ".label { font-size: 12px; }",
    ".value { font-size: 11px; fill: #333; }",
    ".note { font-size: 12px; fill: #777; font-style: italic; }",
    ".floorline { stroke: #333; stroke-width: 1; stroke-dasharray: 4 3; }",
    "</style>",
    `<rect width="${WIDTH}" height="${height}" fill="#ffffff"/>`,
    ...out,
    "</svg>",
    "",
  ].join("\n");
}
