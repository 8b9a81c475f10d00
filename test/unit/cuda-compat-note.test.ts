// The description of `.note.cuda.fwd_compatibility` as NVIDIA's container toolkit reads it: JSON with
// NUL bytes around it, keys matched whatever their case, fields missing read as empty, and every way it
// can be malformed a value naming what is wrong. The note read out of real gcc-built libraries (and
// what `print` shows of it) is tested in test/print-cuda-compat-note.test.ts.

import { describe, expect, it } from 'vitest';
import { parseCudaCompatDescriptor } from '../../src/elf/cuda-compat-note.js';

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);

/** The description of the H200's compat libcuda 580.95.05, as the note carries it (with its NUL). */
const H200 = '{"format":1,"CUDA version":"13.0","driver":[535,550,565,570,575,580],"device":[1,2,7,8,9,10,11,12,13,14]}\0';

describe('the compat note description', () => {
  it('reads the CUDA release, the driver branches and the devices', () => {
    expect(parseCudaCompatDescriptor(bytes(H200))).toEqual({
      ok: true,
      note: { format: 1, cudaVersion: '13.0', driver: [535, 550, 565, 570, 575, 580], device: [1, 2, 7, 8, 9, 10, 11, 12, 13, 14] },
    });
  });

  it('ignores NUL bytes before and after the JSON, and keys of other case ("CUDA Version")', () => {
    expect(parseCudaCompatDescriptor(bytes('\0{"Format":1,"CUDA Version":"12.9","DRIVER":[575]}\0\0\0'))).toEqual({
      ok: true,
      note: { format: 1, cudaVersion: '12.9', driver: [575], device: [] },
    });
  });

  it('a note without driver branches (a Jetson compat libcuda lists none) reads them as empty', () => {
    expect(parseCudaCompatDescriptor(bytes('{"format":1,"CUDA version":"13.2"}'))).toEqual({
      ok: true,
      note: { format: 1, cudaVersion: '13.2', driver: [], device: [] },
    });
    expect(parseCudaCompatDescriptor(bytes('{"driver":null}'))).toEqual({
      ok: true,
      note: { format: null, cudaVersion: null, driver: [], device: [] },
    });
  });

  it('says what is wrong with a description that cannot be read', () => {
    const problem = (text: string | Uint8Array): string | null => {
      const parsed = parseCudaCompatDescriptor(typeof text === 'string' ? bytes(text) : text);
      return parsed.ok ? null : parsed.problem;
    };
    expect(problem('{"format":1,')).toMatch(/^the description is not JSON \(/);
    expect(problem('')).toMatch(/^the description is not JSON \(/);
    expect(problem(new Uint8Array([0x7b, 0xff, 0x7d]))).toBe('the description is not UTF-8 text');
    expect(problem('[535, 580]')).toBe('the description is not a JSON object');
    expect(problem('"13.0"')).toBe('the description is not a JSON object');
    expect(problem('{"driver":"580"}')).toBe('"driver" is not a list of whole numbers');
    expect(problem('{"driver":[580.5]}')).toBe('"driver" is not a list of whole numbers');
    expect(problem('{"device":[1,"2"]}')).toBe('"device" is not a list of whole numbers');
    expect(problem('{"CUDA version":13.0}')).toBe('"CUDA version" is not a string');
    expect(problem('{"format":"1"}')).toBe('"format" is not a whole number');
  });
});
