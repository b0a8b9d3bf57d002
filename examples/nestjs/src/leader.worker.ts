import { setTimeout as sleep } from "node:timers/promises";
import type { TermContext } from "@baton/core";
import { Leader } from "@baton/nestjs";
import { Injectable } from "@nestjs/common";
import { record } from "./events.js";

/**
 * Work only one replica may do at a time (here: a loop that would, say, drain a queue in
 * order): it runs on the elected leader, until its term ends.
 */
@Injectable()
export class LeaderWorker {
  @Leader("example-worker")
  async work({ signal, term }: TermContext): Promise<void> {
    record("leader-started", { term: `${term}` });
    while (!signal.aborted) {
      await sleep(200, undefined, { signal }).catch(() => undefined);
    }
    record("leader-stopped", { term: `${term}` });
  }
}
