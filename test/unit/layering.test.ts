// The dependency rule of ARCHITECTURE.md, checked on the sources: data flows one way (elf → plan →
// write, hook-engine beside plan, edit and batch composing them, cli on top), and only the command line
// touches `process`. The imports of every src/**/*.ts file are read with a small lexer (comments and
// string contents blanked, so that an import in a comment or a message does not count) and compared
// with the table below, and so is what each file loads through other layers: a layer may not reach
// one its row does not name by way of another. Imports that break the rule today are listed in
// KNOWN_DEBTS: a new one fails, and so does a debt that has been paid but is still listed, so the list
// only shrinks.

import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SRC = fileURLToPath(new URL('../../src/', import.meta.url));

const LAYERS = [
  'errors',
  'elf',
  'walk',
  'hook-engine',
  'resolve',
  'plan',
  'write',
  'edit',
  'loader',
  'batch',
  'doctor',
  'driver-link',
  'cli',
] as const;
type Layer = (typeof LAYERS)[number];

/** What a layer may import from another layer: all of it, or only some modules, or only types. */
interface Allowance {
  /** File names inside the target layer; all of them when absent. */
  readonly modules?: readonly string[];
  /** Only `import type` / `{ type X }` imports (erased at build time). */
  readonly typeOnly?: boolean;
}

/**
 * The ELF reader's one public module (src/elf/elf.ts). The pure layers, which must not load the reader,
 * name the pure modules behind it instead.
 */
const READER: Allowance = { modules: ['elf.ts'] };

/**
 * Its own layer is always allowed; `any` is for the command line, which composes everything. A row
 * names every layer its code may depend on, directly or through another layer; the module and
 * type-only limits are for its own imports.
 */
const ALLOWED: { readonly [L in Layer]: 'any' | Partial<Record<Layer, Allowance>> } = {
  errors: {},
  elf: { errors: {} },
  walk: { errors: {} },
  'hook-engine': { elf: { modules: ['byte-string.ts', 'constants.ts', 'runpath-list.ts'] }, errors: {} },
  // autoPatchelf's dependency resolution: facts, index and options in, a resolution out; nothing of the disk.
  resolve: { elf: { modules: ['byte-string.ts', 'constants.ts', 'runpath-list.ts'] }, errors: {} },
  plan: { elf: READER, errors: {} },
  // Plans as data: nothing of ELF. The rewrite's temporary name is the walk's rule too.
  write: { plan: { modules: ['plan.ts'], typeOnly: true }, walk: { modules: ['rewrite-temporary.ts'] }, errors: {} },
  // walk/ through write/ (the rewrite's temporary name).
  edit: { elf: READER, plan: {}, write: {}, walk: { modules: ['rewrite-temporary.ts'] }, errors: {} },
  // The glibc loader emulated (search lists, ld.so.cache, link namespace, system root), read only:
  // doctor reports on it, and the batch proves a resolved runpath with it before it is written.
  loader: { elf: READER, errors: {} },
  // Walking, scheduling and the summary: a file's path through elf/ and plan/ is edit/'s pipeline.
  batch: {
    elf: READER,
    walk: {},
    edit: {},
    plan: { modules: ['plan.ts'], typeOnly: true },
    'hook-engine': {},
    resolve: {},
    write: {},
    loader: {},
    errors: {},
  },
  // The pipeline's skip policy, which doctor applies to the files of a tree as apply does.
  // The stubs patterns, for the fix of a stub libcuda that says what the remove-stubs hook will match.
  doctor: {
    elf: READER,
    loader: {},
    walk: {},
    edit: { modules: ['skip-reason.ts'] },
    'hook-engine': { modules: ['stubs-pattern.ts'] },
    errors: {},
  },
  // The driver link made where programs run: the driver found through the loader's cache, NVIDIA's rule
  // and the driver versions as doctor knows them, the switch under the write lock of one file.
  'driver-link': {
    elf: READER,
    loader: { modules: ['ld-cache.ts', 'ld-cache-lookup.ts', 'machine-abi.ts'] },
    doctor: { modules: ['compat-rule.ts', 'driver-version.ts', 'libcuda-facts.ts'] },
    write: { modules: ['file-lock.ts'] },
    errors: {},
  },
  cli: 'any',
};

/**
 * Imports that break the table today, each with why it is there. Paying one means deleting its line
 * here: the last test fails while a listed import no longer exists.
 */
const KNOWN_DEBTS: readonly { readonly from: string; readonly to: string; readonly why: string }[] = [];

