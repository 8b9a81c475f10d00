// The text form of doctor's report: per file, the libraries in the loader's breadth-first order, each
// with where it comes from and why (one not found where it was asked for, with where the loader
// looked), the CUDA dlopens, then what is wrong and how to fix it. The problems view (--problems)
// keeps, of the files with findings, the lines the findings rest on and the loads that lead to them.

import { basename } from 'node:path';
import { describeCudaCompatNote } from '../elf/elf.js';
import { LIBCUDA } from './cuda-dlopen.js';
import type { DlopenRecord, FileReport, LoadRecord, SearchedRecord } from './doctor-report.js';
import type { Finding } from './findings.js';
import type { NamedFile } from './named-file.js';

function ruleText(rule: string, owner: string | null, neededBy: string | null): string {
  const ownerName = owner === null ? '' : basename(owner);
  switch (rule) {
    case 'rpath':
      return `RPATH of ${ownerName}${owner !== null && neededBy !== null && owner !== neededBy ? ' (inherited)' : ''}`;
    case 'runpath':
      return `RUNPATH of ${ownerName}`;
    case 'ld-library-path':
      return 'LD_LIBRARY_PATH';
    case 'cache':
      return 'ld.so.cache';
    case 'default':
      return 'default directory';
    case 'path':
      return 'path as named';
    case 'interpreter':
      return 'the dynamic loader';
    default:
      return rule;
  }
}

function loadLine(load: LoadRecord): string {
  return `${'  '.repeat(load.depth)}${load.name} => ${load.path}  [${ruleText(load.rule, load.owner, load.neededBy)}]`;
}

/** The directories of a search list as people write them: no trailing '/', '""' for the working directory. */
function directoriesText(directories: readonly string[]): string {
  return directories
    .map((directory) => (directory === '' ? '""' : directory.length > 1 ? directory.replace(/\/$/, '') : directory))
    .join(':');
}

/** Where the loader looked for a name it did not find, in its order. */
function searchedLine(indent: string, searched: readonly SearchedRecord[]): string[] {
  if (searched.length === 0) return [];
  const lists = searched.map((list) => {
    if (list.rule === 'cache') return 'ld.so.cache';
    if (list.rule === 'default') return 'the default directories';
    return `${ruleText(list.rule, list.owner, null)} (${directoriesText(list.directories)})`;
  });
  return [`${indent}searched ${lists.join(', then ')}`];
}

/** The callers whose dlopen runs first come first: the CUDA runtime's (dynamic or static), then the rest. */
const REASON_ORDER = ['cuda-runtime', 'static-runtime', 'driver', 'nvrtc', 'needs-cudart', 'needs-libcuda', 'note', 'dynstr', 'sibling'];

/** The dlopens of one name with one outcome: the callers that get the same answer are listed together. */
interface DlopenGroup {
  readonly name: string;
  /**
   * Whether this dlopen fails (the name or one of its dependencies does not load) where a finding says it matters: NVRTC's
   * builtins, a `.note.dlopen` name.
   */
  readonly failsMatter: boolean;
  readonly callers: readonly string[];
  readonly lines: readonly string[];
}

function dlopenGroups(records: readonly DlopenRecord[]): DlopenGroup[] {
  const groups = new Map<string, DlopenRecord[]>();
  const names = [...new Set(records.map((r) => r.name))];
  const ordered = [...records].sort(
    (a, b) => names.indexOf(a.name) - names.indexOf(b.name) || REASON_ORDER.indexOf(a.reason) - REASON_ORDER.indexOf(b.reason),
  );
  for (const record of ordered) {
    const key = `${record.name}\0${record.status}\0${record.path ?? ''}`;
    groups.set(key, [...(groups.get(key) ?? []), record]);
  }
  return [...groups.values()].map((members) => {
    const record = members[0] as DlopenRecord;
    const callers = [...new Set(members.map((member) => member.caller))];
    const by = `(dlopen by ${callers.map((caller) => basename(caller)).join(', ')})`;
    const fails = record.status === 'missing' || record.status === 'fatal' || record.missing.length > 0 || record.refused !== null;
    const failsMatter = fails && members.some((member) => member.reason === 'nvrtc' || member.reason === 'note');
    if (record.status === 'missing') {
      // Each caller searches its own lists; said for the driver and the dlopens a finding may be about, not for the optional ones.
      const searched =
        record.name !== LIBCUDA && !failsMatter
          ? []
          : callers.flatMap((caller) =>
              searchedLine(
                `    ${callers.length > 1 ? `by ${basename(caller)}: ` : ''}`,
                members.find((member) => member.caller === caller)?.searched ?? [],
              ),
            );
      return { name: record.name, failsMatter, callers, lines: [`  ${record.name} => not found ${by}`, ...searched] };
    }
    if (record.status === 'fatal')
      return { name: record.name, failsMatter, callers, lines: [`  ${record.name} => ${record.path ?? ''}: cannot be loaded ${by}`] };
    const how = record.rule === null ? 'already loaded' : ruleText(record.rule, record.owner, null);
    const missing = record.missing.length === 0 ? '' : `; needs ${record.missing.join(', ')}: not found`;
    const refused = record.refused === null ? '' : `; needs ${record.refused.name}: ${record.refused.path}: ${record.refused.message}`;
    return {
      name: record.name,
      failsMatter,
      callers,
      lines: [`  ${record.name} => ${record.path ?? ''}  [${how}] ${by}${missing}${refused}`],
    };
  });
}

