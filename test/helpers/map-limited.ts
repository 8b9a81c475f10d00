// Bounded concurrency for the tests that run an external tool or a file operation over many files:
// enough at once to use the machine, few enough that memory-hungry tools (patchelf reads a file whole)
// stay affordable.

/** Runs `work` over `items` with at most `limit` running at once, results in input order. */
export async function mapLimited<T, R>(items: readonly T[], limit: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const index = next++;
      results[index] = await work(items[index] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}
