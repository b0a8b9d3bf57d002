/**
 * The slot of a `@Cron()` tick: the tick's instant in UTC, to the second
 * (`2026-12-01T02:00:00Z`), the name `coordinator.schedule()` gives its slots, so that
 * replicas whose timers fire a little apart agree on it.
 *
 * @nestjs/schedule calls the method without the tick's instant; it fires on the tick's
 * second, or later when the event loop was busy. The slot is therefore the latest second, at
 * or before the call, that the cron expression matches (looked for up to 15 minutes back).
 */

/** What `@Cron()` records (`SCHEDULE_CRON_OPTIONS`), as far as the slot depends on it. */
export interface CronTiming {
  readonly cronTime: unknown;
  readonly timeZone?: string | undefined;
  readonly utcOffset?: number | string | undefined;
}

/** How far back a late tick is looked for. */
const LOOKBACK_S = 15 * 60;

/** The same aliases as the `cron` package @nestjs/schedule runs on. */
const PRESETS: Record<string, string> = {
  "@yearly": "0 0 0 1 1 *",
  "@monthly": "0 0 0 1 * *",
  "@weekly": "0 0 0 * * 0",
  "@daily": "0 0 0 * * *",
  "@hourly": "0 0 * * * *",
  "@minutely": "0 * * * * *",
  "@secondly": "* * * * * *",
  "@weekdays": "0 0 0 * * 1-5",
  "@weekends": "0 0 0 * * 0,6",
};

const MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
const DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/** A parsed field: the values it matches, and whether it restricts anything (not `*`). */
interface Field {
  readonly values: ReadonlySet<number>;
  readonly restricted: boolean;
}

interface Matcher {
  readonly second: Field;
  readonly minute: Field;
  readonly hour: Field;
  readonly dayOfMonth: Field;
  readonly month: Field;
  readonly dayOfWeek: Field;
}

/** The instant's slot name. */
export function slotOf(instant: Date): string {
  return instant.toISOString().replace(/\.\d{3}Z$/, "Z");
}

/** The slot of the tick a `@Cron()` method called at `now` (ms since the epoch) runs. */
export function cronSlot(timing: CronTiming, now: number): string {
  const { cronTime } = timing;
  if (cronTime instanceof Date) return slotOf(cronTime);
  if (typeof cronTime === "object" && cronTime !== null && "toJSDate" in cronTime) {
    return slotOf((cronTime as { toJSDate(): Date }).toJSDate());
  }
  const second = Math.floor(now / 1_000) * 1_000;
  const matcher = typeof cronTime === "string" ? parseCron(cronTime) : undefined;
  if (matcher !== undefined) {
    const fieldsAt = fieldReader(timing);
    for (let back = 0; back <= LOOKBACK_S; back++) {
      const at = second - back * 1_000;
      if (matches(matcher, fieldsAt(at))) return slotOf(new Date(at));
    }
  }
  return slotOf(new Date(second));
}

interface Fields {
  second: number;
  minute: number;
  hour: number;
  day: number;
  month: number;
  weekday: number;
}

function matches(m: Matcher, f: Fields): boolean {
  if (!m.second.values.has(f.second) || !m.minute.values.has(f.minute)) return false;
  if (!m.hour.values.has(f.hour) || !m.month.values.has(f.month)) return false;
  const dom = m.dayOfMonth.values.has(f.day);
  const dow = m.dayOfWeek.values.has(f.weekday);
  // As in cron: when both day fields are restricted, either may match.
  if (m.dayOfMonth.restricted && m.dayOfWeek.restricted) return dom || dow;
  return dom && dow;
}

/** Reads an instant's fields in the timing's zone (or offset, or UTC). */
function fieldReader(timing: CronTiming): (at: number) => Fields {
  if (timing.timeZone !== undefined) {
    const format = new Intl.DateTimeFormat("en-US", {
      timeZone: timing.timeZone,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
      weekday: "short",
    });
    return (at) => {
      const parts: Record<string, string> = {};
      for (const p of format.formatToParts(at)) parts[p.type] = p.value;
      return {
        second: Number(parts.second),
        minute: Number(parts.minute),
        hour: Number(parts.hour),
        day: Number(parts.day),
        month: Number(parts.month),
        weekday: DAYS.indexOf(String(parts.weekday).toLowerCase()),
      };
    };
  }
  const offsetMin = Number(timing.utcOffset ?? 0) || 0;
  return (at) => {
    const d = new Date(at + offsetMin * 60_000);
    return {
      second: d.getUTCSeconds(),
      minute: d.getUTCMinutes(),
      hour: d.getUTCHours(),
      day: d.getUTCDate(),
      month: d.getUTCMonth() + 1,
      weekday: d.getUTCDay(),
    };
  };
}

/** Parses five or six fields; undefined for a form this reader does not know. */
export function parseCron(expression: string): Matcher | undefined {
  const source = PRESETS[expression.trim().toLowerCase()] ?? expression;
  const parts = source.trim().split(/\s+/);
  if (parts.length === 5) parts.unshift("0");
  if (parts.length !== 6) return undefined;
  const [s, mi, h, dom, mo, dow] = parts as [string, string, string, string, string, string];
  const second = parseField(s, 0, 59);
  const minute = parseField(mi, 0, 59);
  const hour = parseField(h, 0, 23);
  const dayOfMonth = parseField(dom, 1, 31);
  const month = parseField(mo, 1, 12, MONTHS, 1);
  const dayOfWeek = parseField(dow, 0, 7, DAYS, 0);
  if (!second || !minute || !hour || !dayOfMonth || !month || !dayOfWeek) return undefined;
  const weekdays = new Set([...dayOfWeek.values].map((d) => d % 7));
  return {
    second,
    minute,
    hour,
    dayOfMonth,
    month,
    dayOfWeek: { values: weekdays, restricted: dayOfWeek.restricted },
  };
}

function parseField(
  text: string,
  min: number,
  max: number,
  names: readonly string[] = [],
  firstName = 0,
): Field | undefined {
  const values = new Set<number>();
  const value = (token: string): number | undefined => {
    const named = names.indexOf(token.toLowerCase().slice(0, 3));
    if (named >= 0 && /^[a-z]+$/i.test(token)) return named + firstName;
    if (!/^\d+$/.test(token)) return undefined;
    const n = Number(token);
    return n >= min && n <= max ? n : undefined;
  };
  for (const item of text.split(",")) {
    const [range = "", stepText] = item.split("/");
    const step = stepText === undefined ? 1 : Number(stepText);
    if (!Number.isInteger(step) || step < 1) return undefined;
    let from: number | undefined;
    let to: number | undefined;
    if (range === "*" || range === "?") {
      from = min;
      to = max;
    } else if (range.includes("-")) {
      const [a = "", b = ""] = range.split("-");
      from = value(a);
      to = value(b);
    } else {
      from = value(range);
      to = stepText === undefined ? from : max;
    }
    if (from === undefined || to === undefined || from > to) return undefined;
    for (let v = from; v <= to; v += step) values.add(v);
  }
  return { values, restricted: text !== "*" && text !== "?" };
}