/** One DT_NEEDED (or preload), as the loader resolved it. */
interface NeededItem {
  /** The object it loads, where this is its first reference (the line that says where it comes from and why). */
  readonly load: LoadRecord | null;
  /** The object that needs it. */
  readonly from: string;
  /** The name not found or refused, and where the loader looked; empty when it loads. */
  readonly problem: readonly string[];
  /** What the search passed over on the way to a file it used. */
  readonly details: readonly string[];
}

/**
 * Every DT_NEEDED (and preload) in the order the loader asks for them, as ldd lists them: an object
 * where it is first loaded, with where it comes from and why; a name not found or refused where it
 * was asked for, under the object that needs it, with where the loader looked; what the search passed
 * over after it.
 */
function neededItems(report: FileReport): NeededItem[] {
  const items: NeededItem[] = [];
  const depthOf = (path: string): number => (path === report.path ? 0 : (report.loads.find((load) => load.path === path)?.depth ?? 0));
  let next = 0;
  for (const needed of report.needed) {
    // The loads are these edges' first references to each object, in the same order.
    const candidate = report.loads[next];
    const load =
      candidate !== undefined && candidate.name === needed.name && candidate.path === needed.path && candidate.neededBy === needed.from
        ? candidate
        : null;
    if (load !== null) next++;
    const indent = '  '.repeat(depthOf(needed.from) + 1);
    const passed = needed.passedOver.map((p) => `${indent}  passed over ${p.path}: ${p.reason}`);
    const problem: string[] = [];
    if (needed.status === 'missing')
      problem.push(
        `${indent}${needed.name} => not found (${needed.preload ? 'preloaded' : `needed by ${basename(needed.from)}`})`,
        ...searchedLine(`${indent}  `, needed.searched),
      );
    if (needed.status === 'fatal')
      problem.push(
        `${indent}${needed.name} => ${needed.path ?? ''}: ${needed.message ?? ''} ` +
          `(${needed.preload ? 'not preloaded; the loader goes on' : 'the loader stops here'})`,
      );
    items.push(
      problem.length > 0
        ? { load, from: needed.from, problem: [...problem, ...passed], details: [] }
        : { load, from: needed.from, problem, details: passed },
    );
  }
  return items;
}

function headerLine(report: FileReport, shownPath: string): string {
  const glibc = report.loader.glibc === null ? 'glibc version unknown' : `glibc ${report.loader.glibc}`;
  // Another machine's CPU (a --root of another architecture) is assumed: its hwcaps subdirectories may not be the ones its loader searches.
  const cpu = report.loader.cpu === 'assumed' ? ', CPU assumed' : '';
  const wrapper =
    report.wrapper === null
      ? ''
      : '; ' +
        `${report.wrapper.ldLibraryPath === null ? 'LD_LIBRARY_PATH unset' : `LD_LIBRARY_PATH=${report.wrapper.ldLibraryPath}`} ` +
        'from the wrapper';
  return (
    `${shownPath}: ${report.kind}, ${report.machine}, loader ${report.loader.path} ` +
    `(${glibc}${cpu}${report.interpreter.found ? '' : `; interpreter ${report.interpreter.path} missing`})${wrapper}`
  );
}