/** Packages and Node modules the pure layers may use: no file system, no threads, no sockets. */
const PURE_LAYER_PACKAGES: Partial<Record<Layer, readonly string[]>> = {
  errors: [],
  plan: [],
  // resolve() for excludeUnder, picomatch for include/exclude globs and stubs patterns.
  'hook-engine': ['node:path', 'picomatch'],
  resolve: ['node:path'],
};

/** The entry point that owns `process` (argv, exit code, streams, TTY, CPU count). */
const PROCESS_OWNER = 'cli/main.ts';
/** The installed command that runs it (bin.ts): it reads the build's one environment variable. */
const BIN_LOADER = 'cli/bin.ts';
/** Worker thread entry points: they may read what their thread was started with. */
const WORKER_ENTRY_POINTS: readonly string[] = ['batch/patch-worker.ts'];
/** Other modules that use `process` today; each should get what it needs from cli/main.ts instead. */
const PROCESS_DEBTS: readonly { readonly file: string; readonly why: string }[] = [
  { file: 'write/rewrite-file.ts', why: 'process.pid names the rewrite temporary file' },
];

// ---------------------------------------------------------------------------------------------------
// The scan.

/**
 * The source with comments replaced by spaces and, when `blankStrings`, the contents of string and
 * template literals too (template `${…}` code is kept). Lengths and newlines are preserved, so
 * positions in one output are positions in the other. Regex literals are recognised by the token
 * before the slash, which is enough for this code base.
 */
function blankOut(source: string, blankStrings: boolean): string {
  const n = source.length;
  const blank = (text: string): string => text.replace(/[^\n]/g, ' ');
  let out = '';
  let i = 0;
  let depth = 0;
  const templateResumes: number[] = [];

  const templateText = (): void => {
    while (i < n) {
      const ch = source[i] ?? '';
      if (ch === '\\') {
        const escaped = source.slice(i, i + 2);
        out += blankStrings ? blank(escaped) : escaped;
        i += 2;
      } else if (ch === '`') {
        out += ch;
        i++;
        return;
      } else if (ch === '$' && source[i + 1] === '{') {
        out += '${';
        i += 2;
        templateResumes.push(depth);
        depth++;
        return;
      } else {
        out += blankStrings ? blank(ch) : ch;
        i++;
      }
    }
  };

  while (i < n) {
    const ch = source[i] ?? '';
    const next = source[i + 1];
    if (ch === '/' && next === '/') {
      const end = source.indexOf('\n', i);
      const stop = end < 0 ? n : end;
      out += blank(source.slice(i, stop));
      i = stop;
    } else if (ch === '/' && next === '*') {
      const end = source.indexOf('*/', i + 2);
      const stop = end < 0 ? n : end + 2;
      out += blank(source.slice(i, stop));
      i = stop;
    } else if (ch === "'" || ch === '"') {
      let j = i + 1;
      while (j < n && source[j] !== ch && source[j] !== '\n') j += source[j] === '\\' ? 2 : 1;
      const inner = source.slice(i + 1, Math.min(j, n));
      out += ch + (blankStrings ? blank(inner) : inner) + (j < n && source[j] === ch ? ch : '');
      i = j < n && source[j] === ch ? j + 1 : j;
    } else if (ch === '`') {
      out += ch;
      i++;
      templateText();
    } else if (
      ch === '/' &&
      /(?:^|[(,=:[!&|?{};+\-*%<>~^]|\b(?:return|typeof|case|in|of|delete|void|throw|new))\s*$/.test(out.slice(-40))
    ) {
      let j = i + 1;
      let inClass = false;
      while (j < n && source[j] !== '\n' && (inClass || source[j] !== '/')) {
        if (source[j] === '\\') j++;
        else if (source[j] === '[') inClass = true;
        else if (source[j] === ']') inClass = false;
        j++;
      }
      j++;
      while (j < n && /[a-z]/i.test(source[j] ?? '')) j++;
      out += source.slice(i, j);
      i = j;
    } else {
      if (ch === '{') depth++;
      if (ch === '}') {
        depth--;
        if (templateResumes.length > 0 && templateResumes[templateResumes.length - 1] === depth) {
          templateResumes.pop();
          out += ch;
          i++;
          templateText();
          continue;
        }
      }
      out += ch;
      i++;
    }
  }
  return out;
}

interface ImportSite {
  readonly specifier: string;
  readonly typeOnly: boolean;
  readonly line: number;
  readonly kind: 'static' | 'side-effect' | 'dynamic' | 'url';
}

/** Whether an import/export clause names types only: `type {…}`, or `{ type A, type B }`. */
function clauseIsTypeOnly(typeKeyword: boolean, clause: string): boolean {
  if (typeKeyword) return true;
  const named = /^\s*\{([^}]*)\}\s*$/.exec(clause);
  if (named === null) return false;
  const names = (named[1] ?? '')
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '');
  return names.length > 0 && names.every((name) => /^type\s/.test(name));
}

