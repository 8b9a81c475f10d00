// ElfFile, the reader's public face, on real files built here for x86_64 and aarch64: what it says of
// the header, the dynamic entries, the interpreter and the notes is what binutils readelf says of the
// same file; what stops an open (no file, not ELF, a damaged ELF file) comes back as a value that names
// the file, not as an exception.

import { writeFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { DT } from '../src/elf/constants.js';
import { ElfFile, type OpenedElf } from '../src/elf/elf-file.js';
import { mustExec } from './helpers/exec.js';
import type { BuildArch } from './helpers/arch.js';
import { compilerFor } from './helpers/fixtures.js';
import { dynamicFacts, dynamicRows, interpreterOf, readelfText, runReadelf } from './helpers/readelf.js';
import { useTempDir } from './helpers/use-temp-dir.js';

const dir = useTempDir('elf-file');

/** The `.note.dlopen` a library carries (https://systemd.io/ELF_DLOPEN_METADATA/), as the C that puts it there. */
const PAYLOAD = '[{"feature":"nvml","priority":"required","soname":["libnvidia-ml.so.1"]}]';
const PADDED = PAYLOAD.length + 1 + ((4 - ((PAYLOAD.length + 1) % 4)) % 4);
const NOTE_SOURCE = `#include <stdint.h>
__attribute__((used, section(".note.dlopen"), aligned(4))) static const struct { uint32_t n_namesz, n_descsz, n_type; char name[4]; char desc[${PADDED}]; } note = { 4, ${PADDED}, 0x407c0c0a, "FDO", ${JSON.stringify(PAYLOAD)} };
int opener(void) { return 0; }
`;

interface Built {
  readonly object: string;
  readonly library: string;
  readonly program: string;
}

async function build(arch: BuildArch): Promise<Built> {
  const base = join(dir(), arch);
  await mkdir(base, { recursive: true });
  const source = join(base, 'opener.c');
  await writeFile(source, NOTE_SOURCE);
  const cc = compilerFor(arch);
  const object = join(base, 'opener.o');
  await mustExec(cc, ['-c', '-fPIC', '-O1', '-o', object, source]);
  const library = join(base, 'libopener.so.1');
  await mustExec(cc, [
    '-shared',
    '-o',
    library,
    object,
    '-Wl,-soname,libopener.so.1',
    '-Wl,--enable-new-dtags,-rpath,$ORIGIN/../lib:/opt/x',
  ]);
  const main = join(base, 'main.c');
  await writeFile(main, 'int opener(void);\nint main(void) { return opener(); }\n');
  const program = join(base, 'prog');
  await mustExec(cc, ['-O1', '-o', program, main, library, '-Wl,--disable-new-dtags,-rpath,/opt/rpath']);
  return { object, library, program };
}

/**
 * The notes as `readelf -n` lists them: owner and descriptor size, in file order. readelf exits 1 when
 * it prints a note of a type it does not know (the FDO one), with nothing on stderr.
 */
async function readelfNotes(file: string): Promise<{ owner: string; size: number }[]> {
  const result = await runReadelf(['-n'], file);
  expect({ code: result.code === 0 || result.code === 1, stderr: result.stderr }).toEqual({ code: true, stderr: '' });
  return [...result.stdout.matchAll(/^\s{2}(\S+)\s+0x([0-9a-f]+)\s/gm)].map((m) => ({
    owner: m[1] as string,
    size: Number.parseInt(m[2] as string, 16),
  }));
}

/** The file of an OpenedElf that must be one, for the test to go on with. */
function fileOf(opened: OpenedElf): ElfFile {
  if (opened.kind !== 'elf') throw new Error(`not opened: ${opened.error.describe()}`);
  return opened.file;
}

describe.each(['x86_64', 'aarch64'] as const)('ElfFile on %s files', (arch) => {
  let built: Built;
  beforeAll(async () => {
    built = await build(arch);
  }, 120_000);

  it('reads the header, the dynamic strings and values, and the interpreter as readelf does', async () => {
    for (const path of [built.library, built.program]) {
      const file = fileOf(await ElfFile.open(path));
      try {
        const header = await readelfText(['-h'], path);
        expect(header).toContain(`Machine:                           ${arch === 'x86_64' ? 'Advanced Micro Devices X86-64' : 'AArch64'}`);
        expect(file.header.e_machine).toBe(arch === 'x86_64' ? 62 : 183);
        expect(header).toMatch(new RegExp(`Type:\\s+${file.header.e_type === 3 ? 'DYN' : 'EXEC'} `));
        expect(header).toMatch(/OS\/ABI:\s+UNIX - System V/);
        expect(file.header.osabi).toBe(0);
        const facts = dynamicFacts(await dynamicRows(path));
        expect({
          needed: await file.dynStrings(DT.DT_NEEDED),
          soname: await file.lastDynString(DT.DT_SONAME),
          runpath: await file.lastDynString(DT.DT_RUNPATH),
          rpath: await file.lastDynString(DT.DT_RPATH),
        }).toEqual({ needed: facts.needed, soname: facts.soname, runpath: facts.runpath, rpath: facts.rpath });
        const rows = await dynamicRows(path);
        expect(file.dynValues(DT.DT_NEEDED)).toHaveLength(rows.filter((row) => row.tag === 'NEEDED').length);
        expect(file.dynValues(DT.DT_VERNEED)).toHaveLength(rows.filter((row) => row.tag === 'VERNEED').length);
        expect(file.interpreter).toBe(await interpreterOf(path));
      } finally {
        file.close();
      }
    }
    expect(await ElfFile.open(built.library).then((opened) => fileOf(opened).lastDynString(DT.DT_RUNPATH))).toBe('$ORIGIN/../lib:/opt/x');
  });

  it('lists the notes of the PT_NOTE segments, and of the SHT_NOTE sections of an object file, as readelf -n does', async () => {
    for (const path of [built.library, built.object]) {
      const file = fileOf(await ElfFile.open(path));
      try {
        const notes = await file.notes();
        expect(
          notes.map((note) => ({ owner: note.owner, size: note.descriptor.length })),
          path,
        ).toEqual(await readelfNotes(path));
        const dlopen = notes.filter((note) => note.owner === 'FDO' && note.type === 0x407c0c0a);
        expect(dlopen).toHaveLength(1);
        expect(Buffer.from(dlopen[0]?.descriptor ?? []).toString('latin1')).toBe(PAYLOAD.padEnd(PADDED, '\0'));
      } finally {
        file.close();
      }
    }
  });
});

describe('ElfFile.open: what stops it comes back as a value naming the file', () => {
  it('a missing file, a text file, an archive, an empty file and a damaged ELF file', async () => {
    const text = join(dir(), 'notes.txt');
    writeFileSync(text, 'just text\n');
    const archive = join(dir(), 'libx.a');
    writeFileSync(archive, '!<arch>\nrest');
    const empty = join(dir(), 'empty');
    writeFileSync(empty, '');
    const truncated = join(dir(), 'truncated');
    writeFileSync(truncated, Buffer.from([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0, 0, 0]));
    const seen = async (path: string): Promise<[string, string]> => {
      const opened = await ElfFile.open(path);
      if (opened.kind === 'elf') throw new Error(`${path} opened`);
      return [opened.kind, opened.error.describe()];
    };
    expect(await seen(join(dir(), 'missing'))).toEqual(['failed', `${join(dir(), 'missing')}: cannot open: no such file`]);
    expect(await seen(text)).toEqual(['not-elf', `${text}: not an ELF file (no \\x7fELF magic) (at offset 0x0)`]);
    expect(await seen(archive)).toEqual(['not-elf', `${archive}: an ar archive (static library), not an ELF file (at offset 0x0)`]);
    expect(await seen(empty)).toEqual(['not-elf', `${empty}: empty file, not an ELF file`]);
    expect(await seen(truncated)).toEqual(['failed', `${truncated}: truncated ELF file: 10 bytes, shorter than e_ident`]);
  });
});
