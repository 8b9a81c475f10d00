// Where a run's time goes: a summary of a V8 CPU profile (`node --cpu-prof`), as self time per
// function and per part of the program (a source directory, a dependency, Node's internals, native
// calls, GC, idle). Frames of the bundled CLI are mapped back to src/ through its source maps.

import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { SourceMap } from 'node:module';
import type { Profiler, Runtime } from 'node:inspector';
import { dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** A frame of the profile, as the inspector protocol declares it. */
type CallFrame = Runtime.CallFrame;

export interface SelfTime {
  readonly name: string;
  readonly micros: number;
  readonly share: number;
}

export interface ProfileSummary {
  readonly totalMicros: number;
  readonly functions: readonly SelfTime[];
  readonly parts: readonly SelfTime[];
}

interface Place {
  /** `src/plan/plan-edit.ts`, `fast-glob`, `node:internal/fs/promises`, or '' for native frames. */
  readonly file: string;
  readonly line: number;
}

class Places {
  private readonly maps = new Map<string, SourceMap | null>();

  constructor(private readonly repoRoot: string) {}

  async of(frame: CallFrame): Promise<Place> {
    if (frame.url === '') return { file: '', line: 0 };
    if (!frame.url.startsWith('file://')) return { file: frame.url, line: frame.lineNumber + 1 };
    const path = fileURLToPath(frame.url);
    const map = await this.mapFor(path);
    const entry = map?.findEntry(frame.lineNumber, frame.columnNumber);
    if (entry !== undefined && 'originalSource' in entry) {
      return this.short(resolve(dirname(path), entry.originalSource), entry.originalLine + 1);
    }
    return this.short(path, frame.lineNumber + 1);
  }

  private short(path: string, line: number): Place {
    const dependency = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path);
    return { file: dependency?.[1] ?? relative(this.repoRoot, path), line };
  }

  private async mapFor(path: string): Promise<SourceMap | null> {
    if (!this.maps.has(path)) {
      const file = `${path}.map`;
      this.maps.set(path, existsSync(file) ? new SourceMap(JSON.parse(await readFile(file, 'utf8'))) : null);
    }
    return this.maps.get(path) ?? null;
  }
}

/** src/plan, node:internal/fs, a dependency; V8's own entries (GC, idle, program) by name. */
function partOf(frame: CallFrame, place: Place): string {
  if (place.file === '') return frame.functionName.startsWith('(') ? frame.functionName : 'native calls (fs and other bindings)';
  if (place.file.startsWith('src/') || place.file.startsWith('node:')) return place.file.split('/').slice(0, 2).join('/');
  return place.file;
}

function ranked(times: Map<string, number>, total: number, limit: number): SelfTime[] {
  return [...times.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, limit)
    .map(([name, micros]) => ({ name, micros, share: total > 0 ? micros / total : 0 }));
}

export async function summarizeCpuProfile(file: string, repoRoot: string, limit = 15): Promise<ProfileSummary> {
  const profile = JSON.parse(await readFile(file, 'utf8')) as Profiler.Profile;
  const places = new Places(repoRoot);
  const nodes = new Map<number, { frame: CallFrame; place: Place }>();
  const parents = new Map<number, number>();
  for (const node of profile.nodes) {
    nodes.set(node.id, { frame: node.callFrame, place: await places.of(node.callFrame) });
    for (const child of node.children ?? []) parents.set(child, node.id);
  }
  /** A native call is named with the nearest caller in this project or a dependency (not Node's internals). */
  const callerOf = (id: number): string => {
    for (let up = parents.get(id); up !== undefined; up = parents.get(up)) {
      const caller = nodes.get(up);
      if (caller !== undefined && caller.place.file !== '' && !caller.place.file.startsWith('node:'))
        return ` ← ${caller.frame.functionName} ${caller.place.file}:${caller.place.line}`;
    }
    return '';
  };
  const byFunction = new Map<string, number>();
  const byPart = new Map<string, number>();
  let total = 0;
  // Sample i lasts until sample i+1: timeDeltas[i+1].
  (profile.samples ?? []).forEach((id, i) => {
    const micros = profile.timeDeltas?.[i + 1] ?? 0;
    const node = nodes.get(id);
    if (node === undefined) return;
    const { frame, place } = node;
    const where = place.file !== '' ? ` ${place.file}:${place.line}` : frame.functionName.startsWith('(') ? '' : callerOf(id);
    const name = `${frame.functionName === '' ? '(anonymous)' : frame.functionName}${where}`;
    byFunction.set(name, (byFunction.get(name) ?? 0) + micros);
    const part = partOf(frame, place);
    byPart.set(part, (byPart.get(part) ?? 0) + micros);
    total += micros;
  });
  return { totalMicros: total, functions: ranked(byFunction, total, limit), parts: ranked(byPart, total, limit) };
}
