// patchelf #146: a .dynamic moved into a read-only segment made ld.so crash writing DT_DEBUG into it.
// A program that finds its PT_DYNAMIC at run time says whether the array moved and whether ld.so set
// DT_DEBUG in it; a new DT_NEEDED moves the array of lld outputs (no spare DT_NULL slot).

import { describe, expect, it } from 'vitest';
import { BUILD_ARCHES } from './helpers/arch.js';
import { dynamicRows, dynamicStrings, loadSegments, programHeaders, segmentOfType } from './helpers/readelf.js';
import { cliOk, runOk, useRegressionDirs } from './helpers/rewrite-regression.js';
import { compile, loadProblems } from './helpers/rw-build.js';

const dir = useRegressionDirs('rw-moved-dynamic-writable');

const checker = [
  '#include <link.h>',
  '#include <stdio.h>',
  '#include <sys/auxv.h>',
  'extern ElfW(Dyn) _DYNAMIC[];',
  'int main(void) {',
  '  const ElfW(Phdr) *phdr = (const ElfW(Phdr) *)getauxval(AT_PHDR);',
  '  unsigned long phnum = getauxval(AT_PHNUM);',
  '  ElfW(Addr) base = 0;',
  '  const ElfW(Phdr) *dynamic = NULL;',
  '  for (unsigned long i = 0; i < phnum; i++) {',
  '    if (phdr[i].p_type == PT_PHDR) base = (ElfW(Addr))phdr - phdr[i].p_vaddr;',
  '    if (phdr[i].p_type == PT_DYNAMIC) dynamic = &phdr[i];',
  '  }',
  '  if (dynamic == NULL) { puts("no PT_DYNAMIC"); return 1; }',
  '  ElfW(Dyn) *entry = (ElfW(Dyn) *)(base + dynamic->p_vaddr);',
  '  int debug = -1;',
  '  for (ElfW(Dyn) *d = entry; d->d_tag != DT_NULL; d++) if (d->d_tag == DT_DEBUG) debug = d->d_un.d_ptr != 0;',
  '  printf("dynamic %s, DT_DEBUG %s\\n", entry == _DYNAMIC ? "linked" : "moved", debug < 0 ? "missing" : debug ? "set" : "zero");',
  '  return 0;',
  '}',
  '',
].join('\n');

describe.each(BUILD_ARCHES)('%s', (arch) => {
  describe('#146: a moved .dynamic stays writable (ld.so writes DT_DEBUG into it)', () => {
    it.each([
      { name: 'lld PIE', flags: ['-fPIE', '-pie', '-fuse-ld=lld'] },
      { name: 'lld non-PIE executable', flags: ['-no-pie', '-fuse-ld=lld'] },
      { name: 'lld PIE without RELRO', flags: ['-fPIE', '-pie', '-fuse-ld=lld', '-Wl,-z,norelro'] },
    ])('$name', async ({ name, flags }) => {
      const d = await dir(`${arch}-dynamic-${name.replace(/\W+/g, '-')}`);
      const program = await compile(arch, d, 'prog', { 'prog.c': checker }, flags);
      expect(await runOk(arch, program)).toBe('dynamic linked, DT_DEBUG set\n');
      const dynamicBefore = segmentOfType(await programHeaders(program), 'DYNAMIC');

      await cliOk(['add-needed', 'libm.so.6', program]);

      const rows = await programHeaders(program);
      const dynamic = segmentOfType(rows, 'DYNAMIC');
      expect(dynamic.offset).not.toBe(dynamicBefore.offset);
      const holder = loadSegments(rows).find((l) => dynamic.vaddr >= l.vaddr && dynamic.vaddr + dynamic.memsz <= l.vaddr + l.memsz);
      expect(holder, 'a PT_LOAD maps the new PT_DYNAMIC').toBeDefined();
      expect(holder?.flags).toContain('W');
      expect(dynamic.offset - (holder?.offset ?? 0)).toBe(dynamic.vaddr - (holder?.vaddr ?? 0));
      expect(loadProblems(rows)).toEqual([]);
      expect((await dynamicRows(program)).some((r) => r.tag === 'DEBUG')).toBe(true);
      expect(await dynamicStrings(program, 'NEEDED')).toContain('libm.so.6');
      expect(await runOk(arch, program)).toBe('dynamic moved, DT_DEBUG set\n');
    });
  });
});