function driverLine(report: FileReport): string[] {
  const libcuda = report.cuda.libcuda;
  if (libcuda === null) return [];
  const version = libcuda.version === null ? 'version unknown' : `version ${libcuda.version} (${libcuda.versionSource ?? ''})`;
  const note = libcuda.compatNote;
  const noted = note === null ? '' : `; note: ${'error' in note ? `unreadable (${note.error})` : describeCudaCompatNote(note)}`;
  const real = libcuda.realPath !== libcuda.path ? ` -> ${libcuda.realPath}` : '';
  return [`  CUDA driver: ${libcuda.path}${real}: ${libcuda.kind}, ${version}${noted}`];
}

function findingLines(report: { readonly findings: readonly Finding[] }): string[] {
  return report.findings.flatMap((finding) => [
    `  ${finding.severity} (${finding.code}): ${finding.message}`,
    ...(finding.fix === null ? [] : [`    fix: ${finding.fix}`]),
  ]);
}

export function fileText(report: FileReport, shownPath: string): string {
  const needed = neededItems(report).flatMap((item) => [
    ...(item.load === null ? [] : [loadLine(item.load)]),
    ...item.problem,
    ...item.details,
  ]);
  const dlopens = dlopenGroups(report.dlopen).flatMap((group) => group.lines);
  return [headerLine(report, shownPath), ...needed, ...dlopens, ...driverLine(report), ...findingLines(report)].join('\n');
}

/** The dlopen names a finding is about (besides dlopen-missing's, the failing dlopens of NVRTC and `.note.dlopen`). */
const DLOPENS_OF_FINDING: Readonly<Record<string, readonly string[]>> = {
  'libcuda-missing': [LIBCUDA],
  'libcuda-stub': [LIBCUDA],
  'cuda-803': [LIBCUDA],
  'driver-version-unknown': [LIBCUDA],
  'driver-mismatch': [LIBCUDA],
  'compat-dependency-missing': [LIBCUDA],
  'libcuda-dependency-missing': [LIBCUDA],
  'libcuda-differs': [LIBCUDA],
  'driver-libraries-mixed': [LIBCUDA, 'libnvidia-ptxjitcompiler.so.1'],
  'nvml-mismatch': ['libnvidia-ml.so.1'],
};

/**
 * The problems view of one file, or null when it has no findings: the lines its findings rest on (a
 * name not found or refused and where the loader looked, the dlopens a finding is about, the CUDA
 * driver), each after the loads that lead to it with where each comes from and why, then the findings.
 */
export function problemsText(report: FileReport, shownPath: string): string | null {
  if (report.findings.length === 0) return null;
  const items = neededItems(report);
  const names = new Set(report.findings.flatMap((finding) => DLOPENS_OF_FINDING[finding.code] ?? []));
  const dlopenMissing = report.findings.some((finding) => finding.code === 'dlopen-missing');
  const groups = dlopenGroups(report.dlopen).filter((group) => (dlopenMissing && group.failsMatter) || names.has(group.name));
  // The objects whose load lines are kept: those that need a name not found, the callers of the dlopens kept, a libcuda needed
  // directly, and every object that loaded one of them.
  const byPath = new Map(report.loads.map((load) => [load.path, load] as const));
  const chained = new Set<string>();
  const chain = (path: string): void => {
    for (let load = byPath.get(path); load !== undefined && !chained.has(load.path); load = byPath.get(load.neededBy))
      chained.add(load.path);
  };
  for (const item of items) if (item.problem.length > 0) chain(item.from);
  for (const group of groups) for (const caller of group.callers) chain(caller);
  if (names.has(LIBCUDA)) for (const load of report.loads) if (load.name === LIBCUDA) chain(load.path);
  const needed = items.flatMap((item) => [
    ...(item.load !== null && chained.has(item.load.path) ? [loadLine(item.load)] : []),
    ...item.problem,
  ]);
  const driver = names.has(LIBCUDA) ? driverLine(report) : [];
  return [headerLine(report, shownPath), ...needed, ...groups.flatMap((group) => group.lines), ...driver, ...findingLines(report)].join(
    '\n',
  );
}

/**
 * A file named on the command line that is not a dynamic ELF file: what it is, the program a wrapper
 * runs (its report follows), and the findings. In the problems view, null when it has none.
 */
export function namedText(named: NamedFile, shownPath: string, problemsOnly: boolean): string | null {
  if (problemsOnly && named.findings.length === 0) return null;
  const runs =
    named.runs === null
      ? ''
      : ': that program is diagnosed ' +
        `${named.runs.ldLibraryPath === null ? 'with LD_LIBRARY_PATH unset' : `with LD_LIBRARY_PATH=${named.runs.ldLibraryPath}`}`;
  return [`${shownPath}: ${named.description}${runs}`, ...findingLines(named)].join('\n');
}
