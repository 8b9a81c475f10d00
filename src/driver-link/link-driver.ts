// `link-driver DEST`: the driver link made on the machine that runs the programs, what NixOS' graphics
// module makes at /run/opengl-driver. DEST/lib links to the host driver's user-space libraries and, in
// front of them, to the newest cuda_compat that NVIDIA's rule allows on this kernel driver; the switch
// is atomic, and a run that finds DEST as it would make it writes nothing. The result is a value: what
// was linked and why, no driver at all, or the error that stopped the run with DEST left as it was.

import { statSync, type Stats } from 'node:fs';
import { dirname } from 'node:path';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import { readKernelDriverVersion, type DriverVersion } from '../doctor/driver-version.js';
import type { MachineAbi } from '../loader/machine-abi.js';
import { lockName, takeLock } from '../write/file-lock.js';
import { readBaseEntries } from './base-entries.js';
import { chooseCompat, type CompatVerdict } from './choose-compat.js';
import { readCompatCandidate } from './compat-candidate.js';
import { holdsPlan, readCurrentLink, type CurrentLink } from './current-link.js';
import { driverInCache, driverInDirectories, type DriverRelease } from './driver-release.js';
import { readLibraryLinks, type LibraryLinks } from './library-links.js';
import { planLinks, type PlannedLink } from './link-plan.js';
import { switchLink, unchangedError } from './switch-link.js';

export interface LinkDriverRequest {
  /** The driver link to make (absolute): /run/opengl-driver. */
  readonly dest: string;
  /** --from: the driver's directories (absolute); empty: through the loader's cache. */
  readonly from: readonly string[];
  /** The loader's cache, for programs of `abi`. */
  readonly cachePath: string;
  readonly abi: MachineAbi;
  /** --cuda-compat: cuda_compat packages (DIR/compat), in the order given. */
  readonly cudaCompat: readonly string[];
  /** --base: a directory whose entries the link keeps under the driver's; null: none. */
  readonly base: string | null;
  /** --driver-version: the kernel driver to decide for; null: this machine's. */
  readonly driverVersion: string | null;
  readonly dryRun: boolean;
}

export interface LinkDriverReport {
  readonly driver: DriverRelease;
  /** The kernel driver NVIDIA's rule was applied to, and where its version came from. */
  readonly kernel: DriverVersion;
  readonly verdicts: readonly CompatVerdict[];
  readonly links: readonly PlannedLink[];
  /** unchanged: DEST already held the links (nothing written); switched; would-switch (--dry-run). */
  readonly outcome: 'unchanged' | 'switched' | 'would-switch';
  /** The generation DEST links to after the run (null: --dry-run, or not one of link-driver's). */
  readonly generation: string | null;
  readonly warnings: readonly string[];
}

export type LinkDriverResult =
  | { readonly kind: 'linked'; readonly report: LinkDriverReport }
  | { readonly kind: 'no-driver'; readonly problem: string }
  | { readonly kind: 'failed'; readonly error: CudaPatchelfError };

/** The kernel driver to decide for: --driver-version, else the loaded module's, else the driver libraries' own release. */
function kernelDriver(request: LinkDriverRequest, driver: DriverRelease): DriverVersion {
  if (request.driverVersion !== null) return { version: request.driverVersion, source: '--driver-version' };
  return readKernelDriverVersion() ?? { version: driver.version, source: `the name of ${driver.libcuda}` };
}

/**
 * The link names of `files` (libcuda first) of the machine `machine` (null: libcuda's); a line for each
 * file left out, which is not a library or is another machine's.
 */
async function linksOf(files: readonly string[], machine: string | null, warnings: string[]): Promise<LibraryLinks[]> {
  const links: LibraryLinks[] = [];
  for (const file of files) {
    const read = await readLibraryLinks(file);
    const wanted = machine ?? links[0]?.machine ?? (read.ok ? read.links.machine : null);
    if (!read.ok) warnings.push(`${file} is left out: ${read.problem}`);
    else if (read.links.machine !== wanted) warnings.push(`${file} is left out: it is for another machine than the driver's libcuda`);
    else links.push(read.links);
  }
  return links;
}

