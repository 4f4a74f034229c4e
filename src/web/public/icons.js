// Inline SVG icons: drawn from paths, so they show in any browser whatever fonts it has (an arrow
// character such as U+2191 is an empty box where no installed font has it). Decorative: the control
// that holds one carries its own accessible name.

const svgNs = 'http://www.w3.org/2000/svg';

/** Path data on a 16 × 16 grid, stroked. */
const paths = {
  up: 'M8 13V3M3.5 7.5L8 3l4.5 4.5',
  down: 'M8 3v10M3.5 8.5L8 13l4.5-4.5',
  right: 'M3 8h10M8.5 3.5L13 8l-4.5 4.5',
};

/**
 * An icon as an `<svg class="icon">` element, hidden from assistive technology.
 * @param {keyof typeof paths} name
 */
export function icon(name) {
  const root = document.createElementNS(svgNs, 'svg');
  root.setAttribute('class', `icon icon-${name}`);
  root.setAttribute('viewBox', '0 0 16 16');
  root.setAttribute('width', '16');
  root.setAttribute('height', '16');
  root.setAttribute('aria-hidden', 'true');
  root.setAttribute('focusable', 'false');
  const path = document.createElementNS(svgNs, 'path');
  path.setAttribute('d', paths[name]);
  root.append(path);
  return root;
}
