// `cuda-patchelf link-driver DEST`: the driver link made where the programs run (docs/driver-link.md):
// the arguments checked, src/driver-link/ run, and what it linked and why said in lines or one JSON
// document, with the command's exit code.

import { statSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { cudaCompatNoteRecord } from '../elf/elf.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import { isDriverVersion } from '../doctor/driver-version.js';
import { hostAbi, type MachineAbi } from '../loader/machine-abi.js';
import { LOADER_CACHE } from '../driver-link/driver-release.js';
import { linkDriver, type LinkDriverReport, type LinkDriverRequest } from '../driver-link/link-driver.js';
import type { CliIo } from './cli-io.js';
import { EXIT } from './exit-codes.js';
import { errorJson, errorLine, rejectEmptyPaths } from './report.js';

/** link-driver's exit codes (README.md): no driver is its own answer, as `check` finding work is. */
const LINK_DRIVER_EXIT = { linked: EXIT.ok, noDriver: 1, failed: EXIT.someFilesFailed } as const;

export interface LinkDriverOptions {
  from?: string[];
  cudaCompat?: string[];
  base?: string;
  driverVersion?: string;
  dryRun?: boolean;
  json?: boolean;
}

/**
 * The directory an option names, absolute, when `dir` (with `inside`, the part that must be there) is
 * one; a usage error naming it otherwise.
 */
function directoryArgument(option: string, dir: string, cwd: string, inside?: { path: string; why: string }): string {
  const absolute = resolve(cwd, dir);
  let isDirectory = false;
  try {
    isDirectory = statSync(join(absolute, inside?.path ?? '')).isDirectory();
  } catch {
    // said below
  }
  if (!isDirectory) {
    const what = inside === undefined ? dir : join(dir, inside.path);
    const why = inside === undefined ? '' : ` (${inside.why})`;
    throw new CudaPatchelfError('usage', `${option} ${dir}: ${what} is not a directory${why}`);
  }
  return absolute;
}

/** The request, or a usage error before anything is read or written. */
function requestOf(dest: string, options: LinkDriverOptions, cwd: string, abi: MachineAbi | null): LinkDriverRequest {
  rejectEmptyPaths(
    [dest, ...(options.from ?? []), ...(options.cudaCompat ?? []), ...(options.base === undefined ? [] : [options.base])],
    'directories',
  );
  if (abi === null)
    throw new CudaPatchelfError('usage', 'link-driver links the driver of x86_64, aarch64 and i386 machines, not of this one');
  if (options.driverVersion !== undefined && !isDriverVersion(options.driverVersion))
    throw new CudaPatchelfError('usage', `--driver-version takes a version such as 580.159.04, not "${options.driverVersion}"`);
  const absolute = resolve(cwd, dest);
  if (basename(absolute) === '')
    throw new CudaPatchelfError('usage', `${dest} cannot be the driver link: name a path such as /run/opengl-driver`);
  return {
    dest: absolute,
    from: (options.from ?? []).map((dir) => directoryArgument('--from', dir, cwd)),
    cachePath: LOADER_CACHE,
    abi,
    cudaCompat: (options.cudaCompat ?? []).map((dir) =>
      directoryArgument('--cuda-compat', dir, cwd, { path: 'compat', why: 'a cuda_compat package holds its libraries there' }),
    ),
    base: options.base === undefined ? null : directoryArgument('--base', options.base, cwd),
    driverVersion: options.driverVersion ?? null,
    dryRun: options.dryRun === true,
  };
}

/** What the link holds, in words: the driver's release, and the cuda_compat in front of it. */
function linkedWhat(report: LinkDriverReport): string {
  const chosen = report.verdicts.find((verdict) => verdict.chosen)?.candidate;
  const compat = chosen === undefined ? '' : `, with cuda_compat ${chosen.dir} (${chosen.version ?? ''}) in front`;
  return `the driver's ${report.driver.version}${compat} (${report.links.length} links)`;
}

function textLines(dest: string, report: LinkDriverReport): string[] {
  const { kernel, driver } = report;
  const lines = [
    `link-driver: kernel driver ${kernel.version} (${kernel.source}); the driver's libraries ${driver.version} ` +
      `(${driver.files.length}, through ${driver.source})`,
    ...report.verdicts.map(
      (verdict) => `  cuda_compat ${verdict.candidate.dir}: ${verdict.chosen ? 'in front of the driver' : 'left out'}: ${verdict.why}`,
    ),
    ...report.warnings.map((warning) => `  warning: ${warning}`),
  ];
  if (report.outcome === 'would-switch')
    return [
      ...lines,
      ...report.links.map((link) => `  ${link.path} -> ${link.target}  [${link.from}]`),
      `${dest}: would link ${linkedWhat(report)}; --dry-run: nothing written`,
    ];
  if (report.outcome === 'unchanged') return [...lines, `${dest}: already links ${linkedWhat(report)}: nothing written`];
  return [...lines, `${dest}: links ${linkedWhat(report)}, in ${report.generation ?? ''}`];
}

function reportJson(dest: string, dryRun: boolean, report: LinkDriverReport): object {
  return {
    version: 1,
    dest,
    dryRun,
    outcome: report.outcome,
    generation: report.generation,
    kernel: report.kernel,
    driver: { version: report.driver.version, source: report.driver.source, files: report.driver.files },
    compat: report.verdicts.map((verdict) => ({
      dir: verdict.candidate.dir,
      libcuda: verdict.candidate.libcuda,
      version: verdict.candidate.version,
      note: cudaCompatNoteRecord(verdict.candidate.note),
      use: verdict.decision?.use ?? false,
      chosen: verdict.chosen,
      why: verdict.why,
    })),
    links: report.links,
    warnings: report.warnings,
  };
}

/** The link-driver command: make (or say) the link, print what and why, set the exit code. */
export async function runLinkDriver(dest: string, options: LinkDriverOptions, io: CliIo): Promise<void> {
  if (io.host === undefined) throw new Error('link-driver links the driver of the machine it runs on, and was not told which (CliIo.host)');
  const request = requestOf(dest, options, io.host.cwd, hostAbi(io.host.arch));
  const result = await linkDriver(request);
  const json = options.json === true;
  const failure = { version: 1, dest: request.dest, dryRun: request.dryRun, outcome: result.kind };
  if (result.kind === 'no-driver') {
    io.err(`cuda-patchelf: link-driver: no NVIDIA driver: ${result.problem}; ${request.dest} is left as it was`);
    if (json) io.out(JSON.stringify({ ...failure, problem: result.problem }, null, 2));
    io.setExitCode(LINK_DRIVER_EXIT.noDriver);
    return;
  }
  if (result.kind === 'failed') {
    io.err(errorLine(result.error));
    if (json) io.out(JSON.stringify({ ...failure, error: errorJson(result.error) }, null, 2));
    io.setExitCode(result.error.kind === 'usage' ? EXIT.usage : LINK_DRIVER_EXIT.failed);
    return;
  }
  if (json) io.out(JSON.stringify(reportJson(request.dest, request.dryRun, result.report), null, 2));
  else for (const line of textLines(request.dest, result.report)) io.out(line);
  io.setExitCode(LINK_DRIVER_EXIT.linked);
}
