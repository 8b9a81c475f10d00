// Writing a benchmark's results: a Markdown table in bench/results/<date>-<name>.md, and to stdout.

import { mkdir, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const RESULTS_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', 'results');

export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const line = (cells: readonly string[]): string => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

export async function writeResults(name: string, markdown: string): Promise<string> {
  await mkdir(RESULTS_DIR, { recursive: true });
  const file = join(RESULTS_DIR, `${new Date().toISOString().slice(0, 10)}-${name}.md`);
  await writeFile(file, `${markdown.trim()}\n\n_machine: ${hostname()}, ${new Date().toISOString()}_\n`);
  process.stdout.write(`${markdown}\n\nwritten to ${file}\n`);
  return file;
}

export const mib = (bytes: number): string => (bytes / 2 ** 20).toFixed(2);
export const ratio = (slow: number, fast: number): string => (fast > 0 ? `${(slow / fast).toFixed(1)}×` : '∞');
