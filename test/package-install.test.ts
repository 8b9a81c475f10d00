// cuda-patchelf as its users get it. `npm pack` in a copy of the checkout without dist/ (as a fresh clone
// is) must build the bundle itself and ship it with the setup hooks; `npm install -g` of that tarball must
// need no registry (the runtime packages are bundled, so there is nothing to fetch); the installed command
// must patch a demo tree and its installed hooks must fix up a build in the stdenv harness. nix/package.nix
// is parsed, evaluated and built against stand-ins for the Nixpkgs functions it calls
// (nix/tests/package-stand-ins.nix: Nixpkgs itself cannot be fetched here), which lay the same tarball
// out as Nixpkgs installs an npm package; the hook packages it defines must fix up a build too.

import { randomUUID } from 'node:crypto';
import { cp, mkdir, readFile, readdir, rm, stat, symlink } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileBundle } from '../src/cli/code-cache.js';
import { REPO_ROOT, requireTool } from './helpers/fixtures.js';
import {
  VERSION,
  buildPackages,
  buildWithHooks,
  expectBuilt,
  greetReport,
  runGreet,
  runpathOf,
  type Build,
  type Packages,
} from './helpers/shim-stdenv.js';
import { makeTempDir } from './helpers/temp-dir.js';
import { sha256File } from './helpers/tree-tools.js';
import { describeExec } from './helpers/verify.js';
import { interpreterOf } from './helpers/readelf.js';
import { makeBintools } from './helpers/shim-auto-patchelf.js';
import { cleanEnv, execTool, mustExec, type ExecResult } from './helpers/exec.js';

interface PackageJson {
  readonly name: string;
  readonly version: string;
  readonly license: string;
  readonly description: string;
  readonly bin: Readonly<Record<string, string>>;
  readonly scripts: Readonly<Record<string, string>>;
  readonly dependencies?: Readonly<Record<string, string>>;
}

const packageJson = JSON.parse(await readFile(join(REPO_ROOT, 'package.json'), 'utf8')) as PackageJson;
const BIN_NAME = 'cuda-patchelf';
// The paths a checkout holds that a fresh clone does not (.gitignore) or that are no part of the tree.
const NOT_IN_A_CLONE = new Set(['.git', 'node_modules', 'dist', 'fixtures/.cache', 'bench/.cache']);
const HOOK_SCRIPTS = [
  'auto-add-cuda-compat-runpath.sh',
  'auto-add-driver-runpath.sh',
  'auto-patchelf.sh',
  'cuda-patchelf-fixup.sh',
  'remove-stubs-from-runpath.sh',
];
// What the demo tree's hooks are given: a cuda_compat store path, as a Jetson build passes it.
const CUDA_COMPAT = '/nix/store/00000000000000000000000000000000-cuda_compat';
const DRIVER_LIB = '/run/opengl-driver/lib';
const NIX_CONFIG = ['build-users-group =', 'sandbox = false', 'substituters ='].join('\n');

let dir = '';
let tarball = '';
let tarballFiles: string[] = [];
let prefix = '';
let installed = '';
let packages: Packages | undefined;

/** npm's environment: the caller's, without the npm_* settings an enclosing `npm test` exports (a child npm would read them as its own config), with a home and cache of its own. */
function npmEnv(home: string): NodeJS.ProcessEnv {
  const env = cleanEnv({ HOME: home, npm_config_cache: join(home, 'npm-cache'), npm_config_update_notifier: 'false' });
  for (const key of Object.keys(env))
    if (/^npm_/i.test(key) && key !== 'npm_config_cache' && key !== 'npm_config_update_notifier') delete env[key];
  return env;
}

/** PATH for running the installed command: the prefix's bin, and node for its `#!/usr/bin/env node`. */
function installedPath(): string {
  return `${join(prefix, 'bin')}:${dirname(process.execPath)}:/usr/bin:/bin`;
}

