/**
 * Which sections a run measures: `npm run bench -- redis --only service,scale` (run.ts turns
 * `--only` into `BATON_BENCH_ONLY`), or every section when none is named. A run of some
 * sections writes the partial report only.
 */
export const SECTIONS = [
  "uncontended",
  "handoff",
  "takeover",
  "throughput",
  "held",
  "permits",
  "service",
  "processes",
  "scale",
] as const;

/** A section name of {@link SECTIONS}. */
export type SectionName = (typeof SECTIONS)[number];

/** The sections asked for, or undefined for all (`BATON_BENCH_PERMITS_ONLY=1` is `permits`). */
export function onlySections(): readonly string[] | undefined {
  const only = process.env.BATON_BENCH_ONLY;
  if (only !== undefined && only.trim() !== "") {
    return only
      .split(",")
      .map((s) => s.trim())
      .filter((s) => s !== "");
  }
  return process.env.BATON_BENCH_PERMITS_ONLY === "1" ? ["permits"] : undefined;
}

/** Whether `section` is measured in this run. */
export function selected(section: SectionName): boolean {
  const only = onlySections();
  return only === undefined || only.includes(section);
}
