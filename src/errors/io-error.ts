// The io error of a failed open, read, write or stat, with the OS reason in words: every layer that
// touches the file system reports through it, whatever it was doing.

import { CudaPatchelfError } from './cuda-patchelf-error.js';

/** The OS reasons people meet, in words; any other is the system's own message. */
const REASONS: Readonly<Record<string, string>> = {
  ENOENT: 'no such file',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  EISDIR: 'is a directory',
  EROFS: 'read-only file system',
  ETXTBSY: 'file is being executed',
  ELOOP: 'too many levels of symbolic links (a loop)',
};

/** An io error for a failed open/read/write, with the OS reason in words. */
export function ioError(file: string, action: string, error: unknown): CudaPatchelfError {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const reason = (code === undefined ? undefined : REASONS[code]) ?? (error instanceof Error ? error.message : String(error));
  return new CudaPatchelfError('io', `cannot ${action}: ${reason}`, { file, cause: error });
}

/** The file-type questions of a Stats (this layer uses no file system). */
interface FileType {
  isDirectory(): boolean;
  isFIFO(): boolean;
  isSocket(): boolean;
  isCharacterDevice(): boolean;
  isBlockDevice(): boolean;
  isSymbolicLink(): boolean;
}

/** What a path that is not a regular file is, in words, for the error that refuses it. */
export function describeFileType(stats: FileType): string {
  if (stats.isDirectory()) return 'a directory';
  if (stats.isFIFO()) return 'a FIFO';
  if (stats.isSocket()) return 'a socket';
  if (stats.isCharacterDevice()) return 'a character device';
  if (stats.isBlockDevice()) return 'a block device';
  if (stats.isSymbolicLink()) return 'a symbolic link';
  return 'not a regular file';
}
