// Builds the derivations of fixtures/nix/default.nix with a real Nix: Debian's nix-bin (2.8), offline,
// as root, into /nix/store, with no build users and no sandbox (the builders use the host's /usr/bin and
// the checkout's CLI), and no substituters. Every run passes a fresh runId, so each builds afresh instead
// of finding the outputs of an earlier run; remove() deletes what the run added (its outputs and .drv
// files; the store copies of fixtures/nix and hooks/ stay, shared by runs, for the garbage collector).

import { randomUUID } from 'node:crypto';
import { mkdir, symlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { REPO_ROOT, requireTool } from './fixtures.js';
import { assertCliBuilt, cliPath } from './run-cli.js';
import { mustExec, type ExecResult } from './exec.js';
import { useTempDir } from './use-temp-dir.js';

const NIX_FILE = join(REPO_ROOT, 'fixtures', 'nix', 'default.nix');
const NIX_CONFIG = ['build-users-group =', 'sandbox = false', 'substituters =', 'max-jobs = 2'];

export interface NixRunOptions {
  /** What the driver hook's @driverLink@ is filled with. */
  readonly driverLink: string;
  /** Nix system of the derivations (default: this machine's). */
  readonly system?: string;
  /** The C compiler the builders use (default gcc). */
  readonly cc?: string;
  /** For an aarch64-linux install check: the sysroot qemu loads the program's libc from. */
  readonly qemuLdPrefix?: string;
  /** More nix.conf lines, e.g. `extra-platforms = aarch64-linux`. */
  readonly config?: readonly string[];
}

/** A derivation's output paths by output name, and its .drv as `drv`. */
export type DerivationPaths = Readonly<Record<string, string>>;

export interface NixRun {
  /** Every derivation of default.nix by attribute name (not built until build() names it). */
  readonly paths: Readonly<Record<string, DerivationPaths>>;
  /** The store path of one output of a derivation of default.nix (throws when there is no such thing). */
  output(attr: string, name?: string): string;
  /** `nix-build -A ATTR...`; the build log is on stderr. Throws with the log when the build fails. */
  build(attrs: readonly string[]): Promise<ExecResult>;
  /** `nix-store -q --references`, sorted. */
  references(storePath: string): Promise<string[]>;
  /** Deletes the outputs and .drv files of this run that exist. */
  remove(): Promise<void>;
}

export async function openNixRun(options: NixRunOptions): Promise<NixRun> {
  if (process.getuid?.() !== 0) {
    throw new Error('the Nix tests build into /nix/store as root, without build users (as CI runs them): run them as root');
  }
  assertCliBuilt();
  const nixBuild = requireTool('nix-build');
  const nixInstantiate = requireTool('nix-instantiate');
  const nixStore = requireTool('nix-store');
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? '/root',
    LC_ALL: 'C',
    NIX_CONFIG: [...NIX_CONFIG, ...(options.config ?? [])].join('\n'),
  };
  const args = [
    NIX_FILE,
    '--argstr',
    'cudaPatchelf',
    cliPath,
    '--argstr',
    'path',
    `${dirname(process.execPath)}:/usr/bin:/bin`,
    '--argstr',
    'driverLink',
    options.driverLink,
    '--argstr',
    'runId',
    randomUUID(),
    ...(options.system === undefined ? [] : ['--argstr', 'system', options.system]),
    ...(options.cc === undefined ? [] : ['--argstr', 'cc', options.cc]),
    ...(options.qemuLdPrefix === undefined ? [] : ['--argstr', 'qemuLdPrefix', options.qemuLdPrefix]),
  ];
  const evaluated = await mustExec(nixInstantiate, ['--eval', '--strict', '--json', ...args, '-A', 'outputPaths'], { env });
  const paths = JSON.parse(evaluated.stdout) as Record<string, DerivationPaths>;
  const allPaths = Object.values(paths).flatMap((derivation) => Object.values(derivation));

  return {
    paths,
    output: (attr, name = 'out') => {
      const path = paths[attr]?.[name];
      if (path === undefined) throw new Error(`${NIX_FILE} has no derivation ${attr} with an output ${name}`);
      return path;
    },
    build: (attrs) => mustExec(nixBuild, ['--no-out-link', ...args, ...attrs.flatMap((attr) => ['-A', attr])], { env, timeoutMs: 300_000 }),
    references: async (storePath) => {
      const result = await mustExec(nixStore, ['--query', '--references', storePath], { env });
      return result.stdout
        .split('\n')
        .filter((line) => line.length > 0)
        .sort();
    },
    remove: async () => {
      const invalid = await mustExec(nixStore, ['--check-validity', '--print-invalid', ...allPaths], { env });
      const missing = new Set(invalid.stdout.split('\n'));
      const valid = allPaths.filter((path) => !missing.has(path));
      if (valid.length > 0) await mustExec(nixStore, ['--delete', ...valid], { env });
    },
  };
}

/** A run whose driver link points at its built `driver` package, and the build of the attributes a test asked for. */
export interface DriverLinkedBuild {
  readonly run: NixRun;
  /** DIR/run/opengl-driver: outside the store, as /run/opengl-driver is on NixOS. */
  readonly driverLink: string;
  readonly built: ExecResult;
}

/**
 * For a test file (x86_64-linux): a temporary directory, a run whose driver link in it points at the
 * `driver` package once that is built, then `attrs` built, all before its tests; the run's outputs and
 * the directory removed after them. Returns what gives the build once the tests run.
 */
export function useDriverLinkedBuild(label: string, attrs: readonly string[]): () => DriverLinkedBuild {
  const work = useTempDir(label);
  let run: NixRun | undefined;
  let done: DriverLinkedBuild | undefined;
  beforeAll(async () => {
    const driverLink = join(work(), 'run', 'opengl-driver');
    run = await openNixRun({ driverLink });
    await run.build(['driver']);
    await mkdir(dirname(driverLink), { recursive: true });
    await symlink(run.output('driver'), driverLink);
    done = { run, driverLink, built: await run.build(attrs) };
  });
  afterAll(async () => {
    await run?.remove();
  });
  return () => {
    if (done === undefined) throw new Error(`the ${label} build is made in beforeAll`);
    return done;
  };
}
