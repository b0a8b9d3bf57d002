import type { Holder } from "@baton/core";
import type { IWatchResponse } from "etcd3";
import { encodeRevision } from "./etcd-codec.js";
import { rangeEnd } from "./etcd-keys.js";
import { type EtcdKv, endStream } from "./etcd-kv.js";
import { readHolder } from "./read-holder.js";

/**
 * Pushes the holder of the lock under `prefix` now and after every change, until `signal`
 * aborts: one watch stream on the lock's prefix from the revision of the first read (nothing
 * is missed), a re-read after each batch of events, and only changes are pushed. Throws
 * `BackendUnavailableError` when the stream or a read fails; subscribe again to resume.
 */
export async function* watchHolder(
  kv: EtcdKv,
  prefix: Buffer,
  signal: AbortSignal,
): AsyncGenerator<Holder | null> {
  if (signal.aborted) return;
  const first = await readHolder(kv, prefix);
  let dirty = false;
  let failure: Error | undefined;
  let ended = false;
  let wake: (() => void) | undefined;
  const poke = () => wake?.();
  let stream: Awaited<ReturnType<EtcdKv["client"]["watchClient"]["watch"]>> | undefined;
  kv.client.watchClient.watch().then(
    (opened) => {
      if (ended) {
        endStream(opened);
        return;
      }
      stream = opened;
      opened.on("error", (error: Error) => {
        failure ??= kv.fail(error, "the etcd watch stream failed");
        poke();
      });
      opened.on("end", () => {
        failure ??= kv.unavailable("the etcd watch stream ended");
        poke();
      });
      opened.on("data", (response: IWatchResponse) => {
        if (response.canceled) {
          const why = response.cancel_reason || "history compacted";
          failure ??= kv.unavailable(`etcd cancelled the watch: ${why}`);
        } else if (response.events.length > 0) dirty = true;
        poke();
      });
      opened.write({
        create_request: {
          key: prefix,
          range_end: rangeEnd(prefix),
          start_revision: encodeRevision(first.revision + 1n),
        },
      });
    },
    (error: unknown) => {
      failure ??= kv.fail(error, "could not open an etcd watch stream");
      poke();
    },
  );
  signal.addEventListener("abort", poke, { once: true });
  try {
    let last = first.holder;
    yield last;
    while (!signal.aborted) {
      if (failure !== undefined) throw failure;
      if (!dirty) {
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
        wake = undefined;
        continue;
      }
      dirty = false;
      const next = await readHolder(kv, prefix);
      if (!sameHolder(next.holder, last)) {
        last = next.holder;
        yield last;
      }
    }
  } finally {
    ended = true;
    signal.removeEventListener("abort", poke);
    if (stream !== undefined) endStream(stream);
  }
}

/** True when two holders (or nulls) are the same grant with the same value. */
function sameHolder(a: Holder | null, b: Holder | null): boolean {
  if (a === null || b === null) return a === b;
  return a.ownerId === b.ownerId && a.token === b.token && a.value === b.value;
}
