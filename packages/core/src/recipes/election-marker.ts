import { ConfigError, CoordinatorClosedError } from "../contract/errors.js";
import type { RecipeHost } from "../kernel/index.js";

/**
 * An election's lock is a plain lock in the store. So that `coordinator.list()` and
 * `inspect()` can show it as an election, a campaign writes a marker once, when it starts,
 * on a backend that keeps durable records: the record `<name>` + `"\u0001election"`. Lock
 * names cannot contain control characters (see `checkName`), so no name of a lock, job or
 * slot can produce that key, and the key sorts and filters by prefix with its name. The
 * marker is never deleted (one small record per election name); a name once used by an
 * election shows as one from then on. Without records an election shows as a lock.
 */
export const ELECTION_MARKER_SUFFIX = "\u0001election";

/** The marker's value (a format version, so a later format can tell old markers apart). */
const ELECTION_MARKER_VALUE = JSON.stringify({ v: 1, kind: "election" });

/** The record key that marks `name` as an election's lock. */
export function electionMarkerKey(name: string): string {
  return `${name}${ELECTION_MARKER_SUFFIX}`;
}

/** The election name a record key marks, or `undefined` for any other record key. */
export function electionOfMarker(key: string): string | undefined {
  return key.endsWith(ELECTION_MARKER_SUFFIX)
    ? key.slice(0, key.length - ELECTION_MARKER_SUFFIX.length)
    : undefined;
}

/**
 * Writes the marker of election `name` in the background, once per campaign, off the
 * acquire path: nothing when the backend keeps no records; a failure is reported (a
 * `backgroundError`) and costs only the marker.
 */
export function markElection(host: RecipeHost, name: string): void {
  if (host.knownGuarantees()?.records === false) return;
  const key = electionMarkerKey(name);
  host
    .records(undefined)
    // Written only when there is none: a marker already there stays as it is.
    .then((records) => records.write(key, ELECTION_MARKER_VALUE, null))
    .catch((error: unknown) => {
      if (error instanceof ConfigError || error instanceof CoordinatorClosedError) return;
      host.report(error, `marking "${name}" as an election for list() and inspect()`);
    });
}
