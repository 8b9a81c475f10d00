// The files of the installed package that the command line names: package.json for the version, and
// the documentation its help points to. Both are found from this module, two levels below the package
// root in the bundle (dist/cli/) as in the sources (src/cli/).

import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);
const PACKAGE_JSON = require.resolve('../../package.json');
const PACKAGE_ROOT = dirname(PACKAGE_JSON);

export const VERSION = (require(PACKAGE_JSON) as { version: string }).version;

/** docs/ of this installation, which the package ships (package.json "files"). */
export const DOCS_DIR = join(PACKAGE_ROOT, 'docs');

/** A page of docs/ as an absolute path: a path relative to a checkout names nothing where npm installed the command. */
export function docPath(page: string): string {
  return join(DOCS_DIR, page);
}

/** README.md of this installation. */
export const README_PATH = join(PACKAGE_ROOT, 'README.md');
