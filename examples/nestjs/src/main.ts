import "reflect-metadata";
import { NestFactory } from "@nestjs/core";
import { AppModule } from "./app.module.js";
import { record } from "./events.js";

const app = await NestFactory.create(AppModule);
// SIGTERM and SIGINT close the application: the leader steps down first, so another replica
// takes over at once, and the coordinator releases its locks.
app.enableShutdownHooks();
await app.listen(Number(process.env.PORT ?? 3000), process.env.HOST ?? "127.0.0.1");
record("ready", { url: await app.getUrl() });
