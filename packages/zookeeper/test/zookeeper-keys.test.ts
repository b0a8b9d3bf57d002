import { describe, expect, it } from "vitest";
import {
  childPath,
  encodeLockName,
  lockDir,
  lockNodePrefix,
  lockRoot,
  parseLockNode,
  queueOrder,
  recordPath,
  recordRoot,
  splitPath,
} from "../src/zookeeper-keys.js";

const ATTEMPT = "33036240-0ffe-4c19-b375-91900f598777";
/** A node name as the server created it (it appends a `%010d` sequence). */
const CREATED = `_c_${ATTEMPT}-lock-0000000002`;

describe("zookeeper node layout", () => {
  it("puts a lock's parent under <chroot>/<prefix>, its name encoded as one node", () => {
    expect(lockRoot("", "baton")).toBe("/baton");
    expect(lockRoot("/apps/billing", "locks")).toBe("/apps/billing/locks");
    expect(lockDir("/baton", "jobs/nightly invoices")).toBe("/baton/jobs%2Fnightly%20invoices");
    expect(encodeLockName(".")).toBe("%2E");
    expect(encodeLockName("..")).toBe("%2E%2E");
  });

  it("puts records beside the locks root, <chroot>/<prefix>-records, each key encoded as one node", () => {
    expect(recordRoot(lockRoot("", "baton"))).toBe("/baton-records");
    expect(recordRoot(lockRoot("/apps/billing", "locks"))).toBe("/apps/billing/locks-records");
    expect(recordPath("/baton-records", "nightly/slot/2026-12-01T02:00:00Z")).toBe(
      "/baton-records/nightly%2Fslot%2F2026-12-01T02%3A00%3A00Z",
    );
    expect(recordPath("/baton-records", "..")).toBe("/baton-records/%2E%2E");
  });

  it("names nodes like Curator's protected mode: _c_<attempt id>-lock-<sequence>", () => {
    expect(lockNodePrefix("/baton/invoices", ATTEMPT)).toBe(`/baton/invoices/_c_${ATTEMPT}-lock-`);
    expect(parseLockNode(CREATED)).toEqual({ name: CREATED, attemptId: ATTEMPT, seq: 2 });
    const path = childPath("/baton/invoices", CREATED);
    expect(splitPath(path)).toEqual({ dir: "/baton/invoices", name: CREATED });
  });

  it("reads a sequence the server printed negative after its counter wrapped", () => {
    expect(parseLockNode(`_c_${ATTEMPT}-lock--2147483648`)?.seq).toBe(-2147483648);
  });

  it("orders Baton's nodes by sequence and leaves out nodes of other layouts", () => {
    const other = "e1e4c5c9-1d2b-4a7e-9b0c-3f6d2a1b8c7d";
    const children = [
      `_c_${other}-lock-0000000011`,
      "3f5c2a9e8b7d4c1a0e9f8d7c6b5a4e3d__lock__0000000001",
      CREATED,
      "not-a-lock",
    ];
    expect(queueOrder(children).map((n) => n.attemptId)).toEqual([ATTEMPT, other]);
  });
});
