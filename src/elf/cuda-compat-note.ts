// `.note.cuda.fwd_compatibility`: what a CUDA forward-compatibility (cuda_compat) libcuda says of
// itself. The section is an SHT_NOTE section in the first PT_LOAD holding one note, owner "NVIDIA
// Corporation", type 0, whose descriptor is JSON, e.g. {"format":1,"CUDA version":"13.0",
// "driver":[535,550,565,570,575,580],"device":[1,2,7,8,9,10,11,12,13,14]}: the CUDA release it brings,
// the kernel driver branches (majors) it runs on, and the device generations it supports. NVIDIA's
// container toolkit finds it by section name (cmd/nvidia-cdi-hook/cudacompat) and decides with it
// whether the compat libcuda may be used on a machine; the driver's own libcuda has no such note.
// A note that cannot be read comes back as a value saying why, never as an exception.

import { type ByteString, byteStringToText } from './byte-string.js';
import { SHT } from './constants.js';
import type { ElfImage } from './elf-image.js';
import { readNoteSection } from './notes.js';
import { noteJson } from './note-json.js';
import { readSectionHeaders, type Section } from './section-headers.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';

export const CUDA_COMPAT_NOTE_SECTION = '.note.cuda.fwd_compatibility';
const NVIDIA_OWNER = 'NVIDIA Corporation';

export interface CudaCompatNote {
  /** "format": the layout of the JSON (1). */
  readonly format: number | null;
  /** "CUDA version": the CUDA release the compat libcuda brings (13.0). */
  readonly cudaVersion: string | null;
  /** "driver": the kernel driver branches, by major version, it runs on (535, 550, … 580). */
  readonly driver: readonly number[];
  /** "device": the device generations it supports. */
  readonly device: readonly number[];
}

export type CudaCompatNoteReading =
  | { readonly kind: 'absent' }
  | { readonly kind: 'note'; readonly note: CudaCompatNote }
  /** The section is there and says nothing usable: `problem` says why, in words. */
  | { readonly kind: 'malformed'; readonly problem: string };

/** The note as reports give it: the note, or why it cannot be read (`error`); null for a file without one. */
export type CudaCompatNoteRecord = CudaCompatNote | { readonly error: string } | null;

export function cudaCompatNoteRecord(reading: CudaCompatNoteReading): CudaCompatNoteRecord {
  return reading.kind === 'note' ? reading.note : reading.kind === 'malformed' ? { error: reading.problem } : null;
}

/** The note in words: the CUDA release, the driver branches and the devices it lists. */
export function describeCudaCompatNote(note: CudaCompatNote): string {
  const list = (values: readonly number[]): string => (values.length === 0 ? 'none listed' : values.join(' '));
  return `CUDA ${note.cudaVersion ?? 'version not given'}; driver branches ${list(note.driver)}; devices ${list(note.device)}`;
}

type Parsed = { readonly ok: true; readonly note: CudaCompatNote } | { readonly ok: false; readonly problem: string };

/**
 * The JSON keys as NVIDIA's toolkit reads them: Go's encoding/json matches a key to a field whatever
 * its case ("CUDA version" in the notes NVIDIA ships, "CUDA Version" in the toolkit's field tag).
 */
const KEYS = { format: 'format', cudaVersion: 'CUDA version', driver: 'driver', device: 'device' } as const;

function wholeNumbers(value: unknown): value is number[] {
  return Array.isArray(value) && value.every((item) => Number.isSafeInteger(item));
}

/** The note's fields from the JSON object, or what is wrong with one of them. */
function fieldsOf(json: Record<string, unknown>): Parsed {
  const field = (key: keyof typeof KEYS): unknown =>
    Object.entries(json).find(([name]) => name.toLowerCase() === KEYS[key].toLowerCase())?.[1] ?? null;
  const format = field('format');
  const cudaVersion = field('cudaVersion');
  const driver = field('driver') ?? [];
  const device = field('device') ?? [];
  if (format !== null && !Number.isSafeInteger(format)) return { ok: false, problem: `"${KEYS.format}" is not a whole number` };
  if (cudaVersion !== null && typeof cudaVersion !== 'string') return { ok: false, problem: `"${KEYS.cudaVersion}" is not a string` };
  for (const [key, value] of [
    ['driver', driver],
    ['device', device],
  ] as const)
    if (!wholeNumbers(value)) return { ok: false, problem: `"${KEYS[key]}" is not a list of whole numbers` };
  return { ok: true, note: { format: format as number | null, cudaVersion, driver: driver as number[], device: device as number[] } };
}

/**
 * The note's descriptor: UTF-8 JSON, an object. NUL bytes around it (the terminator and the padding)
 * are not part of it, as NVIDIA's toolkit trims them.
 */
export function parseCudaCompatDescriptor(descriptor: Uint8Array): Parsed {
  let start = 0;
  let end = descriptor.length;
  while (start < end && descriptor[start] === 0) start++;
  while (end > start && descriptor[end - 1] === 0) end--;
  const parsed = noteJson(descriptor.subarray(start, end), 'the description');
  if (!parsed.ok) return parsed;
  const { json } = parsed;
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    return { ok: false, problem: 'the description is not a JSON object' };
  return fieldsOf(json as Record<string, unknown>);
}

/**
 * The section's headers, or none when the table cannot be read: the loader never reads it, and a file
 * whose table is damaged has no note to tell (the reader says so where it reads the table for itself).
 */
async function sectionsOf(image: ElfImage): Promise<Section[]> {
  try {
    return await readSectionHeaders(image);
  } catch (error) {
    if (error instanceof CudaPatchelfError && error.kind === 'format') return [];
    throw error;
  }
}

/** The compat note of the file, found as NVIDIA's toolkit finds it: the SHT_NOTE section of that name, its first note. */
export async function readCudaCompatNote(image: ElfImage): Promise<CudaCompatNoteReading> {
  const section = (await sectionsOf(image)).find(
    (candidate) => candidate.sh_type === SHT.SHT_NOTE && candidate.name === CUDA_COMPAT_NOTE_SECTION,
  );
  if (section === undefined) return { kind: 'absent' };
  let first: { owner: ByteString; descriptor: Uint8Array } | undefined;
  try {
    first = (await readNoteSection(image, section))[0];
  } catch (error) {
    if (error instanceof CudaPatchelfError && error.kind === 'format') return { kind: 'malformed', problem: error.message };
    throw error;
  }
  if (first === undefined) return { kind: 'malformed', problem: `${CUDA_COMPAT_NOTE_SECTION} holds no note` };
  if (first.owner !== NVIDIA_OWNER)
    return { kind: 'malformed', problem: `the note's owner is "${byteStringToText(first.owner)}", not "${NVIDIA_OWNER}"` };
  const parsed = parseCudaCompatDescriptor(first.descriptor);
  return parsed.ok ? { kind: 'note', note: parsed.note } : { kind: 'malformed', problem: parsed.problem };
}
