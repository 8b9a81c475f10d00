// Writing a benchmark's results: Markdown in bench/results/<date>-<name>.md (and to stdout), and files
// next to it.

import { mkdir, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const RESULTS_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', 'results');

export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  // A `|` inside a cell would end it: escaped (GitHub keeps it escaped inside code spans too).
  const line = (cells: readonly string[]): string => `| ${cells.map((cell) => cell.replace(/\|/g, '\\|')).join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

/** `<dir>/<date>-<name>.<extension>`. */
export function resultsFile(name: string, extension: string, dir = RESULTS_DIR): string {
  return join(dir, `${new Date().toISOString().slice(0, 10)}-${name}.${extension}`);
}

export async function writeResults(name: string, markdown: string, dir = RESULTS_DIR): Promise<string> {
  await mkdir(dir, { recursive: true });
  const file = resultsFile(name, 'md', dir);
  await writeFile(file, `${markdown.trim()}\n\n_machine: ${hostname()}, ${new Date().toISOString()}_\n`);
  process.stdout.write(`${markdown}\n\nwritten to ${file}\n`);
  return file;
}

export const mib = (bytes: number): string => (bytes / 2 ** 20).toFixed(2);
export const ratio = (slow: number, fast: number): string => (fast > 0 ? `${(slow / fast).toFixed(1)}×` : '∞');
