// The names a batch has seen each inode under: a hard-linked ELF file is patched once, through the
// first of its names in walk order, and its other names are reported as hard links to that one. The
// inode is known only once a file is open (the walk takes no stat), so the check is made where a file
// is first told to be ELF: by the thread that sniffs the batch's files (schedule-files.ts).

import type { Stats } from 'node:fs';
export class FirstNames {
  private readonly names = new Map<string, string>();

  /**
   * Records `path` as a name of the inode `stats` describes, and returns the name the inode was first
   * recorded under, or null when that is `path` itself (the name to patch it through).
   */
  recordName(path: string, stats: Pick<Stats, 'dev' | 'ino'>): string | null {
    const key = `${stats.dev}:${stats.ino}`;
    const first = this.names.get(key);
    if (first === undefined) this.names.set(key, path);
    return first === undefined || first === path ? null : first;
  }
}
