import { describe, expect, it } from "vitest";
import {
  childPath,
  encodeLockName,
  lockDir,
  lockNodePrefix,
  lockRoot,
  parseLockNode,
  parsePermitNode,
  permitDir,
  permitNodePrefix,
  permitQueueOrder,
  permitRoot,
  queueOrder,
  recordPath,
  recordRoot,
  sequenceText,
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
    expect(parseLockNode(CREATED)).toEqual({
      name: CREATED,
      layout: "protected",
      attemptId: ATTEMPT,
      seq: 2,
    });
    const path = childPath("/baton/invoices", CREATED);
    expect(splitPath(path)).toEqual({ dir: "/baton/invoices", name: CREATED });
  });

  it("reads a sequence the server printed negative after its counter wrapped", () => {
    expect(parseLockNode(`_c_${ATTEMPT}-lock--2147483648`)?.seq).toBe(-2147483648);
  });

  it("reads the names Curator 5.4 and kazoo 2.8 gave their lock nodes on a ZooKeeper 3.8 server", () => {
    // InterProcessMutex (protected mode, like Baton's) and LeaderSelector, which uses it.
    const mutex = "_c_45ec30b9-2871-4839-927e-6ec2280d13f9-lock-0000000000";
    expect(parseLockNode(mutex)).toEqual({
      name: mutex,
      layout: "protected",
      attemptId: "45ec30b9-2871-4839-927e-6ec2280d13f9",
      seq: 0,
    });
    // kazoo's Lock (and so Election) and ReadLock.
    const lock = "a5db227a99fb4a97b20ff70509d38f90__lock__0000000000";
    expect(parseLockNode(lock)).toEqual({ name: lock, layout: "kazoo", seq: 0 });
    const read = "f7e44a7c05694e31b547d5a536ea7938__rlock__0000000007";
    expect(parseLockNode(read)).toEqual({ name: read, layout: "kazoo", seq: 7 });
  });

  it("reads Curator's lock nodes without protection: lock-<sequence> and <anything>-lock-<sequence>", () => {
    expect(parseLockNode("lock-0000000004")).toEqual({
      name: "lock-0000000004",
      layout: "curator",
      seq: 4,
    });
    expect(parseLockNode("billing-worker-lock-0000000012")).toEqual({
      name: "billing-worker-lock-0000000012",
      layout: "curator",
      seq: 12,
    });
    expect(parseLockNode("lock--000000005")?.seq).toBe(-5);
  });

  it("leaves out nodes no lock recipe made: LeaderLatch's, kazoo-like names without the UUID, bad sequences", () => {
    for (const name of [
      "_c_08691be0-779b-4cd0-9a03-08c07a30523d-latch-0000000000",
      "worker__lock__0000000001",
      "a5db227a99fb4a97b20ff70509d38f90__lock__12",
      "lock-00000000012",
      "lock-",
      "_c_45ec30b9-2871-4839-927e-6ec2280d13f9-__WRIT__0000000000",
      "not-a-lock",
    ]) {
      expect(parseLockNode(name), name).toBeUndefined();
    }
  });

  it("queues every contender, Baton's, Curator's and kazoo's, by the sequence the parent gave it", () => {
    const other = "e1e4c5c9-1d2b-4a7e-9b0c-3f6d2a1b8c7d";
    const children = [
      `_c_${other}-lock-0000000011`,
      "3f5c2a9e8b7d4c1a0e9f8d7c6b5a4e3d__lock__0000000001",
      "lock-0000000009",
      CREATED,
      "0f5c2a9e8b7d4c1a0e9f8d7c6b5a4e3d__rlock__0000000005",
      "_c_08691be0-779b-4cd0-9a03-08c07a30523d-latch-0000000003",
      "not-a-lock",
    ];
    expect(queueOrder(children).map((n) => [n.layout, n.seq, n.attemptId])).toEqual([
      ["kazoo", 1, undefined],
      ["protected", 2, ATTEMPT],
      ["kazoo", 5, undefined],
      ["curator", 9, undefined],
      ["protected", 11, other],
    ]);
  });

  it("puts permit keys beside the locks root, <chroot>/<prefix>-permits, apart from locks", () => {
    expect(permitRoot(lockRoot("", "baton"))).toBe("/baton-permits");
    expect(permitDir("/baton-permits", "exports/daily")).toBe("/baton-permits/exports%2Fdaily");
    expect(lockDir("/baton", "exports/daily")).toBe("/baton/exports%2Fdaily");
  });

  it("names permit entries like Curator's leases and read-write lock nodes, with their permits", () => {
    const dir = "/baton-permits/exports";
    expect(
      permitNodePrefix(dir, { attemptId: ATTEMPT, mode: "permit", permits: 3, limit: 5 }),
    ).toBe(`${dir}/_c_${ATTEMPT}-lease-3-of-5-`);
    const rw = { attemptId: ATTEMPT, permits: 1, limit: 2_147_483_647 };
    expect(permitNodePrefix(dir, { ...rw, mode: "read" })).toBe(`${dir}/_c_${ATTEMPT}-__READ__`);
    expect(permitNodePrefix(dir, { ...rw, mode: "write" })).toBe(`${dir}/_c_${ATTEMPT}-__WRIT__`);
    expect(permitNodePrefix(dir, { ...rw, mode: "read", downgradedFrom: "0000000004" })).toBe(
      `${dir}/_c_${ATTEMPT}-__READ__at-0000000004-`,
    );
    expect(parsePermitNode(`_c_${ATTEMPT}-lease-3-of-5-0000000007`)).toEqual({
      name: `_c_${ATTEMPT}-lease-3-of-5-0000000007`,
      attemptId: ATTEMPT,
      mode: "permit",
      permits: 3,
      limit: 5,
      seq: 7,
      order: 7,
    });
    expect(parsePermitNode(`_c_${ATTEMPT}-__WRIT__0000000004`)).toMatchObject({
      mode: "write",
      permits: 2_147_483_647,
      limit: 2_147_483_647,
      order: 4,
    });
    expect(sequenceText(`_c_${ATTEMPT}-__WRIT__-0000000004`)).toBe("-0000000004");
    expect(parsePermitNode(CREATED)).toBeUndefined();
    expect(parsePermitNode(`_c_${ATTEMPT}-lease-0-of-5-0000000007`)).toBeUndefined();
  });

  it("queues a downgraded write's read in the write's place, ahead of those behind the write", () => {
    const children = [
      `_c_${ATTEMPT}-__READ__0000000005`,
      `_c_${ATTEMPT}-__WRIT__0000000006`,
      `_c_${ATTEMPT}-__READ__at-0000000004-0000000007`,
      "not-an-entry",
    ];
    expect(permitQueueOrder(children).map((n) => [n.mode, n.seq, n.order])).toEqual([
      ["read", 7, 4],
      ["read", 5, 5],
      ["write", 6, 6],
    ]);
  });
});
