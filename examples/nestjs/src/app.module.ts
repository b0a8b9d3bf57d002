import { BatonModule } from "@baton/nestjs";
import { Module } from "@nestjs/common";
import { ScheduleModule } from "@nestjs/schedule";
import { CounterController } from "./counter.controller.js";
import { LeaderWorker } from "./leader.worker.js";
import { ReportJob } from "./report.job.js";

@Module({
  imports: [
    ScheduleModule.forRoot(),
    BatonModule.forRootAsync({
      useFactory: () => ({
        // e.g. redis://localhost:6379, postgres://..., etcd://localhost:2379
        url: process.env.BATON_URL ?? "memory://",
        ttlMs: Number(process.env.BATON_TTL_MS ?? 15_000),
      }),
    }),
  ],
  controllers: [CounterController],
  providers: [ReportJob, LeaderWorker],
})
export class AppModule {}
