import "reflect-metadata";
import type { Coordinator, LockContext, RunContext, TermContext } from "@baton/core";
import {
  Controller,
  type DynamicModule,
  type INestApplication,
  type INestApplicationContext,
  Inject,
  Injectable,
  Module,
  Param,
  Post,
} from "@nestjs/common";
import { NestFactory } from "@nestjs/core";
import { Cron, ScheduleModule } from "@nestjs/schedule";
import {
  BatonModule,
  type BatonModuleOptions,
  currentLock,
  currentRun,
  InjectCoordinator,
  Leader,
  RunOnce,
  WithLock,
} from "../src/index.js";

/** What the decorated methods of one app saw, for the tests to read. */
export class Journal {
  readonly locked: { key: string; token: bigint; enteredAt: number; leftAt: number }[] = [];
  readonly runs: { slot: string; token: bigint; attempt: number }[] = [];
  readonly terms: { term: bigint; startedAt: number; endedAt?: number }[] = [];
  leaderError: Error | undefined;
}

export const JOURNAL = "JOURNAL";
export const HOLD_MS = "HOLD_MS";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

@Injectable()
export class Accounts {
  constructor(
    @Inject(JOURNAL) private readonly journal: Journal,
    @Inject(HOLD_MS) private readonly holdMs: number,
    @InjectCoordinator() readonly coordinator: Coordinator,
  ) {}

  @WithLock((key: string) => `account/${key}`, { waitMs: 20_000 })
  async deposit(key: string): Promise<LockContext | undefined> {
    const enteredAt = performance.now();
    const context = currentLock();
    await sleep(this.holdMs);
    this.journal.locked.push({
      key,
      token: context?.token ?? -1n,
      enteredAt,
      leftAt: performance.now(),
    });
    return context;
  }
}

@Injectable()
export class Reports {
  constructor(@Inject(JOURNAL) private readonly journal: Journal) {}

  @Cron("* * * * * *")
  @RunOnce("report", { atMostMs: 10_000 })
  async report(): Promise<string> {
    const run = currentRun() as RunContext;
    this.journal.runs.push({ slot: run.slot, token: run.token, attempt: run.attempt });
    return run.slot;
  }
}

@Injectable()
export class Worker {
  constructor(@Inject(JOURNAL) private readonly journal: Journal) {}

  @Leader("worker", { value: "worker" })
  async work({ signal, term }: TermContext): Promise<void> {
    const entry: { term: bigint; startedAt: number; endedAt?: number } = {
      term,
      startedAt: performance.now(),
    };
    this.journal.terms.push(entry);
    await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve()));
    entry.endedAt = performance.now();
  }
}

@Controller("accounts")
export class AccountsController {
  constructor(
    @Inject(JOURNAL) private readonly journal: Journal,
    @Inject(HOLD_MS) private readonly holdMs: number,
  ) {}

  @Post(":key/deposit")
  @WithLock((key: string) => `http/${key}`, { waitMs: 20_000 })
  async deposit(@Param("key") key: string): Promise<{ token: string }> {
    const enteredAt = performance.now();
    const token = currentLock()?.token ?? -1n;
    await sleep(this.holdMs);
    this.journal.locked.push({ key, token, enteredAt, leftAt: performance.now() });
    return { token: `${token}` };
  }
}

/** An app module with the providers `with` names and Baton configured by `baton`. */
export function appModule(
  baton: DynamicModule,
  journal: Journal,
  withProviders: readonly ("accounts" | "reports" | "worker")[],
  holdMs = 50,
): DynamicModule {
  @Module({})
  class AppModule {}
  return {
    module: AppModule,
    imports: [baton, ...(withProviders.includes("reports") ? [ScheduleModule.forRoot()] : [])],
    providers: [
      { provide: JOURNAL, useValue: journal },
      { provide: HOLD_MS, useValue: holdMs },
      ...(withProviders.includes("accounts") ? [Accounts] : []),
      ...(withProviders.includes("reports") ? [Reports] : []),
      ...(withProviders.includes("worker") ? [Worker] : []),
    ],
  };
}

/** Starts an application context over `options`. */
export async function startContext(
  options: BatonModuleOptions,
  journal: Journal,
  withProviders: readonly ("accounts" | "reports" | "worker")[],
): Promise<INestApplicationContext> {
  const app = await NestFactory.createApplicationContext(
    appModule(BatonModule.forRoot(options), journal, withProviders),
    { logger: ["error", "warn"] },
  );
  await app.init();
  return app;
}

/** Starts an HTTP application (platform-express) with the accounts controller. */
export async function startHttp(
  options: BatonModuleOptions,
  journal: Journal,
): Promise<INestApplication> {
  const module = appModule(BatonModule.forRoot(options), journal, ["accounts"]);
  const app = await NestFactory.create(
    { ...module, controllers: [AccountsController] },
    { logger: ["error", "warn"] },
  );
  await app.listen(0, "127.0.0.1");
  return app;
}
