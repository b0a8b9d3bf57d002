import { hasDelete } from "./etcd-codec.js";
import type { EtcdKv } from "./etcd-kv.js";
import { watchUntil } from "./watch-until.js";
/**
 * Resolves once `key` is deleted at or after revision `fromRevision` (so a delete between our
 * read and the watch is not missed), or when etcd cancels the watch because that history was
 * compacted (the caller re-reads). One watch stream of its own, on one key: no herd.
 * Rejects with `signal.reason` on abort, `BackendUnavailableError` when the stream fails.
 */
export async function waitForDelete(
  kv: EtcdKv,
  key: Buffer,
  fromRevision: bigint,
  signal: AbortSignal,
): Promise<void> {
  await watchUntil(kv, { key, deletesOnly: true }, fromRevision, signal, hasDelete);
}
