// Every order of a list, for tests that prove a result does not depend on declaration order. Kept here,
// apart from test/helpers/tree-tools.ts, whose other helpers need the fixtures and system tools.

export function permutations<T>(items: readonly T[]): T[][] {
  if (items.length <= 1) return [[...items]];
  return items.flatMap((item, i) => permutations([...items.slice(0, i), ...items.slice(i + 1)]).map((rest) => [item, ...rest]));
}