/** Every module a source file imports or re-exports, by its specifier as written. */
function importsOf(source: string): ImportSite[] {
  const code = blankOut(source, false);
  const bare = blankOut(source, true);
  const lineAt = (index: number): number => source.slice(0, index).split('\n').length;
  // A match counts only where its keyword is code (not inside a string or template text).
  const isCode = (index: number, keyword: string): boolean => bare.startsWith(keyword, index);
  const sites: ImportSite[] = [];
  for (const m of code.matchAll(/\b(import|export)(\s+type\b)?([^;'"`]*?)\bfrom\s*(['"])([^'"\n]+)\4/g)) {
    const keyword = m[1] ?? '';
    if (!isCode(m.index, keyword)) continue;
    sites.push({
      specifier: m[5] ?? '',
      typeOnly: clauseIsTypeOnly(m[2] !== undefined, m[3] ?? ''),
      line: lineAt(m.index),
      kind: 'static',
    });
  }
  for (const m of code.matchAll(/\bimport\s*(['"])([^'"\n]+)\1/g)) {
    if (isCode(m.index, 'import')) sites.push({ specifier: m[2] ?? '', typeOnly: false, line: lineAt(m.index), kind: 'side-effect' });
  }
  const dynamicCalls = bare.match(/\bimport\s*\(/g)?.length ?? 0;
  let dynamicLiterals = 0;
  for (const m of code.matchAll(/\bimport\s*\(\s*(['"`])([^'"`\n]+)\1\s*\)/g)) {
    if (!isCode(m.index, 'import')) continue;
    dynamicLiterals++;
    sites.push({ specifier: m[2] ?? '', typeOnly: false, line: lineAt(m.index), kind: 'dynamic' });
  }
  if (dynamicCalls !== dynamicLiterals)
    throw new Error(`an import() whose module is not a string literal cannot be checked (${dynamicCalls - dynamicLiterals} of them)`);
  for (const m of code.matchAll(/\bnew\s+URL\s*\(\s*(['"])(\.[^'"\n]+)\1\s*,\s*import\.meta\.url\s*\)/g)) {
    if (isCode(m.index, 'new')) sites.push({ specifier: m[2] ?? '', typeOnly: false, line: lineAt(m.index), kind: 'url' });
  }
  return sites.sort((a, b) => a.line - b.line);
}

function sourceFiles(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.isFile() && entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** A path relative to src/, `/`-separated: `batch/patch-tree.ts`. */
const inSrc = (path: string): string => relative(SRC, path).split(sep).join('/');
const layerOf = (file: string): string => file.split('/')[0] ?? '';
const moduleName = (file: string): string => file.slice(file.indexOf('/') + 1);

interface Edge {
  readonly from: string;
  /** A file under src/ for a relative specifier; the specifier itself for a package or Node module. */
  readonly to: string;
  readonly internal: boolean;
  readonly typeOnly: boolean;
  readonly line: number;
}

const files = sourceFiles(SRC).map(inSrc).sort();
const fileSet = new Set(files);
const sources = new Map(files.map((file) => [file, readFileSync(join(SRC, file), 'utf8')]));

const edges: Edge[] = files.flatMap((file) =>
  importsOf(sources.get(file) ?? '').map((site): Edge => {
    if (!site.specifier.startsWith('.'))
      return { from: file, to: site.specifier, internal: false, typeOnly: site.typeOnly, line: site.line };
    const target = resolve(SRC, dirname(file), site.specifier.replace(/\.c?js$/, '.ts'));
    return { from: file, to: inSrc(target), internal: true, typeOnly: site.typeOnly, line: site.line };
  }),
);

/** Why an internal import breaks the table, or null when it is allowed. */
function breach(edge: Edge): string | null {
  const fromLayer = layerOf(edge.from) as Layer;
  const toLayer = layerOf(edge.to);
  const rules = ALLOWED[fromLayer];
  if (fromLayer === toLayer || rules === 'any') return null;
  const allowance = (LAYERS as readonly string[]).includes(toLayer) ? rules[toLayer as Layer] : undefined;
  if (allowance === undefined) return `${fromLayer} → ${toLayer} is not allowed`;
  if (allowance.modules !== undefined && !allowance.modules.includes(moduleName(edge.to))) {
    return `${fromLayer} may use only ${allowance.modules.map((m) => `${toLayer}/${m}`).join(', ')}`;
  }
  if (allowance.typeOnly === true && !edge.typeOnly) return `${fromLayer} may import only types from ${toLayer}`;
  return null;
}

const describeEdge = (edge: Edge, why: string): string => `src/${edge.from}:${edge.line} imports ${edge.to} (${why})`;
const isKnownDebt = (edge: Edge): boolean => KNOWN_DEBTS.some((debt) => debt.from === edge.from && debt.to === edge.to);

/**
 * What each file loads at run time, by file. Type-only imports are erased at build time and are not
 * followed (the table limits them where they are written); nor is a known debt, listed once with
 * what it brings.
 */
const runtimeImports = new Map<string, string[]>(files.map((file) => [file, []]));
for (const edge of edges) if (edge.internal && !edge.typeOnly && !isKnownDebt(edge)) runtimeImports.get(edge.from)?.push(edge.to);

/** Every file `file` loads through other files, each with the first chain of imports (breadth first) that leads to it. */
function reachedThroughOthers(file: string, imports: ReadonlyMap<string, readonly string[]>): Map<string, string[]> {
  const chains = new Map<string, string[]>([[file, [file]]]);
  const queue = [file];
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    for (const target of imports.get(next) ?? []) {
      if (chains.has(target)) continue;
      chains.set(target, [...(chains.get(next) ?? []), target]);
      queue.push(target);
    }
  }
  chains.delete(file);
  return new Map([...chains].filter(([, chain]) => chain.length > 2));
}

/** Why a file reaching another through other files breaks the table (a layer its row does not name), or null. */
function transitiveBreach(chain: readonly string[]): string | null {
  const fromLayer = layerOf(chain[0] ?? '') as Layer;
  const toLayer = layerOf(chain[chain.length - 1] ?? '');
  const rules = ALLOWED[fromLayer];
  if (fromLayer === toLayer || rules === 'any') return null;
  return (LAYERS as readonly string[]).includes(toLayer) && rules[toLayer as Layer] !== undefined
    ? null
    : `${fromLayer} → ${toLayer} is not allowed, even through another layer: ${chain.map((file) => `src/${file}`).join(' → ')}`;
}

/** The files whose code (comments and string contents left out) uses `process.`. */
const processUsers = files.filter((file) => /(?<![\w$.])process\s*\??\.\s*[A-Za-z_$]/.test(blankOut(sources.get(file) ?? '', true)));

// ---------------------------------------------------------------------------------------------------

describe('the import scan', () => {
  it('reads multi-line, type-only, re-export, side-effect and dynamic imports, and skips comments and strings', () => {
    const sample = [
      'import {',
      '  a,',
      '  type B,',
      "} from './one.js';",
      "import type { C } from '../two.js';",
      "import { type D, type E } from './three.js';",
      "export * from './four.js';",
      "export type { F } from './five.js';",
      "import './six.js';",
      "// import { g } from './not-me.js';",
      "/* export { h } from './nor-me.js'; */",
      'const s = "import { i } from \'./not-a-string.js\'";',
      "const t = `${x} import('./not-template-text.js') ${await import('./seven.js')}`;",
      "const r = /\\/'/;",
      "const worker = new URL('./eight.js', import.meta.url);",
      'export const u = 1;',
    ].join('\n');
    expect(importsOf(sample).map((s) => [s.specifier, s.typeOnly, s.line, s.kind])).toEqual([
      ['./one.js', false, 1, 'static'],
      ['../two.js', true, 5, 'static'],
      ['./three.js', true, 6, 'static'],
      ['./four.js', false, 7, 'static'],
      ['./five.js', true, 8, 'static'],
      ['./six.js', false, 9, 'side-effect'],
      ['./seven.js', false, 13, 'dynamic'],
      ['./eight.js', false, 15, 'url'],
    ]);
  });

  it('refuses an import() it cannot read', () => {
    expect(() => importsOf('await import(name);')).toThrow(/not a string literal/);
  });

  it('finds every src file in a known layer, and every relative import on a file that exists', () => {
    expect(files.length).toBeGreaterThan(50);
    expect([...new Set(files.map(layerOf))].filter((layer) => !(LAYERS as readonly string[]).includes(layer))).toEqual([]);
    expect(edges.filter((edge) => edge.internal && !fileSet.has(edge.to)).map((edge) => describeEdge(edge, 'no such file'))).toEqual([]);
    // The batch modules are loaded on demand by a run of the tree commands.
    expect(edges.some((edge) => edge.from === 'cli/tree-run.ts' && edge.to === 'batch/patch-tree.ts')).toBe(true);
  });
});

describe('the dependency rule', () => {
  it('the table itself: layers, modules and type-only imports', () => {
    const edge = (from: string, to: string, typeOnly = false): Edge => ({ from, to, internal: true, typeOnly, line: 1 });
    expect(breach(edge('plan/a.ts', 'write/apply-plan.ts'))).toBe('plan → write is not allowed');
    expect(breach(edge('hook-engine/a.ts', 'elf/elf-image.ts'))).toMatch(
      /^hook-engine may use only elf\/byte-string.ts, elf\/constants.ts/,
    );
    expect(breach(edge('write/a.ts', 'plan/plan.ts'))).toBe('write may import only types from plan');
    expect(breach(edge('write/a.ts', 'plan/plan.ts', true))).toBeNull();
    expect(breach(edge('elf/a.ts', 'elf/b.ts'))).toBeNull();
    expect(breach(edge('cli/a.ts', 'batch/patch-tree.ts'))).toBeNull();
  });

  it('the transitive rule itself: a layer reaching another its row does not name, through a third', () => {
    const imports = new Map([
      ['doctor/a.ts', ['walk/b.ts']],
      ['walk/b.ts', ['write/c.ts', 'errors/d.ts']],
    ]);
    const chains = [...reachedThroughOthers('doctor/a.ts', imports).values()];
    expect(chains).toEqual([
      ['doctor/a.ts', 'walk/b.ts', 'write/c.ts'],
      ['doctor/a.ts', 'walk/b.ts', 'errors/d.ts'],
    ]);
    expect(chains.map(transitiveBreach)).toEqual([
      'doctor → write is not allowed, even through another layer: src/doctor/a.ts → src/walk/b.ts → src/write/c.ts',
      null,
    ]);
  });

  it('no layer reaches, through another, a layer its row does not name', () => {
    const breaches = files.flatMap((file) =>
      [...reachedThroughOthers(file, runtimeImports).values()].flatMap((chain) => {
        const why = transitiveBreach(chain);
        return why === null ? [] : [why];
      }),
    );
    expect(breaches).toEqual([]);
  });

  it('no import goes against the one-way flow, beyond the known debts', () => {
    const breaches = edges
      .filter((edge) => edge.internal && !isKnownDebt(edge))
      .flatMap((edge) => {
        const why = breach(edge);
        return why === null ? [] : [describeEdge(edge, why)];
      });
    expect(breaches).toEqual([]);
  });

  it('every layer but the pure ones, the command line too, sees elf/ through its public module alone', () => {
    const pure = Object.keys(PURE_LAYER_PACKAGES);
    const behind = edges.filter(
      (edge) =>
        edge.internal &&
        layerOf(edge.to) === 'elf' &&
        layerOf(edge.from) !== 'elf' &&
        !pure.includes(layerOf(edge.from)) &&
        edge.to !== 'elf/elf.ts',
    );
    expect(behind.map((edge) => describeEdge(edge, 'behind src/elf/elf.ts'))).toEqual([]);
  });

  it('the pure layers use no file system, threads or sockets', () => {
    const outside = edges.flatMap((edge) => {
      const allowed = PURE_LAYER_PACKAGES[layerOf(edge.from) as Layer];
      return !edge.internal && allowed !== undefined && !allowed.includes(edge.to) ? [describeEdge(edge, 'a pure layer')] : [];
    });
    expect(outside).toEqual([]);
  });

  it('every known debt is still owed (delete the ones that are paid)', () => {
    const paid = KNOWN_DEBTS.filter(
      (debt) => !edges.some((edge) => edge.from === debt.from && edge.to === debt.to && breach(edge) !== null),
    );
    expect(paid.map((debt) => `${debt.from} → ${debt.to}: ${debt.why}`)).toEqual([]);
  });
});

describe('process', () => {
  it(`is used by ${PROCESS_OWNER}, ${BIN_LOADER}, worker entry points and the listed modules only`, () => {
    const listed = new Set([PROCESS_OWNER, BIN_LOADER, ...WORKER_ENTRY_POINTS, ...PROCESS_DEBTS.map((debt) => debt.file)]);
    expect(processUsers.filter((file) => !listed.has(file))).toEqual([]);
    expect(processUsers).toContain(PROCESS_OWNER);
  });

  it('every listed use is still there (delete the ones that are gone)', () => {
    expect(PROCESS_DEBTS.filter((debt) => !processUsers.includes(debt.file)).map((debt) => `${debt.file}: ${debt.why}`)).toEqual([]);
  });
});
