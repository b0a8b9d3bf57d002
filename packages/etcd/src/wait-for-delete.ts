import { type Etcd3, FilterType, type IWatchResponse } from "etcd3";
import { compactedAt, encodeRevision, hasDelete } from "./etcd-codec.js";
import { type EtcdKv, endStream } from "./etcd-kv.js";

/**
 * Resolves once `key` is deleted at or after revision `fromRevision` (so a delete between our
 * read and the watch is not missed), or when etcd cancels the watch because that history was
 * compacted (the caller re-reads). One watch stream of its own, on one key: no herd.
 * Rejects with `signal.reason` on abort, `BackendUnavailableError` when the stream fails.
 */
export function waitForDelete(
  kv: EtcdKv,
  key: Buffer,
  fromRevision: bigint,
  signal: AbortSignal,
): Promise<void> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<void>((resolve, reject) => {
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
          if (response.canceled) {
            if (compactedAt(response) > 0n) finish(resolve);
            else {
              const why = response.cancel_reason || "no reason given";
              finish(() => reject(kv.unavailable(`etcd cancelled the watch: ${why}`)));
            }
            return;
          }
          if (hasDelete(response)) finish(resolve);
        });
        opened.write({
          create_request: {
            key,
            start_revision: encodeRevision(fromRevision),
            filters: [FilterType.Noput],
          },
        });
      },
      (error: unknown) =>
        finish(() => reject(kv.fail(error, "could not open an etcd watch stream"))),
    );
  });
}
