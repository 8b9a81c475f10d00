// The fixtures themselves: the manifest covers every category the other tests rely on, the
// programs run, the libraries load, and the files have the properties their tags claim.
import { existsSync, lstatSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  FIXTURE_RUNPATH,
  GREETING,
  GREETING_ALT,
  type Fixture,
  fixture,
  fixtures,
  dlopenProbe,
  ldListFixture,
  loadManifest,
  OTHER_TOOLCHAIN_FIXTURES,
  requireTool,
  runProgram,
  sysroot,
} from './helpers/fixtures.js';
import { dynamicFacts, dynamicNumber, parseDynamicRows, readelfText, programHeaders } from './helpers/readelf.js';
import { BUILD_ARCHES } from './helpers/arch.js';

const manifest = loadManifest();
const loadable = fixtures((f) => f.kind === 'shared' && (f.arch === 'x86_64' || f.arch === 'aarch64'));
const runnable = fixtures({ runnable: true });
const compiledWithRunpathTag = fixtures(
  (f) => f.origin === 'compiled' && f.kind !== 'static' && ['runpath', 'rpath', 'no-runpath'].some((t) => f.tags.includes(t)),
);

describe('manifest', () => {
  it('is version 1 with absolute, existing, unique paths', () => {
    expect(manifest.version).toBe(1);
    expect(isAbsolute(manifest.cacheDir)).toBe(true);
    expect(existsSync(join(sysroot('aarch64'), 'lib', 'ld-linux-aarch64.so.1'))).toBe(true);
    const ids = new Set<string>();
    for (const f of manifest.fixtures) {
      expect(ids.has(f.id), f.id).toBe(false);
      ids.add(f.id);
      expect(isAbsolute(f.path), f.id).toBe(true);
      expect(lstatSync(f.path).isFile(), f.id).toBe(true);
      for (const dir of f.libraryPath?.split(':') ?? []) expect(existsSync(dir), `${f.id}: ${dir}`).toBe(true);
      if (f.runnable) expect(f.expectedOutput, f.id).not.toBeNull();
    }
  });

  const programVariants = ['pie', 'exec'].flatMap((p) => ['runpath', 'rpath', 'no-runpath'].map((m) => `${p}-${m}`));
  const libraryVariants = ['libuser-runpath', 'libuser-rpath', 'libuser-no-runpath'];
  const everyArch = [
    { dir: 'x86_64', arch: 'x86_64', pageSize: 4096 },
    { dir: 'aarch64-64k', arch: 'aarch64', pageSize: 65536 },
    { dir: 'aarch64-4k', arch: 'aarch64', pageSize: 4096 },
  ] as const;

  it.each(everyArch)('has the full compiled matrix for $dir', ({ dir, arch, pageSize }) => {
    for (const name of [
      ...programVariants,
      ...libraryVariants,
      'libgreet',
      'greet-alt',
      'static',
      'static-pie',
      'big-dynstr',
      'no-sections',
      ...OTHER_TOOLCHAIN_FIXTURES,
      'dlopen-probe',
    ]) {
      const f = fixture(`compiled/${dir}/${name}`);
      expect(f.arch, f.id).toBe(arch);
      expect(f.pageSize, f.id).toBe(pageSize);
      expect(f.elfClass, f.id).toBe(64);
      expect(f.endian, f.id).toBe('little');
    }
    expect(fixture(`compiled/${dir}/pie-runpath`).kind).toBe('pie');
    expect(fixture(`compiled/${dir}/exec-runpath`).kind).toBe('exec');
    expect(fixture(`compiled/${dir}/static`).kind).toBe('static');
    expect(fixture(`compiled/${dir}/libuser-runpath-lld`).linker).toBe('lld');
    expect(fixture(`compiled/${dir}/libuser-runpath-gold`).linker).toBe('gold');
  });

  it('has ELF32 and big-endian programs and libraries', () => {
    for (const [filter, count] of [
      [{ arch: 'arm', elfClass: 32, endian: 'little' }, 4],
      [{ arch: 'ppc64', elfClass: 64, endian: 'big' }, 4],
    ] as const) {
      const found = fixtures(filter);
      expect(found.length, JSON.stringify(filter)).toBeGreaterThanOrEqual(count);
      expect(found.some((f) => f.kind === 'shared')).toBe(true);
      expect(found.some((f) => f.kind === 'pie')).toBe(true);
      expect(found.some((f) => f.kind === 'exec')).toBe(true);
    }
  });

  it('has the tagged special cases', () => {
    for (const tag of ['static', 'static-pie', 'big-dynstr', 'no-sections', 'lld', 'gold', 'cxx-throw', 'alt-greet']) {
      expect(fixtures({ tags: [tag] }).length, tag).toBeGreaterThanOrEqual(3);
    }
  });

  const packages: Array<[Fixture['origin'], string]> = [
    ['debian', 'libc6'],
    ['debian', 'libstdc++6'],
    ['debian', 'libgcc-s1'],
    ['debian', 'libssl3'],
    ['debian', 'libicu72'],
    ['debian', 'libopencv-core406'],
    ['debian', 'libllvm15'],
    ['cuda', 'libcudart11.0'],
    ['cuda', 'libcublas11'],
    ['cuda', 'libnvtoolsext1'],
    ['cuda', 'libcuda1'],
  ];
  it.each(packages)('has %s package %s for x86_64 and aarch64', (origin, name) => {
    for (const arch of BUILD_ARCHES) {
      const found = fixtures({ origin, arch, tags: [`deb:${name}`] });
      expect(found.length, `${name} ${arch}`).toBeGreaterThan(0);
      for (const f of found) expect(f.kind).toBe('shared');
    }
  });

  it('has CUDA libraries with the alignment of their architecture', () => {
    for (const name of ['libcudart11.0', 'libcublas11']) {
      expect(fixtures({ origin: 'cuda', arch: 'x86_64', tags: [`deb:${name}`] })[0]?.pageSize).toBe(2 * 1024 * 1024);
      expect(fixtures({ origin: 'cuda', arch: 'aarch64', tags: [`deb:${name}`] })[0]?.pageSize).toBe(65536);
    }
  });

  it('has an npm package with an aarch64 shared object', () => {
    const found = fixtures({ origin: 'npm', arch: 'aarch64', kind: 'shared' });
    expect(found.length).toBeGreaterThan(0);
    expect(found.some((f) => f.tags.includes('npm:@img/sharp-libvips-linux-arm64'))).toBe(true);
  });
});

