import { describe, expect, it } from "vitest";
import { decodeLeaseGrant, decodeReap } from "../src/postgres-codec.js";

// Rows as pg hands them back for the row-lease statements (captured from PostgreSQL 15):
// bigint tokens as text, booleans and int4/float8 as JavaScript values.
describe("postgres row-lease codec", () => {
  it("reads a grant, a held lock and an expired session from the acquire row", () => {
    expect(decodeLeaseGrant([{ token: "1796137458314531", live: true }])).toEqual({
      token: 1796137458314531n,
      live: true,
    });
    expect(decodeLeaseGrant([{ token: null, live: true }])).toEqual({ token: null, live: true });
    expect(decodeLeaseGrant([{ token: null, live: false }])).toEqual({ token: null, live: false });
    expect(decodeLeaseGrant([])).toEqual({ token: null, live: false });
  });

  it("reads how many expired sessions a reap deleted, the live holder's time left and its token", () => {
    expect(decodeReap([{ reaped: 1, remaining_ms: null, token: null }])).toEqual({
      reaped: 1,
      remainingMs: null,
      holderToken: null,
    });
    expect(decodeReap([{ reaped: 0, remaining_ms: 997, token: "42" }])).toEqual({
      reaped: 0,
      remainingMs: 997,
      holderToken: "42",
    });
    // A holder whose expiry passes between the statement's two reads of the clock.
    expect(decodeReap([{ reaped: 0, remaining_ms: -1, token: "42" }])).toEqual({
      reaped: 0,
      remainingMs: 0,
      holderToken: "42",
    });
  });
});
