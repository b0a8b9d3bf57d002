import type { Inspection, InspectionHolder } from "./inspection-source.js";

/** One line of `baton ls` and `baton top`: what a user reads about one name. */
export interface Row {
  readonly kind: string;
  readonly name: string;
  /** The holder (the first of several, then "+N"), or "-" when free. */
  readonly holder: string;
  readonly token: string;
  readonly held: string;
  readonly left: string;
  readonly waiters: string;
  /** Permits used of the limit, an election's term, a job's last slot and outcome. */
  readonly note: string;
}

const HEADER: Row = {
  kind: "KIND",
  name: "NAME",
  holder: "HOLDER",
  token: "TOKEN",
  held: "HELD",
  left: "LEFT",
  waiters: "WAITERS",
  note: "",
};

/** A duration for a person: "850ms", "12.3s", "4m05s", "2h10m"; "-" when unknown. */
export function formatDuration(ms: number | undefined | null): string {
  if (ms == null || !Number.isFinite(ms)) return "-";
  const v = Math.max(0, ms);
  if (v < 1_000) return `${Math.round(v)}ms`;
  if (v < 60_000) return `${(v / 1_000).toFixed(1)}s`;
  if (v < 3_600_000) {
    const s = Math.floor(v / 1_000);
    return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  }
  const m = Math.floor(v / 60_000);
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, "0")}m`;
}

/** The holder as a person reads it: another library's client by name. */
export function holderName(holder: InspectionHolder): string {
  if (holder.foreign === undefined) return holder.ownerId;
  return `${holder.foreign}:${holder.ownerId === "" ? "?" : holder.ownerId}`;
}

/** The row of `item`. */
export function rowOf(item: Inspection): Row {
  const first = item.holders[0];
  const more = item.holders.length > 1 ? ` +${item.holders.length - 1}` : "";
  return {
    kind: item.kind,
    name: item.name,
    holder: first === undefined ? "-" : `${holderName(first)}${more}`,
    token: first?.token === undefined ? "-" : `${first.token}`,
    held: formatDuration(first?.heldMs),
    left: formatDuration(first?.remainingMs),
    waiters: `${item.waiters?.count ?? 0}`,
    note: noteOf(item),
  };
}

function noteOf(item: Inspection): string {
  const notes: string[] = [];
  if (item.permits !== undefined) notes.push(`permits ${item.permits.used}/${item.permits.limit}`);
  const mode = item.holders[0]?.mode;
  if (item.kind === "read-write-lock" && mode !== undefined) notes.push(`${mode}`);
  if (item.kind === "election" && item.holders[0]?.token !== undefined) {
    notes.push(`term ${item.holders[0].token}`);
  }
  const last = item.slots?.[0];
  if (last !== undefined) notes.push(`last ${last.slot} ${last.record.state}`);
  return notes.join(", ");
}

/** `rows` as aligned text columns under a header, one line each (no trailing spaces). */
export function formatTable(rows: readonly Row[], marks?: readonly string[]): string[] {
  const all = [HEADER, ...rows];
  const columns = ["kind", "name", "holder", "token", "held", "left", "waiters"] as const;
  const widths = columns.map((c) => Math.max(...all.map((r) => r[c].length)));
  return all.map((row, i) => {
    const cells = columns.map((c, j) => row[c].padEnd(widths[j] ?? 0));
    const mark = marks === undefined ? "" : `${i === 0 ? " " : (marks[i - 1] ?? " ")} `;
    return `${mark}${[...cells, row.note].join("  ")}`.trimEnd();
  });
}

/** `item` as one JSON object for scripts: tokens as decimal strings. */
export function inspectionJson(item: Inspection): string {
  return JSON.stringify(item, (_key, value) =>
    typeof value === "bigint" ? value.toString() : value,
  );
}
