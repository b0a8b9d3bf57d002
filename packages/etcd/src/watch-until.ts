import { type Etcd3, FilterType, type IWatchResponse } from "etcd3";
import { compactedAt, encodeRevision } from "./etcd-codec.js";
import { type EtcdKv, endStream } from "./etcd-kv.js";

/** What {@link watchUntil} watches. */
export interface WatchRange {
  /** The key, or the start of the range. */
  readonly key: Buffer;
  /** The end of the range (exclusive); absent: the one key. */
  readonly rangeEnd?: Buffer;
  /** Leave out put events (only deletes are wanted). */
  readonly deletesOnly?: boolean;
  /** Leave out delete events (only puts are wanted). */
  readonly putsOnly?: boolean;
}

/**
 * Watches `range` from revision `fromRevision` (so nothing after the caller's read is missed)
 * on one watch stream of its own, handing every response to `isDone` until it answers true
 * (resolves `"done"`), or until etcd cancels the watch because that history was compacted
 * (resolves `"compacted"`: the caller reads again). Rejects with `signal.reason` on abort,
 * `BackendUnavailableError` when the stream fails, ends or is cancelled for another reason.
 */
export function watchUntil(
  kv: EtcdKv,
  range: WatchRange,
  fromRevision: bigint,
  signal: AbortSignal,
  isDone: (response: IWatchResponse) => boolean,
): Promise<"done" | "compacted"> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    let done = false;
    let stream: Awaited<ReturnType<Etcd3["watchClient"]["watch"]>> | undefined;
    const finish = (settle: () => void) => {
      if (done) return;
      done = true;
      signal.removeEventListener("abort", onAbort);
      if (stream !== undefined) endStream(stream);
      settle();
    };
    const onAbort = () => finish(() => reject(signal.reason));
    signal.addEventListener("abort", onAbort, { once: true });
    kv.client.watchClient.watch().then(
      (opened) => {
        if (done) {
          endStream(opened);
          return;
        }
        stream = opened;
        opened.on("error", (error: Error) =>
          finish(() => reject(kv.fail(error, "the etcd watch stream failed"))),
        );
        opened.on("end", () => finish(() => reject(kv.unavailable("the etcd watch stream ended"))));
        opened.on("data", (response: IWatchResponse) => {
          if (done) return;
          if (response.canceled) {
            if (compactedAt(response) > 0n) finish(() => resolve("compacted"));
            else {
              const why = response.cancel_reason || "no reason given";
              finish(() => reject(kv.unavailable(`etcd cancelled the watch: ${why}`)));
            }
            return;
          }
          if (isDone(response)) finish(() => resolve("done"));
        });
        opened.write({
          create_request: {
            key: range.key,
            ...(range.rangeEnd === undefined ? {} : { range_end: range.rangeEnd }),
            start_revision: encodeRevision(fromRevision),
            ...(range.deletesOnly === true ? { filters: [FilterType.Noput] } : {}),
            ...(range.putsOnly === true ? { filters: [FilterType.Nodelete] } : {}),
          },
        });
      },
      (error: unknown) =>
        finish(() => reject(kv.fail(error, "could not open an etcd watch stream"))),
    );
  });
}
