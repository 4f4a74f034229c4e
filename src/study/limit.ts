/**
 * Bounded concurrency without a dependency: `limit` workers take items in order. When one call
 * rejects, no new item starts, the running ones are awaited (the caller aborts them through its
 * own signal in `onFirstError`), and the first error is rethrown.
 */
export async function mapConcurrent<I, O>(
  items: readonly I[],
  limit: number,
  run: (item: I, index: number) => Promise<O>,
  onFirstError?: (error: unknown) => void,
): Promise<O[]> {
  const results: O[] = new Array<O>(items.length);
  let next = 0;
  let failure: { error: unknown } | undefined;
  const worker = async (): Promise<void> => {
    while (failure === undefined && next < items.length) {
      const index = next;
      next += 1;
      try {
        results[index] = await run(items[index] as I, index);
      } catch (error) {
        if (failure === undefined) {
          failure = { error };
          onFirstError?.(error);
        }
      }
    }
  };
  const workers = Array.from({ length: Math.max(1, Math.min(Math.floor(limit), items.length)) }, () => worker());
  await Promise.all(workers);
  if (failure !== undefined) throw failure.error;
  return results;
}
