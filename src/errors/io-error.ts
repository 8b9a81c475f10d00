// The io error of a failed open, read, write or stat, with the OS reason in words: every layer that
// touches the file system reports through it, whatever it was doing.

import { CudaPatchelfError } from './cuda-patchelf-error.js';

/** An io error for a failed open/read/write, with the OS reason in words. */
export function ioError(file: string, action: string, error: unknown): CudaPatchelfError {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const reason =
    code === 'ENOENT'
      ? 'no such file'
      : code === 'EACCES' || code === 'EPERM'
        ? 'permission denied'
        : code === 'EISDIR'
          ? 'is a directory'
          : code === 'EROFS'
            ? 'read-only file system'
            : code === 'ETXTBSY'
              ? 'file is being executed'
              : error instanceof Error
                ? error.message
                : String(error);
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
