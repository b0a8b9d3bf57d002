import { readFileSync } from "node:fs";

/** Numeric IDs of a local user account. */
export interface SystemUser {
  /** Login name. */
  readonly name: string;
  /** User ID. */
  readonly uid: number;
  /** Primary group ID. */
  readonly gid: number;
}

/**
 * Looks a user up in `/etc/passwd`.
 *
 * @returns the user, or `undefined` when there is no such entry
 */
export function lookupUser(name: string): SystemUser | undefined {
  let passwd: string;
  try {
    passwd = readFileSync("/etc/passwd", "utf8");
  } catch {
    return undefined;
  }
  for (const line of passwd.split("\n")) {
    const [user, , uid, gid] = line.split(":");
    if (user === name && uid !== undefined && gid !== undefined) {
      return { name, uid: Number(uid), gid: Number(gid) };
    }
  }
  return undefined;
}
