import { describe, expect, it } from "vitest";
import { cronSlot } from "../src/cron-slot.js";

const at = (iso: string) => Date.parse(iso);

describe("the slot of a @Cron() tick", () => {
  it("is the tick's second in UTC, as coordinator.schedule() names slots", () => {
    expect(cronSlot({ cronTime: "* * * * * *" }, at("2026-12-01T02:00:07.004Z"))).toBe(
      "2026-12-01T02:00:07Z",
    );
    expect(cronSlot({ cronTime: "0 2 * * *" }, at("2026-12-01T02:00:00.350Z"))).toBe(
      "2026-12-01T02:00:00Z",
    );
  });

  it("is the tick's, not the call's, when the call comes seconds late", () => {
    expect(cronSlot({ cronTime: "*/10 * * * * *" }, at("2026-12-01T02:00:13.2Z"))).toBe(
      "2026-12-01T02:00:10Z",
    );
    expect(cronSlot({ cronTime: "@hourly" }, at("2026-12-01T05:02:01Z"))).toBe(
      "2026-12-01T05:00:00Z",
    );
    expect(cronSlot({ cronTime: "0 30 9 * * mon-fri" }, at("2026-12-04T09:30:02Z"))).toBe(
      "2026-12-04T09:30:00Z",
    );
  });

  it("reads the expression in the cron's time zone or UTC offset", () => {
    // 09:00 in New York (EST, UTC-5) is 14:00 UTC.
    const timing = { cronTime: "0 0 9 * * *", timeZone: "America/New_York" };
    expect(cronSlot(timing, at("2026-12-01T14:00:03Z"))).toBe("2026-12-01T14:00:00Z");
    expect(cronSlot({ cronTime: "0 0 9 * * *", utcOffset: 60 }, at("2026-12-01T08:00:02Z"))).toBe(
      "2026-12-01T08:00:00Z",
    );
  });

  it("matches either day field when both are set, as cron does", () => {
    // The 1st of the month, or a Friday: 2026-12-04 is a Friday.
    const timing = { cronTime: "0 0 0 1 * fri" };
    expect(cronSlot(timing, at("2026-12-04T00:00:01Z"))).toBe("2026-12-04T00:00:00Z");
  });

  it("is the date of a one-off cron given a Date", () => {
    const when = new Date("2026-12-24T18:00:00Z");
    expect(cronSlot({ cronTime: when }, at("2026-12-24T18:00:01Z"))).toBe("2026-12-24T18:00:00Z");
  });

  it("is the call's second for a form it cannot read", () => {
    expect(cronSlot({ cronTime: "0 0 L * *" }, at("2026-12-31T00:00:00.5Z"))).toBe(
      "2026-12-31T00:00:00Z",
    );
  });
});
