import { Etcd3, type ITxnRequest } from "etcd3";

/** What a {@link recordingClient} saw. */
export interface Recording {
  /** Unary KV calls (txn and range), in order. */
  readonly kvCalls: string[];
  /** Keys of every watch created, in order. */
  readonly watchedKeys: string[];
  /** Forgets everything seen so far. */
  reset(): void;
}

/** A real etcd3 client whose KV calls and watch creations are recorded. */
export function recordingClient(hosts: string[]): { client: Etcd3; recording: Recording } {
  const client = new Etcd3({ hosts });
  const kvCalls: string[] = [];
  const watchedKeys: string[] = [];
  const kv = client.kv;
  const txn = kv.txn.bind(kv);
  const range = kv.range.bind(kv);
  kv.txn = (request: ITxnRequest, options) => {
    kvCalls.push("txn");
    return txn(request, options);
  };
  kv.range = (request, options) => {
    kvCalls.push("range");
    return range(request, options);
  };
  const watchClient = client.watchClient;
  const watch = watchClient.watch.bind(watchClient);
  watchClient.watch = async (options) => {
    const stream = await watch(options);
    const write = stream.write.bind(stream);
    stream.write = (item) => {
      const key = item.create_request?.key;
      if (key !== undefined) watchedKeys.push(key.toString());
      write(item);
    };
    return stream;
  };
  return {
    client,
    recording: {
      kvCalls,
      watchedKeys,
      reset() {
        kvCalls.length = 0;
        watchedKeys.length = 0;
      },
    },
  };
}

/** `host:port` list of an `etcd://` URL. */
export function hostsOf(url: string): string[] {
  return url.replace(/^etcd:\/\//, "").split(",");
}

/** A real etcd3 client whose KV transactions fail, without being sent, while `failing` is set. */
export function flakyClient(hosts: string[]): { client: Etcd3; failing: boolean } {
  const client = new Etcd3({ hosts });
  const flaky = { client, failing: false };
  const kv = client.kv;
  const txn = kv.txn.bind(kv);
  kv.txn = (request: ITxnRequest, options) => {
    if (flaky.failing)
      return Promise.reject(new Error("14 UNAVAILABLE: no connection established"));
    return txn(request, options);
  };
  return flaky;
}
