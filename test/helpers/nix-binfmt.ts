// Lets the kernel run aarch64 ELF files through qemu-user (binfmt_misc), as a Nix build for aarch64-linux
// on an x86_64 machine needs: mounts binfmt_misc when it is not mounted, turns it on when it is off, and
// registers qemu-aarch64 for the aarch64 ELF magic unless an enabled entry already handles it. Needs root.
// The function it returns undoes exactly what was done, in reverse order.

import { existsSync } from 'node:fs';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { requireTool } from './fixtures.js';
import { mustExec } from './exec.js';

const BINFMT = '/proc/sys/fs/binfmt_misc';
const ENTRY = 'cuda-patchelf-qemu-aarch64';
// ELF64, little-endian, version 1, e_type ET_EXEC or ET_DYN (the mask clears the low bit), e_machine EM_AARCH64:
// the entry qemu-user-static installs.
const MAGIC = '7f454c460201010000000000000000000200b700';
const MASK = 'ffffffffffffff00fffffffffffffffffeffffff';

function escaped(hex: string): string {
  return hex.replace(/../g, (byte) => `\\x${byte}`);
}

async function hasEnabledAarch64Entry(): Promise<boolean> {
  for (const name of await readdir(BINFMT)) {
    if (name === 'register' || name === 'status') continue;
    const text = await readFile(join(BINFMT, name), 'utf8');
    if (text.startsWith('enabled\n') && text.includes(`\nmagic ${MAGIC}\n`) && text.includes(`\nmask ${MASK}\n`)) return true;
  }
  return false;
}

export async function ensureAarch64Binfmt(): Promise<() => Promise<void>> {
  if (process.getuid?.() !== 0) throw new Error('registering qemu-aarch64 with binfmt_misc needs root');
  const undo: (() => Promise<unknown>)[] = [];
  if (!existsSync(join(BINFMT, 'status'))) {
    await mustExec(requireTool('mount'), ['-t', 'binfmt_misc', 'binfmt_misc', BINFMT]);
    undo.push(() => mustExec(requireTool('umount'), [BINFMT]));
  }
  if ((await readFile(join(BINFMT, 'status'), 'utf8')).trim() !== 'enabled') {
    await writeFile(join(BINFMT, 'status'), '1');
    undo.push(() => writeFile(join(BINFMT, 'status'), '0'));
  }
  if (!(await hasEnabledAarch64Entry())) {
    await writeFile(join(BINFMT, 'register'), `:${ENTRY}:M::${escaped(MAGIC)}:${escaped(MASK)}:${requireTool('qemu-aarch64')}:`);
    undo.push(() => writeFile(join(BINFMT, ENTRY), '-1'));
  }
  return async () => {
    for (const step of undo.reverse()) await step();
  };
}
