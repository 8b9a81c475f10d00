// The command line the entry scripts share: case names, --dist DIR, and the results' name.

import { hostname } from 'node:os';
import { join, resolve } from 'node:path';

const DIST_FLAG = '--dist';

/** The build to run: --dist DIR, else the checkout's dist/. */
export function distArgument(argv: readonly string[] = process.argv): string {
  const at = argv.indexOf(DIST_FLAG);
  const given = at < 0 ? undefined : argv[at + 1];
  if (at >= 0 && given === undefined) throw new Error(`${DIST_FLAG} needs a directory`);
  return resolve(given ?? join(import.meta.dirname, '..', '..', 'dist'));
}

/** The case names: every argument that is neither a flag nor --dist's value. */
export const caseArguments = (argv: readonly string[] = process.argv): string[] =>
  argv.slice(2).filter((arg, i, all) => !arg.startsWith('--') && all[i - 1] !== DIST_FLAG);

/** The results' name: <machine>-auto-patchelf-<kind>, and the cases when they were named. */
export const resultsName = (kind: string, argv: readonly string[] = process.argv): string =>
  [`${hostname().replace(/[^A-Za-z0-9.-]/g, '_')}-auto-patchelf-${kind}`, ...caseArguments(argv)].join('-');