function runInstalled(args: readonly string[]): Promise<ExecResult> {
  return execTool(join(prefix, 'bin', BIN_NAME), args, { env: cleanEnv({ PATH: installedPath() }), timeoutMs: 60_000 });
}

beforeAll(async () => {
  dir = await makeTempDir('package');
  const home = join(dir, 'home');
  await mkdir(home);

  // A copy of the working tree as a clone would have it: no dist/, no node_modules/ of its own. The build
  // tools come from the checkout's node_modules through a link (npm ci would download them again).
  const clone = join(dir, 'clone');
  await cp(REPO_ROOT, clone, {
    recursive: true,
    verbatimSymlinks: true,
    filter: (source) => !NOT_IN_A_CLONE.has(relative(REPO_ROOT, source)),
  });
  await symlink(join(REPO_ROOT, 'node_modules'), join(clone, 'node_modules'));

  const packDir = join(dir, 'pack');
  await mkdir(packDir);
  await mustExec(requireTool('npm'), ['pack', '--pack-destination', packDir], { cwd: clone, env: npmEnv(home), timeoutMs: 300_000 });
  const packed = (await readdir(packDir)).filter((name) => name.endsWith('.tgz'));
  expect(packed).toEqual([`${packageJson.name}-${packageJson.version}.tgz`]);
  tarball = join(packDir, packed[0] ?? '');
  tarballFiles = (await mustExec(requireTool('tar'), ['-tzf', tarball])).stdout
    .split('\n')
    .filter((line) => line.length > 0 && !line.endsWith('/'))
    .map((line) => line.replace(/^package\//, ''))
    .sort();

  // A registry on a closed port: any attempt to fetch fails the install.
  prefix = join(dir, 'prefix');
  await mustExec(
    requireTool('npm'),
    ['install', '--global', '--prefix', prefix, '--offline', '--no-audit', '--no-fund', '--registry', 'http://127.0.0.1:9/', tarball],
    { cwd: dir, env: npmEnv(home), timeoutMs: 300_000 },
  );
  installed = join(prefix, 'lib', 'node_modules', packageJson.name);
  packages = await buildPackages();
});

afterAll(async () => {
  if (packages !== undefined) await rm(packages.root, { recursive: true, force: true });
  if (dir !== '') await rm(dir, { recursive: true, force: true });
});

function shimPackages(): Packages {
  if (packages === undefined) throw new Error('the shim packages are built in beforeAll');
  return packages;
}

/** The import specifiers of an ES module bundle: static imports and exports, import(), require(). */
function importSpecifiers(code: string): string[] {
  const found = new Set<string>();
  const patterns = [
    /\b(?:import|export)\s[^;'"]*?\bfrom\s*['"]([^'"]+)['"]/g,
    /\bimport\s*['"]([^'"]+)['"]/g,
    /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g,
    /\brequire\(\s*['"]([^'"]+)['"]\s*\)/g,
  ];
  for (const pattern of patterns) for (const match of code.matchAll(pattern)) found.add(match[1] ?? '');
  return [...found].sort();
}

describe('npm pack from a clone', () => {
  it('builds dist/ itself (prepack) and ships the bundles, their code cache, the hooks, the documentation, README, LICENSE and package.json: no sources, no source maps', async () => {
    expect(tarballFiles).toEqual(
      [
        'LICENSE',
        'README.md',
        'package.json',
        'dist/cli/main.js',
        'dist/cli/main.cjs',
        'dist/cli/main.cjs.code-cache',
        'dist/cli/patch-worker.cjs',
        ...HOOK_SCRIPTS.map((name) => `hooks/${name}`),
        ...(await docPages()).map((name) => `docs/${name}`),
      ].sort(),
    );
  });

  it('is small: the bundles without source maps (the code cache is most of it), and the documentation', async () => {
    // The documentation's share, compressed file by file (a little more than it takes in the tarball's one stream).
    let docs = 0;
    for (const name of await docPages()) docs += gzipSync(await readFile(join(REPO_ROOT, 'docs', name))).length;
    // 320 KiB before autoPatchelf's resolver and the interpreter edit; with them, 334 KiB; with the
    // runpath proof (the loader model in the batch), doctor's shadowing findings and link-driver, 363 KiB.
    // The list of files above keeps out what does not belong (source maps, sources): this bounds the code itself.
    expect((await stat(tarball)).size - docs).toBeLessThan(384 * 1024);
  });
});

describe('npm install -g of the tarball', () => {
  it('installs the documentation that --help names, where the installed help says it is, and every docs/ page README links to', async () => {
    const helps = await Promise.all(
      [[], ['apply'], ['check'], ['plan'], ['print'], ['doctor']].map((command) => runInstalled([...command, '--help'])),
    );
    const text = helps.map((help) => help.stdout).join('\n');
    // Help lines wrap at spaces only, so a path is one word.
    const named = [...new Set(text.match(/\S*(?:README\.md|docs\/[\w.-]*)/g) ?? [])].map((path) =>
      path.replace(/[,.)]+$/, '').replace(/^\(/, ''),
    );
    expect(named.length).toBeGreaterThanOrEqual(5);
    for (const path of named) {
      expect(path.startsWith(`${installed}/`), `${path} is a path of the installed package`).toBe(true);
      await stat(path);
    }
    expect(named).toEqual(
      expect.arrayContaining([
        join(installed, 'README.md'),
        join(installed, 'docs/'),
        join(installed, 'docs', 'hooks.md'),
        join(installed, 'docs', 'doctor.md'),
      ]),
    );
    for (const name of await docPages())
      expect(await readFile(join(installed, 'docs', name), 'utf8'), name).toBe(await readFile(join(REPO_ROOT, 'docs', name), 'utf8'));
    const readme = await readFile(join(installed, 'README.md'), 'utf8');
    const linked = [...readme.matchAll(/\]\((docs\/[\w.-]+\.md)(?:#[\w-]*)?\)/g)].map((match) => match[1] ?? '');
    expect(linked.length).toBeGreaterThan(5);
    for (const page of linked) await stat(join(installed, page));
  });

  it('declares no runtime dependency and installs none: esbuild bundled them', async () => {
    const manifest = JSON.parse(await readFile(join(installed, 'package.json'), 'utf8')) as PackageJson;
    expect(manifest.dependencies ?? {}).toEqual({});
    await expect(stat(join(installed, 'node_modules'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('installs a bundle that imports only node: built-ins and its own chunks', async () => {
    const cliDir = join(installed, 'dist', 'cli');
    const modules = (await readdir(cliDir)).filter((name) => /\.c?js$/.test(name));
    expect(modules.sort()).toEqual(['main.cjs', 'main.js', 'patch-worker.cjs']);
    for (const name of modules) {
      const specifiers = importSpecifiers(await readFile(join(cliDir, name), 'utf8'));
      const foreign = specifiers.filter((specifier) => !specifier.startsWith('node:') && !/^\.\/[\w-]+\.js$/.test(specifier));
      expect(foreign, `${name} imports ${foreign.join(', ')}`).toEqual([]);
    }
  });

  it('installs a code cache that this Node takes: V8 does not compile the CLI bundle again', () => {
    const bundle = join(installed, 'dist', 'cli', 'main.cjs');
    expect(compileBundle(bundle).cachedDataRejected).toBe(false);
  });

  it(`puts ${BIN_NAME} in the prefix's bin, and it runs`, async () => {
    expect(packageJson.bin).toEqual({ [BIN_NAME]: 'dist/cli/main.js' });
    const result = await runInstalled(['--version']);
    expect(result.code, describeExec('cuda-patchelf --version', result)).toBe(0);
    expect(result.stdout.trim()).toBe(packageJson.version);
  });
});

/**
 * The tree of fixtures/demo.sh, built the same way: bin/demo-app and lib/libdemo.so.1 with runpaths, a
 * symbolic link, a static archive and files that are not ELF. The demo program's runpath also names the
 * link-time stubs of a CUDA package outside the tree (where a store path would be), for --remove-stubs.
 */
async function buildDemoTree(root: string): Promise<{ out: string; stubsDir: string }> {
  const source = join(REPO_ROOT, 'fixtures', 'demo');
  const gcc = requireTool('gcc');
  const out = join(root, 'out');
  const stubsDir = join(root, 'store', '00000000000000000000000000000001-cuda_cudart', 'lib', 'stubs');
  for (const sub of ['bin', 'lib', 'include', 'share/doc/demo']) await mkdir(join(out, sub), { recursive: true });
  await mkdir(stubsDir, { recursive: true });
  await mustExec(gcc, [
    '-shared',
    '-fPIC',
    '-O1',
    '-Wl,-soname,libcuda.so.1',
    '-o',
    join(stubsDir, 'libcuda.so'),
    join(source, 'demo-lib.c'),
  ]);
  await mustExec(gcc, [
    '-shared',
    '-fPIC',
    '-O1',
    '-Wl,-soname,libdemo.so.1',
    '-Wl,--enable-new-dtags,-rpath,$ORIGIN',
    '-o',
    join(out, 'lib', 'libdemo.so.1'),
    join(source, 'demo-lib.c'),
  ]);
  await symlink('libdemo.so.1', join(out, 'lib', 'libdemo.so'));
  await mustExec(gcc, [
    '-O1',
    '-o',
    join(out, 'bin', 'demo-app'),
    join(source, 'demo-app.c'),
    `-L${join(out, 'lib')}`,
    '-ldemo',
    `-Wl,--enable-new-dtags,-rpath,$ORIGIN/../lib:${stubsDir}`,
  ]);
  await mustExec(gcc, ['-c', '-O1', '-o', join(root, 'demo-lib.o'), join(source, 'demo-lib.c')]);
  await mustExec(requireTool('ar'), ['rcs', join(out, 'lib', 'libdemo.a'), join(root, 'demo-lib.o')]);
  await cp(join(source, 'demo-lib.c'), join(out, 'share', 'doc', 'demo', 'README'));
  await cp(join(source, 'demo-app.c'), join(out, 'include', 'demo.h'));
  return { out, stubsDir };
}

describe('the installed cuda-patchelf on the demo tree', () => {
  const hooks = ['--cuda-compat', CUDA_COMPAT, '--remove-stubs'];

  it('check finds work, apply (one thread, and worker threads) patches, check then passes, and the program still runs', async () => {
    const root = join(dir, 'demo');
    const { out, stubsDir } = await buildDemoTree(root);
    expect(await runpathOf(join(out, 'bin', 'demo-app'))).toBe(`$ORIGIN/../lib:${stubsDir}`);
    expect(await runpathOf(join(out, 'lib', 'libdemo.so.1'))).toBe('$ORIGIN');
    const threaded = join(root, 'out-threaded');
    await mustExec(requireTool('cp'), ['-a', out, threaded]);

    const before = await runInstalled(['check', out, ...hooks]);
    expect(before.code, describeExec('check before apply', before)).toBe(1);
    const apply = await runInstalled(['apply', out, ...hooks, '--jobs', '1']);
    expect(apply.code, describeExec('apply --jobs 1', apply)).toBe(0);
    // --jobs 2 --threads-from-start runs the installed worker bundle (dist/cli/patch-worker.cjs) in threads.
    const applyThreaded = await runInstalled(['apply', threaded, ...hooks, '--jobs', '2', '--threads-from-start']);
    expect(applyThreaded.code, describeExec('apply --jobs 2', applyThreaded)).toBe(0);

    expect(await runpathOf(join(out, 'bin', 'demo-app'))).toBe(`${CUDA_COMPAT}/compat:${DRIVER_LIB}:$ORIGIN/../lib`);
    expect(await runpathOf(join(out, 'lib', 'libdemo.so.1'))).toBe(`${CUDA_COMPAT}/compat:${DRIVER_LIB}:$ORIGIN`);
    for (const file of ['bin/demo-app', 'lib/libdemo.so.1', 'lib/libdemo.a', 'share/doc/demo/README']) {
      expect(await sha256File(join(threaded, file)), file).toBe(await sha256File(join(out, file)));
    }
    const after = await runInstalled(['check', out, ...hooks]);
    expect(after.code, describeExec('check after apply', after)).toBe(0);
    const program = await execTool(join(out, 'bin', 'demo-app'), [], { env: cleanEnv({ PATH: '/usr/bin:/bin' }) });
    expect(program.stdout, describeExec('demo-app', program)).toBe('demo-app runs with libdemo 1.0\n');
  });
});

/** compat first, then the driver, in both outputs; the program loads cuda_compat's libcuda. */
async function expectFixedUp(build: Build): Promise<void> {
  const { compatEntry, driverEntry } = shimPackages();
  expectBuilt(build);
  expect(await runpathOf(build.libgreet)).toMatch(new RegExp(`^${escapeRegExp(`${compatEntry}:${driverEntry}`)}(:|$)`));
  expect(await runpathOf(build.greet)).toMatch(
    new RegExp(`^${escapeRegExp(`${compatEntry}:${driverEntry}:`)}.*${escapeRegExp(`${build.lib}/lib`)}$`),
  );
  const run = await runGreet(build);
  expect(run.stdout, describeExec('greet', run)).toBe(greetReport(VERSION.compat));
}

/** The pages of docs/ in the checkout. */
async function docPages(): Promise<string[]> {
  return (await readdir(join(REPO_ROOT, 'docs'))).filter((name) => name.endsWith('.md')).sort();
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Both outputs' files end as the checkout's hooks and CLI leave them (the same sources, built twice). */
async function expectSameAsCheckout(build: Build, hookOrder: readonly string[]): Promise<void> {
  const reference = await buildWithHooks(shimPackages(), { hooks: hookOrder });
  expectBuilt(reference);
  expect(await runpathOf(build.libgreet)).toBe((await runpathOf(reference.libgreet))?.replace(reference.lib, build.lib));
  expect(await runpathOf(build.greet)).toBe((await runpathOf(reference.greet))?.replace(reference.lib, build.lib));
}

describe('the installed hooks in the stdenv harness', () => {
  it('fix up a two-output build with the installed cuda-patchelf from PATH', async () => {
    const hookFile = (name: string): string => join(installed, 'hooks', name);
    const build = await buildWithHooks(shimPackages(), {
      hooks: [
        hookFile('auto-add-cuda-compat-runpath.sh'),
        hookFile('auto-add-driver-runpath.sh'),
        hookFile('remove-stubs-from-runpath.sh'),
      ],
      cli: 'none',
      attrs: { PATH: `${installedPath()}:${dirname(requireTool('gcc'))}`, NIX_DEBUG: '1' },
    });
    await expectFixedUp(build);
    // The one that ran is the installed command (NIX_DEBUG prints the command line).
    expect(build.result.stderr).toContain(join(prefix, 'bin', BIN_NAME));
    await expectSameAsCheckout(build, ['compat', 'driver', 'stubs']);
  });

  it('ship byte for byte the hooks of the checkout', async () => {
    for (const name of HOOK_SCRIPTS) {
      expect(await readFile(join(installed, 'hooks', name), 'utf8'), name).toBe(await readFile(join(REPO_ROOT, 'hooks', name), 'utf8'));
    }
  });
});

// nix/package.nix with the Nixpkgs functions it calls replaced by nix/tests/package-stand-ins.nix.
describe('nix/package.nix', () => {
  const standIns = join(REPO_ROOT, 'nix', 'tests', 'package-stand-ins.nix');
  const nixEnv = (): NodeJS.ProcessEnv =>
    cleanEnv({ PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/root', NIX_CONFIG });

  interface HookSummary {
    readonly name: string;
    readonly script: string;
    readonly substitutions: Readonly<Record<string, string>>;
    readonly propagatedBuildInputs: readonly string[];
    readonly broken: boolean;
    readonly out: string;
  }
  interface Summary {
    readonly pname: string;
    readonly version: string;
    readonly npmDeps: {
      readonly pname: string;
      readonly version: string;
      readonly fetches: readonly { readonly path: string; readonly url: string; readonly hash: string }[];
    };
    readonly npmConfigHook: string;
    readonly npmBuildScript: string;
    readonly npmPackFlags: readonly string[];
    readonly src: { readonly root: string; readonly files: readonly string[] };
    readonly meta: {
      readonly description: string;
      readonly license: { readonly spdxId: string };
      readonly mainProgram: string;
      readonly platforms: readonly string[];
    };
    readonly out: string;
    readonly hooks: Readonly<
      Record<'autoAddDriverRunpathHook' | 'autoAddCudaCompatRunpathHook' | 'removeStubsFromRunpathHook' | 'autoPatchelfHook', HookSummary>
    >;
  }

  const runId = randomUUID();
  const driverLink = (): string => shimPackages().driverLink;
  function standInArgs(cudaCompat: string | null): string[] {
    return [
      standIns,
      '--argstr',
      'tarball',
      tarball,
      '--argstr',
      'node',
      process.execPath,
      '--argstr',
      'path',
      '/usr/bin:/bin',
      '--argstr',
      'driverLink',
      driverLink(),
      '--argstr',
      'runId',
      runId,
      ...(cudaCompat === null ? [] : ['--argstr', 'cudaCompat', cudaCompat]),
    ];
  }
  async function evaluate(cudaCompat: string | null): Promise<Summary> {
    const result = await mustExec(
      requireTool('nix-instantiate'),
      ['--eval', '--strict', '--json', ...standInArgs(cudaCompat), '-A', 'summary'],
      { env: nixEnv() },
    );
    return JSON.parse(result.stdout) as Summary;
  }

  let storePaths: string[] = [];
  beforeAll(async () => {
    // Evaluating copies the tarball into /nix/store and the build writes there: as root, without build users.
    if (process.getuid?.() !== 0)
      throw new Error('the Nix checks write to /nix/store as root, without build users (as CI runs them): run them as root');
    // What this run adds to the store, known before anything is added, so that afterAll removes it whatever fails.
    const listed = await mustExec(
      requireTool('nix-instantiate'),
      ['--eval', '--strict', '--json', ...standInArgs(shimPackages().cudaCompat), '-A', 'storePaths'],
      { env: nixEnv() },
    );
    storePaths = JSON.parse(listed.stdout) as string[];
  });
  afterAll(async () => {
    if (storePaths.length === 0) return;
    const nixStore = requireTool('nix-store');
    const invalid = await mustExec(nixStore, ['--check-validity', '--print-invalid', ...storePaths], { env: nixEnv() });
    const missing = new Set(invalid.stdout.split('\n'));
    const valid = storePaths.filter((path) => !missing.has(path));
    if (valid.length > 0) await mustExec(nixStore, ['--delete', ...valid], { env: nixEnv() });
  });

  it('parses', async () => {
    const result = await execTool(requireTool('nix-instantiate'), ['--parse', join(REPO_ROOT, 'nix', 'package.nix')], { env: nixEnv() });
    expect(result.code, describeExec('nix-instantiate --parse', result)).toBe(0);
  });

  it('fetches every package of package-lock.json from its registry URL with the hash the lock records (importNpmLock)', async () => {
    const summary = await evaluate(shimPackages().cudaCompat);
    const lock = JSON.parse(await readFile(join(REPO_ROOT, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { version?: string; integrity?: string; name?: string }>;
    };
    const packages = Object.entries(lock.packages).filter(([path]) => path !== '');
    expect(summary.npmConfigHook).toBe('importNpmLock.npmConfigHook');
    expect(summary.npmDeps).toMatchObject({ pname: packageJson.name, version: packageJson.version });
    expect(summary.npmDeps.fetches.map((fetch) => fetch.path).sort()).toEqual(packages.map(([path]) => path).sort());
    for (const [path, module] of packages) {
      const fetch = summary.npmDeps.fetches.find((candidate) => candidate.path === path);
      // npm's tarball URL on the registry: @scope/name/-/name-VERSION.tgz (what `npm view NAME dist.tarball` says).
      const name = module.name ?? path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length);
      const file = name.slice(name.lastIndexOf('/') + 1);
      expect(fetch, path).toEqual({
        path,
        url: `https://registry.npmjs.org/${name}/-/${file}-${module.version}.tgz`,
        hash: module.integrity,
      });
      expect(module.integrity, path).toMatch(/^sha512-/);
    }
  });

  it("asks buildNpmPackage for this package.json's package, built by its build script from the sources only", async () => {
    const summary = await evaluate(shimPackages().cudaCompat);
    expect(summary.pname).toBe(packageJson.name);
    expect(summary.version).toBe(packageJson.version);
    expect(packageJson.scripts[summary.npmBuildScript]).toBeDefined();
    // The install phase's `npm pack --dry-run` must not run prepack (a second build).
    expect(summary.npmPackFlags).toContain('--ignore-scripts');
    expect(summary.meta.mainProgram).toBe(BIN_NAME);
    expect(summary.meta.license.spdxId).toBe(packageJson.license);
    expect(summary.meta.description).toBe(packageJson.description);
    expect(summary.src.root).toBe(REPO_ROOT);
    const sources = summary.src.files.map((file) => relative(REPO_ROOT, file)).sort();
    expect(sources).toEqual(expect.arrayContaining(['package.json', 'package-lock.json', 'src', 'hooks']));
    expect(
      sources.filter((file) => NOT_IN_A_CLONE.has(file) || file === '' || file.startsWith('fixtures') || file.startsWith('test')),
    ).toEqual([]);
    for (const file of summary.src.files) await stat(file);
  });

  it('fills every @placeholder@ of each hook (the CLI, the shared fixup script, the driver link, cuda_compat) and propagates the CLI', async () => {
    const { cudaCompat } = shimPackages();
    const summary = await evaluate(cudaCompat);
    const known: Readonly<Record<string, string>> = {
      cudaPatchelf: `${summary.out}/bin/${BIN_NAME}`,
      cudaPatchelfFixup: `${summary.out}/lib/node_modules/${packageJson.name}/hooks/cuda-patchelf-fixup.sh`,
      driverLink: driverLink(),
      cudaCompat,
    };
    const scripts = {
      autoPatchelfHook: 'auto-patchelf.sh',
      autoAddDriverRunpathHook: 'auto-add-driver-runpath.sh',
      autoAddCudaCompatRunpathHook: 'auto-add-cuda-compat-runpath.sh',
      removeStubsFromRunpathHook: 'remove-stubs-from-runpath.sh',
    } as const;
    expect(Object.keys(summary.hooks).sort()).toEqual(Object.keys(scripts).sort());
    for (const [attr, script] of Object.entries(scripts)) {
      const hook = summary.hooks[attr as keyof typeof scripts];
      expect(hook.script, attr).toBe(join(REPO_ROOT, 'hooks', script));
      const placeholders = [
        ...new Set([...(await readFile(hook.script, 'utf8')).matchAll(/@([A-Za-z_]\w*)@/g)].map((match) => match[1] ?? '')),
      ];
      expect(placeholders.length, `${script} has placeholders`).toBeGreaterThan(0);
      for (const name of placeholders) expect(hook.substitutions[name], `${attr}: @${name}@`).toBeDefined();
      for (const [name, value] of Object.entries(hook.substitutions)) expect(value, `${attr}: ${name}`).toBe(known[name]);
      expect(hook.propagatedBuildInputs, attr).toEqual([summary.out]);
      expect(hook.broken, attr).toBe(false);
      expect(hook.name, attr).toMatch(/^cuda-patchelf-[a-z-]+-hook$/);
    }
  });

  it('fills the cuda_compat hook with nothing where cudaPackages has no cuda_compat (every platform but Jetson)', async () => {
    const summary = await evaluate(null);
    expect(summary.hooks.autoAddCudaCompatRunpathHook.substitutions.cudaCompat).toBe('');
  });

  it('builds the package laid out as Nixpkgs installs it, and its hook packages fix up a build', async () => {
    const args = standInArgs(shimPackages().cudaCompat);
    const attrs = [
      'package',
      'package.autoAddCudaCompatRunpathHook',
      'package.autoAddDriverRunpathHook',
      'package.removeStubsFromRunpathHook',
      'package.autoPatchelfHook',
    ];
    const built = await mustExec(requireTool('nix-build'), ['--no-out-link', ...args, ...attrs.flatMap((attr) => ['-A', attr])], {
      env: nixEnv(),
      timeoutMs: 300_000,
    });
    const [out, compatHook, driverHook, stubsHook, autoPatchelfHook] = built.stdout.trim().split('\n') as [
      string,
      string,
      string,
      string,
      string,
    ];

    // $out/bin/<bin> runs node on the installed bundle; $out/lib/node_modules/<name> holds what npm pack lists.
    const packageOut = join(out, 'lib', 'node_modules', packageJson.name);
    const layout = (await mustExec(requireTool('find'), [packageOut, '-type', 'f'])).stdout
      .split('\n')
      .filter((line) => line.length > 0)
      .map((file) => relative(packageOut, file))
      .sort();
    expect(layout).toEqual(tarballFiles);
    const version = await execTool(join(out, 'bin', BIN_NAME), ['--version'], { env: cleanEnv({ PATH: '/usr/bin:/bin' }) });
    expect(version.stdout.trim(), describeExec('--version', version)).toBe(packageJson.version);

    for (const hook of [compatHook, driverHook, stubsHook, autoPatchelfHook]) {
      const setupHook = await readFile(join(hook, 'nix-support', 'setup-hook'), 'utf8');
      expect(setupHook, hook).not.toMatch(/@[A-Za-z_]\w*@/);
      expect(setupHook, hook).toContain(`${packageOut}/hooks/cuda-patchelf-fixup.sh`);
      expect((await readFile(join(hook, 'nix-support', 'propagated-build-inputs'), 'utf8')).trim(), hook).toBe(out);
    }

    // The hook packages as a derivation's nativeBuildInputs, with PATH as stdenv makes it from what they
    // propagate, and none of the hooks' environment fallbacks: the substituted paths must do.
    // The autoPatchelf hook among them, with the host glibc's bintools: the one command finds libc there,
    // and the program's libgreet.so where its runpath already names it, so the runpaths end as without it.
    const { bintools, interpreter } = await makeBintools(await makeTempDir('bintools', shimPackages().root));
    const build = await buildWithHooks(shimPackages(), {
      hooks: [autoPatchelfHook, compatHook, driverHook, stubsHook],
      cli: 'none',
      envPaths: false,
      attrs: { PATH: `${join(out, 'bin')}:${dirname(requireTool('gcc'))}:/usr/bin:/bin`, NIX_DEBUG: '1', NIX_BINTOOLS: bintools },
    });
    await expectFixedUp(build);
    expect(build.result.stderr).toContain(`${join(out, 'bin', BIN_NAME)}' 'apply' '--make-writable' '--auto-patchelf'`);
    expect(await interpreterOf(build.greet)).toBe(interpreter);
    await expectSameAsCheckout(build, ['compat', 'driver', 'stubs']);
  });
});