describe('requireTool', () => {
  it('finds the tools the tests use and throws for a missing one', () => {
    for (const tool of ['readelf', 'qemu-aarch64', 'patchelf', 'eu-elflint', 'strip', 'aarch64-linux-gnu-strip']) {
      expect(isAbsolute(requireTool(tool))).toBe(true);
    }
    expect(() => requireTool('cuda-patchelf-no-such-tool')).toThrow(/install-system-deps/);
  });
});

describe('runnable programs print their expected output', () => {
  it.each(runnable)('$id', async (f) => {
    const { stdout } = await runProgram(f);
    expect(stdout).toBe(`${f.expectedOutput ?? ''}\n`);
  });
});

describe('the run helpers pass the loader environment to the program only', () => {
  it.each(['x86_64', 'aarch64-64k'])('%s: LD_LIBRARY_PATH picks the alt libgreet', async (dir) => {
    const prog = fixture(`compiled/${dir}/pie-no-runpath`);
    const alt = fixture(`compiled/${dir}/greet-alt`);
    const { stdout } = await runProgram(prog, { libraryPath: join(alt.path, '..') });
    expect(stdout).toBe(`${GREETING_ALT}\n`);
    await expect(runProgram(prog, { libraryPath: null })).rejects.toThrow(/libgreet\.so\.1/);
  });

  it.each(['x86_64', 'aarch64-64k'])('%s: LD_DEBUG=libs shows the runpath search', async (dir) => {
    const prog = fixture(`compiled/${dir}/pie-runpath`);
    const { stdout, stderr } = await runProgram(prog, { env: { LD_DEBUG: 'libs' } });
    expect(stdout).toBe(`${GREETING}\n`);
    expect(stderr).toMatch(/find library=libgreet\.so\.1/);
    expect(stderr).toContain('search path=');
    expect(stderr).toContain('(RUNPATH from file');
  });
});

describe('every x86_64 and aarch64 library loads with ld.so --list', () => {
  it.each(loadable)('$id', async (f) => {
    const out = await ldListFixture(f);
    expect(out).not.toMatch(/not found/);
    if (f.origin === 'compiled' && f.path.endsWith('/libuser.so')) {
      expect(out).toContain(`libgreet.so.1 => ${join(f.path, '..', 'libgreet.so.1')}`);
    }
  });
});

describe('every x86_64 and aarch64 library dlopens with RTLD_NOW', () => {
  it.each(loadable.filter((f) => !f.tags.includes('no-dlopen')))('$id', async (f) => {
    expect(await dlopenProbe(f.path, f.arch, { libraryPath: f.libraryPath })).toBe('dlopen-probe: 1 loaded\n');
  });
});

describe('readelf agrees with the tags', () => {
  it.each(compiledWithRunpathTag)('$id', async (f) => {
    const { runpath, rpath } = dynamicFacts(parseDynamicRows(await readelfText(['-d'], f.path)));
    const expected = f.kind === 'shared' ? FIXTURE_RUNPATH.library : FIXTURE_RUNPATH.program;
    if (f.tags.includes('runpath')) {
      expect([runpath, rpath]).toEqual([expected, null]);
    } else if (f.tags.includes('rpath')) {
      expect([runpath, rpath]).toEqual([null, expected]);
    } else {
      expect([runpath, rpath]).toEqual([null, null]);
    }
  });

  it.each(fixtures({ tags: ['no-sections'] }))('$id has no section headers', async (f) => {
    const header = await readelfText(['-h'], f.path);
    expect(header).toMatch(/Start of section headers:\s+0 /);
    expect(header).toMatch(/Number of section headers:\s+0\n/);
    expect(header).toMatch(/Section header string table index:\s+0\n/);
    expect(await readelfText(['-S'], f.path)).toContain('There are no sections in this file.');
    expect(dynamicFacts(parseDynamicRows(await readelfText(['-d'], f.path))).runpath).toBe(FIXTURE_RUNPATH.library);
  });

  it.each(fixtures((f) => f.origin === 'compiled' && f.arch !== 'arm' && f.arch !== 'ppc64'))(
    '$id has PT_LOAD alignment $pageSize',
    async (f) => {
      const aligns = (await programHeaders(f.path)).filter((row) => row.type === 'LOAD').map((row) => row.align);
      expect(aligns.length).toBeGreaterThan(0);
      const expected = f.id.startsWith('compiled/aarch64-64k/') ? 0x10000 : 0x1000;
      expect(f.pageSize).toBe(expected);
      for (const align of aligns) expect(align).toBe(expected);
    },
  );

  it.each(fixtures({ tags: ['big-dynstr'] }))('$id has a large .dynstr', async (f) => {
    expect((await dynamicNumber(f.path, 'STRSZ')) ?? 0).toBeGreaterThan(200_000);
  });
});
