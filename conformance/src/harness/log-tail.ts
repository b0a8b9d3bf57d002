import { closeSync, fstatSync, openSync, readSync } from "node:fs";

/**
 * The last `lines` lines of a log file, for error messages.
 *
 * Reads at most the final 64 KiB. Never throws: a missing or unreadable file
 * yields a short note instead.
 *
 * @param file - path of the log file
 * @param lines - how many lines to keep, 40 by default
 */
export function logTail(file: string, lines = 40): string {
  let fd: number | undefined;
  try {
    fd = openSync(file, "r");
    const size = fstatSync(fd).size;
    const length = Math.min(size, 64 * 1024);
    const buffer = Buffer.alloc(length);
    readSync(fd, buffer, 0, length, size - length);
    const text = buffer.toString("utf8").trimEnd();
    if (text === "") {
      return `(log ${file} is empty)`;
    }
    return text.split("\n").slice(-lines).join("\n");
  } catch (error) {
    return `(could not read log ${file}: ${(error as Error).message})`;
  } finally {
    if (fd !== undefined) {
      closeSync(fd);
    }
  }
}

/**
 * Formats a log tail as an indented block headed by the file name.
 *
 * @param file - path of the log file
 * @param lines - how many lines to keep
 */
export function formatLogTail(file: string, lines = 40): string {
  const body = logTail(file, lines)
    .split("\n")
    .map((line) => `    ${line}`)
    .join("\n");
  return `  --- last ${lines} lines of ${file} ---\n${body}`;
}
