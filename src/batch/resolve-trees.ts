// auto-patchelf's first phase, in the thread that walks the batch, before any file is planned: one walk
// of the trees reads the facts of every ELF file (few small reads through the ELF facade), the
// library index is built from the trees' libraries, the directories their runpaths name and --libs
// (library-index-walk.ts), and each file of the trees is resolved (src/resolve/). What the second
// phase needs of it travels with each file as plain data (`FileItem.resolver`): worker threads never
// see the index. So does what phase 1 read (`FileItem.head`): phase 2 does not open a file that is not
// ELF again, and reads an ELF file's blocks from memory (docs/auto-patchelf.md, "What is read").

import { existsSync, readdirSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { asciiByteString, type ByteString, bytesToByteString, byteStringToText, textToByteString } from '../elf/elf.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import type { Semantics } from '../hook-engine/compose-hooks.js';
import type { Hook } from '../hook-engine/hook.js';
import { readCpuInfo } from '../loader/cpu-model.js';
import { LoaderRegistry } from '../loader/emulated-loader.js';
import { hostAbi } from '../loader/machine-abi.js';
import { ObjectFactsCache } from '../loader/object-facts.js';
import { SystemRoot } from '../loader/system-root.js';
import { holdsOnlyGlibc, isGlibcLibrary } from '../loader/glibc-libraries.js';
import { isLibraryName } from '../loader/library-listings.js';
import type { IgnoredMissing } from '../resolve/ignore-missing.js';
import { targetSkipReason, type MachineAndOsAbi, type TargetSkipReason } from '../resolve/os-abi.js';
import {
  resolveFile,
  type FileResolution,
  type ResolvedDirectory,
  type ResolverFileSystem,
  type ResolverOptions,
} from '../resolve/resolve-file.js';
import type { WalkItem } from '../walk/walk-trees.js';
import { FirstNames } from './first-names.js';
import type { InterruptPoll } from './interrupt.js';
import { LibraryIndexWalk, realPathOf } from './library-index-walk.js';
import type { FileItem } from './process-file.js';
import { readLibraryFacts, readWalkedFileFacts, type ResolverFacts } from './resolver-facts.js';
import { RunpathProver } from './runpath-proof.js';
import { settleRunpath } from './settle-runpath.js';
import type { KnownHead } from './walked-file.js';

/**
 * What phase 1 keeps of what it read, in all, for phase 2 to read through (the first files' blocks, a
 * few KiB each): past it, a file's bytes are read again in phase 2.
 */
const SEED_BUDGET = 16 * 1024 * 1024;

/** The resolver's command line, as plain data (paths as the user gave them, runpath entries as byte strings). */
export interface AutoPatchelfOptions {
  /** --libs: directories (or files), scanned in order, not recursively. */
  readonly libs: readonly string[];
  /** --runtime-dependencies and --append-rpaths, byte strings. */
  readonly runtimeDependencies: readonly ByteString[];
  readonly appendRpaths: readonly ByteString[];
  /** --ignore-missing: its patterns compiled once, when the command line is read. */
  readonly ignoredMissing: IgnoredMissing;
  /** --interpreter: its path (a byte string) and the target's machine and OS ABI; null without it. */
  readonly interpreter: (MachineAndOsAbi & { readonly path: ByteString }) | null;
  /** --libc-dir, or the interpreter's real directory; null: no libc rule. */
  readonly libcDir: string | null;
  readonly keepLibc: boolean;
  readonly relativeToTree: boolean;
  /**
   * --root: the system the trees are patched for, on this machine; null: this machine's. Every path above
   * is this machine's; what is written is the target's (a directory inside the root, without it).
   */
  readonly root: string | null;
  /** The machine this runs on (Node's process.arch) and its working directory: the loader model's. */
  readonly host: { readonly arch: string; readonly cwd: string };
}

/** What the resolver found for one file, for the reports (names and directories are byte strings). */
export interface ResolverReport {
  /** R: each directory, how it is written, and the dependencies it resolves. */
  readonly resolved: readonly ResolvedDirectory[];
  /** Dependencies nothing resolved (each its alternatives), and those of them --ignore-missing matched. */
  readonly missing: readonly (readonly ByteString[])[];
  readonly ignoredMissing: readonly (readonly ByteString[])[];
  /** The interpreter --interpreter gives the file, when it has another one. */
  readonly interpreter: { readonly old: ByteString; readonly new: ByteString } | null;
}

export interface TreeResolution {
  /**
   * The walk, each file of the trees the resolver applies to carrying its answer; a file whose runpath
   * cannot be ordered or proven is an error item (runpath-proof.ts): it is reported, and not written.
   */
  readonly items: readonly (WalkItem | FileItem)[];
  /** By path: the files the resolver applies to. */
  readonly reports: ReadonlyMap<string, ResolverReport>;
  /** Files of the trees the resolver leaves to the other hooks, by reason. */
  readonly skipped: Partial<Record<TargetSkipReason, number>>;
  /** Warnings, one line each, in walk order: a name found in two directories, a malformed note. */
  readonly warnings: readonly string[];
  /** libc's directory, and whether only glibc's own libraries in it count as libc's (it holds more); null without one. */
  readonly libc: { readonly directory: string; readonly glibcOnly: boolean } | null;
}

/**
 * Whether every library of libc's directory counts as libc's (it holds glibc alone: Nix's glibc lib/,
 * or the anchor's rule, --nixpkgs-compat), or only glibc's own (a Debian or Ubuntu interpreter's).
 */
function libcCountsAll(libcDir: string, semantics: Semantics): boolean {
  if (semantics === 'nixpkgs-compat') return true;
  try {
    return holdsOnlyGlibc(readdirSync(libcDir, { encoding: 'buffer' }).map(bytesToByteString).filter(isLibraryName));
  } catch {
    return true;
  }
}

/** The real path of a path (a byte string) on this machine, or inside --root as the target resolves it; null where there is none. */
function realPathIn(root: SystemRoot | null, path: ByteString): ByteString | null {
  if (root === null) {
    const real = realPathOf(byteStringToText(path));
    return real === null ? null : textToByteString(real);
  }
  const inRoot = root.pathOf(byteStringToText(path));
  const real = inRoot === null ? null : root.realPath(inRoot);
  return typeof real === 'string' ? textToByteString(root.hostPathOf(real)) : null;
}

/**
 * What the rules ask of the disk, byte strings in and out; the libc directory's answers and real paths
 * cached (the rules ask of the same directories for every file, and the disk does not change during
 * phase 1). With --root, real paths are the target's: a link in the root is followed inside it, as the
 * target will.
 */
function fileSystemOf(libcDir: string | null, countsAll: boolean, root: SystemRoot | null): ResolverFileSystem {
  const inLibc = new Map<ByteString, boolean>();
  const realPaths = new Map<ByteString, ByteString | null>();
  return {
    inLibcDir: (name) => {
      if (libcDir === null) return false;
      let known = inLibc.get(name);
      if (known === undefined) {
        known = existsSync(join(libcDir, byteStringToText(name)));
        inLibc.set(name, known);
      }
      return known;
    },
    libcOwns: (name) => countsAll || isGlibcLibrary(name),
    isFile: (path) => {
      try {
        return statSync(byteStringToText(path)).isFile();
      } catch {
        return false;
      }
    },
    realPath: (path) => {
      let real = realPaths.get(path);
      if (real === undefined) {
        real = realPathIn(root, path);
        realPaths.set(path, real);
      }
      return real;
    },
  };
}

/**
 * The resolution as the target system will read it: with --root, an absolute entry (a directory of this
 * machine inside the root) is written as the target names it; `$ORIGIN` entries are the same in both.
 */
function targetSpelling(root: SystemRoot | null): (resolution: FileResolution) => FileResolution {
  if (root === null) return (resolution) => resolution;
  const spell = (entry: ByteString): ByteString => (entry.startsWith('/') ? (root.pathOf(byteStringToText(entry)) ?? entry) : entry);
  return (resolution) => ({
    ...resolution,
    resolved: resolution.resolved.map((directory) => ({ ...directory, entry: spell(directory.entry) })),
    runpath: resolution.runpath?.map((placed) => ({ ...placed, entry: spell(placed.entry) })) ?? null,
  });
}

/**
 * Phase 1 of a batch with --auto-patchelf: `walk` is the trees' walk (consumed here, and handed back as
 * `items` for phase 2). `hooks` tell the driver library rule which hooks are on. `poll` hears Ctrl-C
 * between files: phase 1 then stops, resolving nothing.
 */
export async function resolveTrees(
  roots: readonly string[],
  walk: Iterable<WalkItem>,
  options: AutoPatchelfOptions,
  semantics: Semantics,
  hooks: readonly Hook[],
  poll: InterruptPoll,
): Promise<TreeResolution> {
  const target =
    options.root === null ? new SystemRoot('/', textToByteString(options.host.cwd)) : new SystemRoot(options.root, asciiByteString('/'));
  const registry = new LoaderRegistry(
    {
      root: target,
      ldLibraryPath: null,
      hostAbi: hostAbi(options.host.arch),
      cpuInfo: readCpuInfo(),
    },
    new ObjectFactsCache(),
  );
  const indexWalk = new LibraryIndexWalk(roots);
  const walked = [...walk];
  const factsOf = new Map<string, ResolverFacts>();
  const heads = new Map<string, KnownHead>();
  const runpathDirectories: string[] = [];
  let seedBytes = 0;
  for (const item of walked) {
    // Interrupted: nothing is resolved, and the batch, which sees the flag too, plans nothing.
    if (await poll.interrupted()) return { items: walked, reports: new Map(), skipped: {}, warnings: [], libc: null };
    const isLink = item.kind === 'skip' && item.reason === 'symlink';
    if (item.kind === 'file') {
      const read = await readWalkedFileFacts(item.path, SEED_BUDGET - seedBytes, registry.objects);
      if (read === null) continue;
      if (read.kind !== 'elf') {
        heads.set(item.path, read);
        continue;
      }
      seedBytes += read.seed.blocks.reduce((sum, block) => sum + block.bytes.length, 0);
      heads.set(item.path, { kind: 'elf', seed: read.seed });
      if (read.facts.skip === null) factsOf.set(item.path, read.facts);
      runpathDirectories.push(...indexWalk.addLibrary(item.path, false, read.facts));
    } else if (isLink && isLibraryName(basename(item.path))) {
      const facts = await readLibraryFacts(item.path);
      if (facts !== null) runpathDirectories.push(...indexWalk.addLibrary(item.path, true, facts));
    }
  }
  await indexWalk.scan(runpathDirectories, true);
  await indexWalk.scan(options.libs, false);

  const hookNames = new Set(hooks.map((hook) => hook.name));
  const resolverOptions: ResolverOptions = {
    semantics:
      semantics === 'nixpkgs-compat'
        ? { kind: 'nixpkgs-compat' }
        : {
            kind: 'default',
            driverHooks: { driver: hookNames.has('driver'), cudaCompat: hookNames.has('cuda-compat') },
            relativeToTrees: options.relativeToTree ? roots.map((root) => textToByteString(resolve(root))) : [],
          },
    keepLibc: options.keepLibc,
    runtimeDependencies: options.runtimeDependencies,
    appendRunpaths: options.appendRpaths,
  };
  const libcDir = options.libcDir;
  const countsAll = libcDir === null || libcCountsAll(libcDir, semantics);
  const fileSystem = fileSystemOf(libcDir, countsAll, options.root === null ? null : target);
  const prover = new RunpathProver(registry, options.interpreter?.path ?? null);
  const written = targetSpelling(options.root === null ? null : target);
  const reports = new Map<string, ResolverReport>();
  const skipped: Partial<Record<TargetSkipReason, number>> = {};
  const warnings: string[] = [];
  const warnedNames = new Set<ByteString>();
  const inodes = new FirstNames();
  const items: (WalkItem | FileItem)[] = [];
  for (const item of walked) {
    const head = heads.get(item.path);
    if (item.kind !== 'file' || head === undefined) {
      items.push(item);
      continue;
    }
    const facts = factsOf.get(item.path);
    // A later name of a hard-linked file is patched through its first name (phase 2 skips it): it is
    // resolved, and reported, once.
    if (facts === undefined || head.kind !== 'elf' || inodes.recordName(item.path, head.seed.identity) !== null) {
      items.push({ ...item, head });
      continue;
    }
    const why = targetSkipReason(facts, options.interpreter);
    if (why !== null) {
      skipped[why] = (skipped[why] ?? 0) + 1;
      items.push({ ...item, head });
      continue;
    }
    for (const line of facts.malformedNotes) warnings.push(`${item.path}: ${line}; ignored`);
    const resolution = written(
      resolveFile(
        { ...facts, directory: textToByteString(dirname(item.path)), hasInterpreter: facts.interpreter !== null },
        indexWalk.index,
        resolverOptions,
        fileSystem,
      ),
    );
    for (const { found } of resolution.dependencies) {
      if (found?.by.rule !== 'index' || found.by.shadowed === null || warnedNames.has(found.name)) continue;
      warnedNames.add(found.name);
      const name = basename(byteStringToText(found.name));
      const [used, other] = [byteStringToText(found.by.directory), byteStringToText(found.by.shadowed)];
      const why = found.by.ownRunpath ? "the file's own runpath names it" : 'found first';
      warnings.push(`${name} is in ${used} and in ${other}: ${join(used, name)} is used (${why})`);
    }
    const interpreter = options.interpreter;
    reports.set(item.path, {
      resolved: resolution.resolved,
      missing: resolution.missing.filter((alternatives) => !options.ignoredMissing(alternatives)),
      ignoredMissing: resolution.missing.filter(options.ignoredMissing),
      interpreter:
        interpreter !== null && facts.interpreter !== null && facts.interpreter !== interpreter.path
          ? { old: facts.interpreter, new: interpreter.path }
          : null,
    });
    const settled = await settleRunpath(
      {
        path: item.path,
        relativePath: item.relativePath,
        facts,
        resolution,
        libcDir: libcDir === null ? null : textToByteString(libcDir),
        semantics,
        hooks,
      },
      prover,
    );
    if (settled.kind === 'refused') {
      items.push({ kind: 'error', path: item.path, error: new CudaPatchelfError('unsupported', settled.message, { file: item.path }) });
      continue;
    }
    items.push({
      ...item,
      head,
      resolver: { runpath: settled.runpath, interpreter: facts.interpreter === null ? null : (interpreter?.path ?? null) },
    });
  }
  const libc = libcDir === null ? null : { directory: libcDir, glibcOnly: !countsAll };
  return { items, reports, skipped, warnings, libc };
}
