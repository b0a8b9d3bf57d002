import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { currentLock, WithLock } from "@baton/nestjs";
import { Controller, Param, Post } from "@nestjs/common";

/** Where the counters live: a file per counter, shared by every replica on this host. */
const COUNTERS_DIR = process.env.COUNTERS_DIR ?? join(tmpdir(), "baton-nestjs-example");

/**
 * `POST /counters/:name/increment` reads a counter, takes a while, and writes it back plus
 * one: a read-modify-write that loses updates when two requests interleave. Under the lock
 * `counter/<name>`, requests for one counter run one at a time across every replica.
 */
@Controller("counters")
export class CounterController {
  @Post(":name/increment")
  @WithLock((name: string) => `counter/${name}`, { waitMs: 30_000 })
  async increment(@Param("name") name: string): Promise<{ value: number; token: string }> {
    mkdirSync(COUNTERS_DIR, { recursive: true });
    const file = join(COUNTERS_DIR, `${encodeURIComponent(name)}.txt`);
    let value = 0;
    try {
      value = Number(readFileSync(file, "utf8"));
    } catch {
      // A new counter.
    }
    await sleep(20);
    writeFileSync(file, `${value + 1}`);
    return { value: value + 1, token: `${currentLock()?.token}` };
  }
}
