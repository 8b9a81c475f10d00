// Small trees of real ELF files for the batch and the command line: corpus files (corpus.ts) and other
// bytes written under a temporary directory, with hard and symbolic links where a test wants them.

import { link, mkdir, mkdtemp, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { corpusBytes } from './corpus.js';

/** What a tree holds at a path: bytes, a hard link to another path of the tree, or a symbolic link. */
export type TreeEntry = Uint8Array | { readonly hardLink: string } | { readonly symlink: string };

/** A corpus file's bytes, for a tree. */
export const corpus = corpusBytes;

/** A file of text, which is not ELF. */
export const textFile = (text: string): Uint8Array => new TextEncoder().encode(text);

/** A file that starts as ELF and is cut short: it fails, and the batch goes on. */
export const truncatedElf = (): Uint8Array => corpusBytes('x86_64-lib-plain.so').slice(0, 14);

/** Writes `entries` under `root` (paths relative, `/`-separated), in the order given. */
async function writeTree(root: string, entries: Readonly<Record<string, TreeEntry>>): Promise<void> {
  for (const [relative, entry] of Object.entries(entries)) {
    const path = join(root, relative);
    await mkdir(dirname(path), { recursive: true });
    if (entry instanceof Uint8Array) await writeFile(path, entry);
    else if ('hardLink' in entry) await link(join(root, entry.hardLink), path);
    else await symlink(entry.symlink, path);
  }
}

/** A fresh directory under `parent` with `entries` in it. */
export async function treeIn(parent: string, entries: Readonly<Record<string, TreeEntry>>): Promise<string> {
  const root = await mkdtemp(join(parent, 'tree-'));
  await writeTree(root, entries);
  return root;
}

/**
 * The tree most batch and command tests walk: a program and three libraries to patch (one with
 * DT_RPATH), a second name of one of them, a symbolic link, a text file and a truncated ELF file.
 */
export const MIXED_TREE: Readonly<Record<string, TreeEntry>> = {
  'bin/app': corpus('x86_64-pie-runpath.elf'),
  'lib/libplain.so': corpus('x86_64-lib-plain.so'),
  'lib/libplain.so.1': { hardLink: 'lib/libplain.so' },
  'lib/librpath.so': corpus('x86_64-lib-rpath.so'),
  'lib/liblld.so': corpus('x86_64-lib-lld.so'),
  'lib/libz.so': { symlink: 'libplain.so' },
  'lib/broken.so': truncatedElf(),
  'share/README': textFile('not an ELF file\n'),
};
