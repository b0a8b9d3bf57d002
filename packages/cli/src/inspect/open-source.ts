import { type Coordinator, createCoordinator } from "@baton/core";
import { loadAdapter } from "../load-adapter.js";
import type { InspectionSource } from "./inspection-source.js";

/** A coordinator on `backend` for reading and releasing what its store holds. */
export async function openSource(
  backend: string,
): Promise<{ source: InspectionSource; coordinator: Coordinator }> {
  await loadAdapter(backend);
  const coordinator = createCoordinator({ url: backend });
  return { source: coordinator, coordinator };
}
