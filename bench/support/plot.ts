/**
 * A dependency-free SVG scatter plot for the benches: one panel per series, time on x, latency on a
 * log-scale y, failed requests in red, vertical marks for events (fault on, breaker open, …).
 */
export interface TimelineSeries {
  readonly label: string;
  readonly points: readonly { readonly x: number; readonly y: number; readonly failed: boolean }[];
  readonly marks: readonly { readonly x: number; readonly label: string }[];
}

const escape = (text: string): string => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

const maxBulkPoints = 700;

export function timelineSvg(title: string, series: readonly TimelineSeries[]): string {
  const width = 900;
  const panelHeight = 220;
  const left = 60;
  const right = 20;
  const top = 40;
  const gap = 40;
  const height = top + series.length * (panelHeight + gap);
  const all = series.flatMap((s) => s.points);
  const maxX = Math.max(1, ...all.map((p) => p.x), ...series.flatMap((s) => s.marks.map((m) => m.x)));
  const minY = 1;
  const maxY = Math.max(10, ...all.map((p) => p.y));
  const logMin = Math.log10(minY);
  const logMax = Math.log10(maxY) + 0.05;
  const plotWidth = width - left - right;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${left}" y="22" font-size="14">${escape(title)}</text>`,
  ];
  series.forEach((s, index) => {
    const y0 = top + index * (panelHeight + gap);
    const xOf = (x: number): number => left + (x / maxX) * plotWidth;
    const yOf = (y: number): number => y0 + panelHeight - ((Math.log10(Math.max(minY, y)) - logMin) / (logMax - logMin)) * panelHeight;
    parts.push(`<rect x="${left}" y="${y0}" width="${plotWidth}" height="${panelHeight}" fill="none" stroke="#999"/>`);
    parts.push(`<text x="${left + 6}" y="${y0 + 14}" font-weight="bold">${escape(s.label)}</text>`);
    for (let decade = Math.ceil(logMin); decade <= Math.floor(logMax); decade += 1) {
      const y = yOf(10 ** decade);
      parts.push(`<line x1="${left}" x2="${left + plotWidth}" y1="${y}" y2="${y}" stroke="#eee"/>`);
      parts.push(`<text x="${left - 6}" y="${y + 4}" text-anchor="end">${10 ** decade} ms</text>`);
    }
    for (let second = 0; second <= maxX; second += 1) {
      parts.push(`<text x="${xOf(second)}" y="${y0 + panelHeight + 14}" text-anchor="middle">${second} s</text>`);
    }
    for (const mark of s.marks) {
      const x = xOf(mark.x);
      parts.push(`<line x1="${x}" x2="${x}" y1="${y0}" y2="${y0 + panelHeight}" stroke="#4a7" stroke-dasharray="4 3"/>`);
      parts.push(`<text x="${x + 3}" y="${y0 + 28}" fill="#275">${escape(mark.label)}</text>`);
    }
    // Every failed or slow point is drawn; the fast bulk is thinned to keep the file small.
    const sorted = s.points.map((p) => p.y).sort((a, b) => a - b);
    const slow = sorted[Math.floor(sorted.length * 0.9)] ?? 0;
    const bulk = s.points.filter((p) => !p.failed && p.y < slow);
    const step = Math.max(1, Math.ceil(bulk.length / maxBulkPoints));
    const kept = new Set(bulk.filter((_, i) => i % step === 0));
    const shown = s.points.filter((p) => p.failed || p.y >= slow || kept.has(p));
    const dots = (failed: boolean, colour: string): string =>
      `<g fill="${colour}" fill-opacity="0.5">${shown
        .filter((p) => p.failed === failed)
        .map((p) => `<circle cx="${xOf(p.x).toFixed(1)}" cy="${yOf(p.y).toFixed(1)}" r="1.5"/>`)
        .join('')}</g>`;
    parts.push(dots(false, '#36c'), dots(true, '#d22'));
  });
  parts.push('</svg>');
  return parts.join('\n');
}
