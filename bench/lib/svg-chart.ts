// Horizontal bar charts as a standalone SVG file, written by hand (no chart package): one panel per
// measure, a bar per contender, min–max whiskers, linear or log scale with labelled ticks.

export interface Bar {
  readonly label: string;
  readonly value: number;
  readonly min?: number;
  readonly max?: number;
  /** Drawn in the accent colour (ours). */
  readonly accent?: boolean;
}

export interface Panel {
  readonly title: string;
  readonly bars: readonly Bar[];
  readonly scale: 'linear' | 'log';
  readonly format: (value: number) => string;
}

const WIDTH = 960;
const LABEL = 330;
const PLOT = 470;
const BAR = 20;
const GAP = 8;
const PANEL_HEAD = 44;
const AXIS = 22;

const escapeXml = (text: string): string => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

interface Axis {
  readonly x: (value: number) => number;
  readonly ticks: readonly number[];
}

function axisOf(panel: Panel): Axis {
  const values = panel.bars.flatMap((b) => [b.value, b.max ?? b.value]);
  const top = Math.max(...values);
  if (panel.scale === 'log') {
    const positive = panel.bars.flatMap((b) => [b.value, b.min ?? b.value]).filter((v) => v > 0);
    const lo = Math.floor(Math.log10(Math.min(...positive)));
    const hi = Math.max(lo + 1, Math.ceil(Math.log10(top)));
    const x = (v: number): number => (v <= 0 ? 0 : ((Math.log10(v) - lo) / (hi - lo)) * PLOT);
    return { x, ticks: Array.from({ length: hi - lo + 1 }, (_, i) => 10 ** (lo + i)) };
  }
  const step = 10 ** Math.floor(Math.log10(top || 1));
  const end = Math.ceil((top || 1) / step) * step;
  const tickStep = end / step > 5 ? step * 2 : step;
  return { x: (v) => (v / end) * PLOT, ticks: Array.from({ length: Math.floor(end / tickStep) + 1 }, (_, i) => i * tickStep) };
}

function panelSvg(panel: Panel, top: number): { svg: string; height: number } {
  const axis = axisOf(panel);
  const parts: string[] = [`<text x="16" y="${top + 24}" class="panel">${escapeXml(panel.title)}</text>`];
  const plotTop = top + PANEL_HEAD;
  const plotHeight = panel.bars.length * (BAR + GAP);
  for (const tick of axis.ticks) {
    const x = LABEL + axis.x(tick);
    parts.push(`<line x1="${x}" y1="${plotTop - 4}" x2="${x}" y2="${plotTop + plotHeight}" class="grid"/>`);
    parts.push(`<text x="${x}" y="${plotTop + plotHeight + 16}" class="tick">${escapeXml(panel.format(tick))}</text>`);
  }
  panel.bars.forEach((bar, i) => {
    const y = plotTop + i * (BAR + GAP);
    const width = Math.max(1, axis.x(bar.value));
    parts.push(`<text x="${LABEL - 10}" y="${y + BAR * 0.72}" class="label">${escapeXml(bar.label)}</text>`);
    parts.push(`<rect x="${LABEL}" y="${y}" width="${width.toFixed(1)}" height="${BAR}" class="${bar.accent ? 'ours' : 'theirs'}"/>`);
    if (bar.min !== undefined && bar.max !== undefined && bar.max > bar.min) {
      const [x1, x2, mid] = [LABEL + axis.x(bar.min), LABEL + axis.x(bar.max), y + BAR / 2];
      parts.push(
        `<path d="M${x1.toFixed(1)} ${mid}H${x2.toFixed(1)}M${x1.toFixed(1)} ${y + 5}V${y + BAR - 5}M${x2.toFixed(1)} ${y + 5}V${y + BAR - 5}" class="whisker"/>`,
      );
    }
    const end = LABEL + Math.max(width, axis.x(bar.max ?? bar.value));
    parts.push(`<text x="${(end + 6).toFixed(1)}" y="${y + BAR * 0.72}" class="value">${escapeXml(panel.format(bar.value))}</text>`);
  });
  return { svg: parts.join('\n'), height: PANEL_HEAD + plotHeight + AXIS + 12 };
}

export function barChartSvg(title: string, subtitle: string, panels: readonly Panel[]): string {
  let y = 56;
  const bodies = panels.map((panel) => {
    const { svg, height } = panelSvg(panel, y);
    y += height;
    return svg;
  });
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${y + 8}" viewBox="0 0 ${WIDTH} ${y + 8}" font-family="sans-serif">`,
    '<style>',
    '.title{font-size:18px;font-weight:bold}.subtitle{font-size:12px;fill:#555}.panel{font-size:14px;font-weight:bold}',
    '.label{font-size:12px;text-anchor:end}.value{font-size:12px}.tick{font-size:10px;fill:#666;text-anchor:middle}',
    '.grid{stroke:#ddd}.ours{fill:#2a7ab8}.theirs{fill:#b0b0b0}.whisker{stroke:#222;stroke-width:1.2;fill:none}',
    '</style>',
    `<rect width="${WIDTH}" height="${y + 8}" fill="#fff"/>`,
    `<text x="16" y="26" class="title">${escapeXml(title)}</text>`,
    `<text x="16" y="44" class="subtitle">${escapeXml(subtitle)}</text>`,
    ...bodies,
    '</svg>',
    '',
  ].join('\n');
}
