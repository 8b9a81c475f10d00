// The real loader as the oracle for doctor: runs a program (or lists a library as ldd does) with
// LD_DEBUG=libs,files — natively on x86_64, under qemu-aarch64 -L ROOT for aarch64 — and reads back
// which file it opened for each object it loaded, in load order.

import { join } from 'node:path';
import type { BuildArch } from './arch.js';
import { requireTool } from './fixtures.js';
import { cleanEnv, execTool } from './exec.js';

export interface RealLoad {
  /** The name the object was asked for (DT_NEEDED or dlopen argument). */
  readonly name: string;
  /** The path the loader opened, as it printed it. */
  readonly path: string;
  /** The object that dlopen'ed it, or null for a DT_NEEDED load. */
  readonly dlopenedBy: string | null;
  /** The dlopen this load is part of (the library itself or one of its dependencies), or null at start-up. */
  readonly dlopen: { readonly name: string; readonly caller: string } | null;
}

export interface LoaderTrace {
  readonly loads: RealLoad[];
  readonly stdout: string;
  readonly stderr: string;
  readonly code: number | null;
}

/**
 * Each "generating link map" is a new object; the path is the last "trying file=" of the search for
 * that name (a name with a slash is opened as it is, without a search). When listing, the first one
 * is the file being listed.
 */
export function parseLdDebug(stderr: string, listed: boolean): RealLoad[] {
  const loads: RealLoad[] = [];
  let searching: string | null = null;
  let trying: string | null = null;
  let dlopenedBy: string | null = null;
  let dlopen: RealLoad['dlopen'] = null;
  let first = true;
  for (const raw of stderr.split('\n')) {
    const line = raw.replace(/^\s*\d+:\s?/, '');
    const dlopened = /^file=(.*) \[\d+\];\s+dynamically loaded by (.*) \[\d+\]$/.exec(line);
    const search = /^find library=(.*) \[\d+\]; searching$/.exec(line);
    const tried = /^\s*trying file=(.*)$/.exec(line);
    const mapped = /^file=(.*) \[\d+\];\s+generating link map$/.exec(line);
    if (dlopened !== null) {
      dlopenedBy = dlopened[2] ?? null;
      dlopen = { name: dlopened[1] ?? '', caller: dlopenedBy ?? '' };
    } else if (/^file=(.*) \[\d+\];\s+needed by /.test(line)) {
      dlopenedBy = null;
    } else if (search !== null) {
      searching = search[1] ?? null;
      trying = null;
    } else if (tried !== null) {
      trying = tried[1] ?? null;
    } else if (mapped !== null) {
      const name = mapped[1] ?? '';
      if (listed && first) {
        first = false;
        continue;
      }
      first = false;
      loads.push({ name, path: searching === name && trying !== null ? trying : name, dlopenedBy, dlopen });
      searching = null;
      trying = null;
      dlopenedBy = null;
    }
  }
  return loads;
}

export interface TraceRequest {
  readonly arch: BuildArch;
  /**
   * Run it (a program) or list it with the loader in trace mode (LD_TRACE_LOADED_OBJECTS=1, what ldd
   * sets: a dependency not found is listed and the load goes on, as doctor reports it).
   */
  readonly mode: 'run' | 'list';
  /** The file as the loader names it (under --root: the path inside the root). */
  readonly path: string;
  readonly libraryPath?: string | null;
  /** The system root qemu runs the loader in (-L); aarch64 always needs one, x86_64 may have one. */
  readonly root?: string;
  readonly args?: readonly string[];
  readonly cwd?: string;
}

export async function traceLoader(request: TraceRequest): Promise<LoaderTrace> {
  // ':' separates LD_DEBUG's words as ',' does, and qemu's -E splits its argument at commas.
  const vars: Record<string, string> = { LD_DEBUG: 'libs:files' };
  if (request.libraryPath) vars.LD_LIBRARY_PATH = request.libraryPath;
  // `ld.so --list` stops at the first library it cannot find; trace mode goes on.
  if (request.mode === 'list') vars.LD_TRACE_LOADED_OBJECTS = '1';
  let file: string;
  let args: string[];
  let env: NodeJS.ProcessEnv;
  if (request.arch === 'x86_64' && request.root === undefined) {
    [file, args] =
      request.mode === 'run' ? [request.path, [...(request.args ?? [])]] : [requireTool('/lib64/ld-linux-x86-64.so.2'), [request.path]];
    env = cleanEnv(vars);
  } else {
    if (request.root === undefined) throw new Error('an aarch64 trace needs the system root qemu runs in');
    const loader = request.arch === 'x86_64' ? join('lib64', 'ld-linux-x86-64.so.2') : join('lib', 'ld-linux-aarch64.so.1');
    // -E sets the variables in the guest only, not for the host loader that starts qemu.
    const guest = Object.entries(vars).flatMap(([key, value]) => ['-E', `${key}=${value}`]);
    const target = request.mode === 'run' ? [request.path, ...(request.args ?? [])] : [join(request.root, loader), request.path];
    [file, args] = [requireTool(`qemu-${request.arch}`), ['-L', request.root, ...guest, ...target]];
    env = cleanEnv();
  }
  const result = await execTool(file, args, { env, timeoutMs: 60_000, ...(request.cwd === undefined ? {} : { cwd: request.cwd }) });
  return { loads: parseLdDebug(result.stderr, request.mode === 'list'), stdout: result.stdout, stderr: result.stderr, code: result.code };
}
