// The named fields of an object, as a new object: what a test compares when two views of one thing (our
// reader's and another tool's) share some fields and not others.

/** `object` cut down to `keys` (a missing field is undefined, which toEqual reads as absent). */
export function pickFields<K extends string>(object: object, keys: readonly K[]): Record<K, unknown> {
  const fields = object as Record<string, unknown>;
  return Object.fromEntries(keys.map((key) => [key, fields[key]])) as Record<K, unknown>;
}