/** DEST's directory, which must be there: link-driver makes the link, not the directories above it. */
function directoryOf(dest: string): Stats {
  try {
    return statSync(dirname(dest));
  } catch (error) {
    throw unchangedError(dest, error);
  }
}

/** What DEST is to hold and why, before anything is written: the report of a run but its outcome. */
type Decision = Omit<LinkDriverReport, 'outcome' | 'generation'>;

async function decide(request: LinkDriverRequest): Promise<Decision | { readonly problem: string }> {
  const search = request.from.length === 0 ? await driverInCache(request.cachePath, request.abi) : driverInDirectories(request.from);
  if (!search.found) return { problem: search.problem };
  const driver = search.release;
  const kernel = kernelDriver(request, driver);
  const warnings: string[] = [];
  if (kernel.source !== '--driver-version' && kernel.version !== driver.version)
    warnings.push(
      `the kernel driver is ${kernel.version} (${kernel.source}), its libraries ${driver.version} (${driver.source}): ` +
        'CUDA fails to initialize until the machine restarts with the driver the libraries belong to',
    );
  const candidates = [];
  for (const dir of request.cudaCompat) candidates.push(await readCompatCandidate(dir));
  const choice = chooseCompat(candidates, kernel.version);
  const driverLinks = await linksOf(driver.files, null, warnings);
  const compatLinks = choice.chosen === null ? [] : await linksOf(choice.chosen.files, driverLinks[0]?.machine ?? null, warnings);
  const links = planLinks(compatLinks, driverLinks, request.base === null ? [] : readBaseEntries(request.base));
  return { driver, kernel, verdicts: choice.verdicts, links, warnings };
}

/** The generation DEST links to when it holds the links already, else null; a DEST that is not a link stops the run. */
function heldGeneration(dest: string, current: CurrentLink, links: readonly PlannedLink[]): string | null {
  if (current.kind === 'not-a-link')
    throw new CudaPatchelfError(
      'io',
      `is ${current.what}, not a symbolic link: link-driver switches the driver link by replacing a link, ` +
        'and leaves this alone (move it away first)',
      { file: dest },
    );
  return current.kind === 'generation' && holdsPlan(current, links) ? current.generation : null;
}

async function link(request: LinkDriverRequest): Promise<LinkDriverResult> {
  const decision = await decide(request);
  if ('problem' in decision) return { kind: 'no-driver', problem: decision.problem };
  const { dest } = request;
  const linked = (outcome: LinkDriverReport['outcome'], generation: string | null): LinkDriverResult => ({
    kind: 'linked',
    report: { ...decision, outcome, generation },
  });
  const held = heldGeneration(dest, readCurrentLink(dest), decision.links);
  if (held !== null) return linked('unchanged', held);
  if (request.dryRun) return linked('would-switch', null);
  // One run at a time switches DEST: another's cleanup must not remove the generation this one made.
  const lock = await takeLock(lockName(directoryOf(dest)), dest);
  try {
    const current = readCurrentLink(dest);
    const meanwhile = heldGeneration(dest, current, decision.links);
    if (meanwhile !== null) return linked('unchanged', meanwhile);
    const switched = switchLink(dest, decision.links, current);
    const leftBehind = switched.leftBehind.map((path) => `${path}, an earlier generation, could not be removed`);
    return {
      kind: 'linked',
      report: { ...decision, warnings: [...decision.warnings, ...leftBehind], outcome: 'switched', generation: switched.generation },
    };
  } finally {
    if (lock.kind === 'locked') lock.release();
  }
}

/** Makes the driver link `request` asks for (or with --dry-run says what it would link). */
export async function linkDriver(request: LinkDriverRequest): Promise<LinkDriverResult> {
  try {
    return await link(request);
  } catch (error) {
    if (error instanceof CudaPatchelfError) return { kind: 'failed', error: error.withFile(request.dest) };
    throw error;
  }
}
