import type { Coordinator } from "@baton/core";

export type { Inspection, InspectionHolder, InspectionKind } from "@baton/core";

/** The part of a coordinator that `ls`, `top`, `release` and `dashboard` use. */
export type InspectionSource = Pick<Coordinator, "list" | "forceRelease">;
