// The text form of doctor's report: per file, the libraries in the loader's breadth-first order, each
// with where it comes from and why (one not found where it was asked for), the CUDA dlopens, then
// what is wrong and how to fix it.

import { basename } from 'node:path';
import type { DlopenRecord, FileReport, LoadRecord } from './doctor-report.js';

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

/** The callers whose dlopen runs first come first: the CUDA runtime's (dynamic or static), then the rest. */
const REASON_ORDER = ['cuda-runtime', 'static-runtime', 'driver', 'nvrtc', 'needs-cudart', 'needs-libcuda', 'note', 'dynstr'];

/** One line per name and outcome: the callers that get the same answer are listed together. */
function dlopenLines(records: readonly DlopenRecord[]): string[] {
  const groups = new Map<string, { record: DlopenRecord; callers: string[] }>();
  const names = [...new Set(records.map((r) => r.name))];
  const ordered = [...records].sort((a, b) => names.indexOf(a.name) - names.indexOf(b.name) || REASON_ORDER.indexOf(a.reason) - REASON_ORDER.indexOf(b.reason));
  for (const record of ordered) {
    const key = `${record.name}\0${record.status}\0${record.path ?? ''}`;
    const group = groups.get(key);
    if (group === undefined) groups.set(key, { record, callers: [basename(record.caller)] });
    else if (!group.callers.includes(basename(record.caller))) group.callers.push(basename(record.caller));
  }
  return [...groups.values()].map(({ record, callers }) => {
    const by = `(dlopen by ${callers.join(', ')})`;
    if (record.status === 'missing') return `  ${record.name} => not found ${by}`;
    if (record.status === 'fatal') return `  ${record.name} => ${record.path ?? ''}: cannot be loaded ${by}`;
    const how = record.rule === null ? 'already loaded' : ruleText(record.rule, record.owner, null);
    const missing = record.missing.length === 0 ? '' : `; needs ${record.missing.join(', ')}: not found`;
    const refused = record.refused === null ? '' : `; needs ${record.refused.name}: ${record.refused.path}: ${record.refused.message}`;
    return `  ${record.name} => ${record.path ?? ''}  [${how}] ${by}${missing}${refused}`;
  });
}

/**
 * Every DT_NEEDED (and preload) in the order the loader asks for them, as ldd lists them: an object
 * where it is first loaded, with where it comes from and why; a name not found or refused where it
 * was asked for, under the object that needs it; what the search passed over after it.
 */
function neededLines(report: FileReport): string[] {
  const lines: string[] = [];
  const depthOf = (path: string): number => (path === report.path ? 0 : (report.loads.find((load) => load.path === path)?.depth ?? 0));
  let next = 0;
  for (const needed of report.needed) {
    // The loads are these edges' first references to each object, in the same order.
    const load = report.loads[next];
    if (load !== undefined && load.name === needed.name && load.path === needed.path && load.neededBy === needed.from) {
      lines.push(loadLine(load));
      next++;
    }
    const indent = '  '.repeat(depthOf(needed.from) + 1);
    if (needed.status === 'missing') lines.push(`${indent}${needed.name} => not found (${needed.preload ? 'preloaded' : `needed by ${basename(needed.from)}`})`);
    if (needed.status === 'fatal') lines.push(`${indent}${needed.name} => ${needed.path ?? ''}: ${needed.message ?? ''} (${needed.preload ? 'not preloaded; the loader goes on' : 'the loader stops here'})`);
    for (const passed of needed.passedOver) lines.push(`${indent}  passed over ${passed.path}: ${passed.reason}`);
  }
  return lines;
}

export function fileText(report: FileReport, shownPath: string): string {
  const glibc = report.loader.glibc === null ? 'glibc version unknown' : `glibc ${report.loader.glibc}`;
  const lines = [`${shownPath}: ${report.kind}, ${report.machine}, loader ${report.loader.path} (${glibc}${report.interpreter.found ? '' : `; interpreter ${report.interpreter.path} missing`})`];
  lines.push(...neededLines(report));
  lines.push(...dlopenLines(report.dlopen));
  const libcuda = report.cuda.libcuda;
  if (libcuda !== null) {
    const version = libcuda.version === null ? 'version unknown' : `version ${libcuda.version} (${libcuda.versionSource ?? ''})`;
    lines.push(`  CUDA driver: ${libcuda.path}${libcuda.realPath !== libcuda.path ? ` -> ${libcuda.realPath}` : ''}: ${libcuda.kind}, ${version}`);
  }
  for (const finding of report.findings) {
    lines.push(`  ${finding.severity} (${finding.code}): ${finding.message}`);
    if (finding.fix !== null) lines.push(`    fix: ${finding.fix}`);
  }
  return lines.join('\n');
}
