// What the real loader opens against what --auto-patchelf says it chose: `ld.so --list FILE` (under
// qemu for aarch64) for every file of a `--json` report that names resolved directories, each DT_NEEDED
// name's line compared, by real path, with the chosen directory's copy (what a file dlopens is checked
// by running it: --list loads DT_NEEDED alone).

import { realpath } from 'node:fs/promises';
import { join } from 'node:path';
import type { Arch } from './arch.js';
import { listDependencies } from './fixtures.js';
import { dynamicStrings } from './readelf.js';

/** The fields of apply's `--json` report (version 4) that say what the resolver chose. */
export interface ApplyReport {
  readonly files: readonly ReportFile[];
}

interface ReportFile {
  readonly path: string;
  readonly status: string;
  readonly resolved?: readonly { readonly dir: string; readonly names: readonly string[] }[];
}

/** `name => path` of each line `ld.so --list` printed. */
export function listedPaths(stdout: string): Map<string, string> {
  const paths = new Map<string, string>();
  for (const line of stdout.split('\n')) {
    const match = /^\s*(\S+) => (\S+) \(0x[0-9a-f]+\)$/.exec(line);
    if (match !== null) paths.set(match[1] as string, match[2] as string);
  }
  return paths;
}

const realOrNull = (path: string): Promise<string | null> => realpath(path).catch(() => null);

export interface ChosenLoads {
  /** Files of the report the loader was asked about. */
  readonly files: number;
  /** Chosen dependencies compared. */
  readonly dependencies: number;
  /** One line per dependency the loader took from elsewhere, or did not find. */
  readonly mismatches: readonly string[];
}

/**
 * For each file of `report` (a parsed `--json` report of apply) with resolved directories, whether
 * `ld.so --list` resolves each of its DT_NEEDED names to the chosen directory's file.
 */
export async function chosenLoads(report: ApplyReport, arch: Arch): Promise<ChosenLoads> {
  let files = 0;
  let dependencies = 0;
  const mismatches: string[] = [];
  for (const file of report.files) {
    const resolved = (file.resolved ?? []).filter((directory) => directory.names.length > 0);
    if (resolved.length === 0 || file.status === 'failed') continue;
    files++;
    const needed = new Set(await dynamicStrings(file.path, 'NEEDED'));
    const paths = listedPaths((await listDependencies(file.path, arch)).stdout);
    for (const { dir, names } of resolved) {
      for (const name of names.filter((n) => needed.has(n))) {
        dependencies++;
        const chosen = await realOrNull(join(dir, name));
        const loaded = paths.get(name);
        const real = loaded === undefined ? null : await realOrNull(loaded);
        if (chosen === null || real !== chosen)
          mismatches.push(`${file.path}: ${name}: chose ${join(dir, name)}, ld.so --list: ${loaded ?? 'not listed'}`);
      }
    }
  }
  return { files, dependencies, mismatches };
}
