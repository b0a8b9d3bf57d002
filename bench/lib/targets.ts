import { type BackendResult, floorRow, sectionOf } from "./results.js";

/** One measured target (see bench/README.md), checked honestly (met: false when missed). */
export interface TargetCheck {
  readonly backend: string;
  readonly target: string;
  readonly measured: string;
  /** undefined: not measured in this run. */
  readonly met: boolean | undefined;
}

/** Uncontended coordinator p50 over the floor's, at most. */
export function uncontendedLimit(backend: string): number {
  return backend === "postgres" ? 1.25 : 1.15;
}

/** Handoff p50 at most this many of the floor's single operation (acquire + release). */
export const HANDOFF_LIMIT = 2;
/** Renewal requests per interval per session, at most. */
export const RENEWAL_LIMIT = 1;
/** Bytes of memory per held lock, under. */
export const MEMORY_LIMIT = 2_048;

const ms = (n: number) => `${n.toFixed(3)} ms`;

/** Checks one backend's results against the bench's targets. */
export function checkTargets(r: BackendResult): TargetCheck[] {
  const out: TargetCheck[] = [];
  const check = (target: string, measured: string, met: boolean | undefined) =>
    out.push({ backend: r.backend, target, measured, met });
  const unc = sectionOf(r, "uncontended");
  const floor = unc ? floorRow(unc) : undefined;
  const coord = unc?.rows.find((x) => x.role === "coordinator");
  const session = unc?.rows.find((x) => x.role === "session");
  const limit = uncontendedLimit(r.backend);
  if (floor && coord) {
    const ratio = coord.p50 / floor.p50;
    const s = session ? `; session ${(session.p50 / floor.p50).toFixed(2)}x` : "";
    check(
      `uncontended coordinator p50 <= ${limit}x floor`,
      `${ratio.toFixed(2)}x (${ms(coord.p50)} vs ${ms(floor.p50)}${s})`,
      ratio <= limit,
    );
    const peers = unc?.rows.filter((x) => x.role === "peer") ?? [];
    for (const p of peers) {
      check(
        `uncontended coordinator faster than ${p.variant} (p50)`,
        `${ms(coord.p50)} vs ${ms(p.p50)}`,
        coord.p50 < p.p50,
      );
    }
    if (peers.length === 0) check("faster than each peer", "no peer library measured", undefined);
  } else {
    check(`uncontended coordinator p50 <= ${limit}x floor`, "not measured", undefined);
  }
  const handoff = sectionOf(r, "handoff");
  const baton = handoff?.rows.find((x) => x.role === "coordinator");
  if (handoff?.floor && baton) {
    const ratio = baton.p50 / handoff.floor.p50;
    check(
      `handoff p50 <= ${HANDOFF_LIMIT}x floor's acquire+release p50`,
      `${ratio.toFixed(2)}x (${ms(baton.p50)} vs ${ms(handoff.floor.p50)})`,
      ratio <= HANDOFF_LIMIT,
    );
  } else {
    check(
      `handoff p50 <= ${HANDOFF_LIMIT}x floor's acquire+release p50`,
      "not measured",
      undefined,
    );
  }
  const held = r.held;
  const renewal = held?.renewals[0];
  if (held && renewal) {
    // Core renews once per interval; the count per renewal is free of the window's rounding.
    check(
      `renewal requests per interval per session <= ${RENEWAL_LIMIT} (${held.locks} locks held)`,
      `${renewal.perRenewal.toFixed(2)} per renewal, ${renewal.perInterval.toFixed(2)} per interval (${renewal.source})`,
      renewal.perRenewal <= RENEWAL_LIMIT,
    );
    const perLock = held.gcExposed ? held.heapBytesPerLock : held.rssBytesPerLock;
    check(
      `memory per held lock < ${MEMORY_LIMIT} B`,
      `${perLock.toFixed(0)} B (${held.gcExposed ? "heap+external after GC" : "RSS; no --expose-gc"})`,
      perLock < MEMORY_LIMIT,
    );
  } else {
    check(
      `renewal requests per interval per session <= ${RENEWAL_LIMIT}`,
      "not measured",
      undefined,
    );
    check(`memory per held lock < ${MEMORY_LIMIT} B`, "not measured", undefined);
  }
  return out;
}
