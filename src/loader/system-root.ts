// The file system the emulated loader sees: this machine's, or a system root (--root: an aarch64
// Jetson image unpacked on an x86_64 machine). Paths are the loader's own (absolute in the emulated
// system) and byte strings, as ELF files hold them; they are resolved as the kernel would inside the
// root, so that an absolute symbolic link in the image points into the image and not at this
// machine's files. Paths on this machine are text (what Node's fs takes): a name that is not UTF-8
// cannot be reached, as elsewhere in cuda-patchelf.

import { lstatSync, readlinkSync, realpathSync, statSync, type Stats } from 'node:fs';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import { asciiByteString, type ByteString, byteStringToText, concatByteStrings, textToByteString } from '../elf/elf.js';

const SLASH = asciiByteString('/');

/** The kernel's limit on symbolic links followed in one lookup (ELOOP past it). */
const MAX_LINKS = 40;

export type Lookup =
  | { readonly ok: true; readonly hostPath: string; readonly stats: Stats }
  | { readonly ok: false; readonly code: string };

function errorCode(error: unknown): string {
  return (error as NodeJS.ErrnoException | undefined)?.code ?? 'EIO';
}

export class SystemRoot {
  /** The root on this machine, absolute; '/' for this machine's own file system. */
  readonly hostRoot: string;
  /** The working directory of the emulated process (relative runpath entries resolve against it), a byte string. */
  readonly cwd: ByteString;

  constructor(hostRoot: string, cwd: ByteString) {
    this.hostRoot = resolve(hostRoot);
    this.cwd = cwd;
  }

  /** This machine's path of an emulated path, without following links (for messages). */
  hostPathOf(path: ByteString): string {
    const text = byteStringToText(this.absolute(path));
    return this.isHost ? text : join(this.hostRoot, text);
  }

  get isHost(): boolean {
    return this.hostRoot === '/';
  }

  /**
   * The emulated system's absolute path of a path relative to its working directory (not normalized: '..' after a link is the
   * kernel's business).
   */
  absolute(path: ByteString): ByteString {
    if (path.startsWith('/')) return path;
    return this.cwd.endsWith('/') ? concatByteStrings(this.cwd, path) : concatByteStrings(this.cwd, SLASH, path);
  }

  /** The emulated path of a file on this machine, or null when it lies outside the root. */
  pathOf(hostPath: string): ByteString | null {
    const absolute = resolve(hostPath);
    if (this.isHost) return textToByteString(absolute);
    const inside = relative(this.hostRoot, absolute);
    if (inside.startsWith('..') || isAbsolute(inside)) return null;
    return textToByteString(`/${inside.split(sep).join('/')}`);
  }

  /** The file a path names, its symbolic links followed inside the root; stat's error code when there is none. */
  lookUp(path: ByteString): Lookup {
    const absolute = byteStringToText(this.absolute(path));
    if (this.isHost) {
      try {
        return { ok: true, hostPath: absolute, stats: statSync(absolute) };
      } catch (error) {
        return { ok: false, code: errorCode(error) };
      }
    }
    const resolved = this.resolveInRoot(absolute);
    if (typeof resolved !== 'string') return resolved;
    try {
      return { ok: true, hostPath: resolved, stats: statSync(resolved) };
    } catch (error) {
      return { ok: false, code: errorCode(error) };
    }
  }

  /** The path with every symbolic link resolved (realpath), as the emulated system names it. */
  realPath(path: ByteString): ByteString | { readonly ok: false; readonly code: string } {
    const found = this.lookUp(path);
    if (!found.ok) return found;
    // Inside a root the lookup has already resolved every link.
    if (!this.isHost) return this.pathOf(found.hostPath) ?? { ok: false, code: 'EXDEV' };
    try {
      return textToByteString(realpathSync(found.hostPath));
    } catch (error) {
      return { ok: false, code: errorCode(error) };
    }
  }

  /** Component by component, as the kernel walks a path, with '/' and '..' held at the root. */
  private resolveInRoot(path: string): string | { readonly ok: false; readonly code: string } {
    const pending = path.split('/').filter((part) => part !== '' && part !== '.');
    const done: string[] = [];
    let links = 0;
    while (pending.length > 0) {
      const part = pending.shift() as string;
      if (part === '..') {
        done.pop();
        continue;
      }
      const candidate = join(this.hostRoot, ...done, part);
      let stats: Stats;
      try {
        stats = lstatSync(candidate);
      } catch (error) {
        return { ok: false, code: errorCode(error) };
      }
      if (stats.isSymbolicLink()) {
        if (++links > MAX_LINKS) return { ok: false, code: 'ELOOP' };
        const target = readlinkSync(candidate);
        if (target.startsWith('/')) done.length = 0;
        pending.unshift(...target.split('/').filter((p) => p !== '' && p !== '.'));
        continue;
      }
      if (pending.length > 0 && !stats.isDirectory()) return { ok: false, code: 'ENOTDIR' };
      done.push(part);
    }
    return join(this.hostRoot, ...done);
  }
}
