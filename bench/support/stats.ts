/** Small statistics for the process-level benches (bench/report.ts has `median` and `round`). */

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted: ArrayLike<number>, fraction: number): number {
  if (sorted.length === 0) return Number.NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil(fraction * sorted.length) - 1));
  return sorted[index] as number;
}

/** Least-squares slope of y over x (NaN with fewer than two points). */
export function slope(points: readonly (readonly [number, number])[]): number {
  if (points.length < 2) return Number.NaN;
  const n = points.length;
  const meanX = points.reduce((sum, [x]) => sum + x, 0) / n;
  const meanY = points.reduce((sum, [, y]) => sum + y, 0) / n;
  let numerator = 0;
  let denominator = 0;
  for (const [x, y] of points) {
    numerator += (x - meanX) * (y - meanY);
    denominator += (x - meanX) ** 2;
  }
  return denominator === 0 ? Number.NaN : numerator / denominator;
}

export const mebibytes = (bytes: number): number => bytes / (1024 * 1024);

/** `+1.23` / `-0.40`: a signed difference for the tables. */
export function signed(value: number, digits = 2): string {
  return `${value >= 0 ? '+' : '−'}${Math.abs(value).toFixed(digits)}`;
}
