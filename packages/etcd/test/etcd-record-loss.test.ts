import { runRecordLoss } from "@baton/conformance";
import { describeBackend } from "@baton/conformance/harness";
import { parseBackendUrl } from "@baton/core";
import { Etcd3 } from "etcd3";
import { afterAll } from "vitest";
import { recordKey } from "../src/etcd-keys.js";
import { etcdOptionsFromUrl } from "../src/etcd-options.js";
import { EtcdBackend } from "../src/index.js";
import { hostsOf } from "./support/recording-client.js";

describeBackend("etcd", (url) => {
  const admin = new Etcd3({ hosts: hostsOf(url) });
  afterAll(() => admin.close());
  runRecordLoss({
    name: "etcd",
    ttlMs: 2_000,
    url,
    createBackend: () => new EtcdBackend(etcdOptionsFromUrl(parseBackendUrl(url))),
    // The URL sets no prefix: records live at the default (empty) one.
    deleteRecord: async (key) => {
      await admin.delete().key(recordKey("", key));
    },
  });
});
