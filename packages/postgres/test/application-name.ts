/** `url` with `application_name` set, so the connections it opens can be found and counted. */
export function named(url: string, name: string): string {
  const u = new URL(url);
  u.searchParams.set("application_name", name);
  return u.toString();
}
