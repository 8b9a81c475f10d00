// The hooks of hooks/ in a real Nix build (fixtures/nix/default.nix, Debian's nix-bin, offline, as root)
// with separateDebugInfo: a third output, debug, holds `objcopy --only-keep-debug` files (program headers
// with PT_DYNAMIC over a NOBITS .dynamic), which the hooks walk with the other outputs as Nixpkgs' do. The
// hooks sourced in the order Nixpkgs' need, in the reverse order, and twice (from nativeBuildInputs and
// from buildInputs): every build must succeed, run its program, leave the debug files byte for byte as
// objcopy wrote them, and give every file the runpath that Nixpkgs' hooks (restated in
// fixtures/nix/nixpkgs/, run with patchelf in the same kind of build) give it.

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { useDriverLinkedBuild, type NixRun } from './helpers/nix-build.js';
import { cliPath } from './helpers/run-cli.js';
import { VERSION, greetReport, outputSearchPaths, type SearchPath } from './helpers/shim-stdenv.js';
import { sha256File } from './helpers/tree-tools.js';
import type { ExecResult } from './helpers/exec.js';

const OURS = ['greetDebug', 'greetDebugReversed', 'greetDebugTwice'] as const;
const NIXPKGS = 'greetDebugNixpkgs';

const nix = useDriverLinkedBuild('nix-debug', [...OURS, NIXPKGS]);
let run: NixRun;
let driverLink: string;
let built: ExecResult;
beforeAll(() => {
  ({ run, driverLink, built } = nix());
});

/** A derivation's outputs by name (its .drv left out). */
function outputsOf(attr: string): Record<string, string> {
  const { drv: _drv, ...outputs } = run.paths[attr] ?? {};
  return outputs;
}

/** The search paths of every ELF file of the derivation's outputs, its own output paths written <name>. */
function searchPaths(attr: string): Promise<Record<string, SearchPath>> {
  const outputs = outputsOf(attr);
  return outputSearchPaths(outputs, Object.fromEntries(Object.entries(outputs).map(([name, path]) => [path, `<${name}>`])));
}

describe('a real Nix build with separateDebugInfo and the hooks (x86_64-linux)', () => {
  it("builds, and each build runs its program, which loads cuda_compat's libcuda", () => {
    expect(built.stderr.split(`install check: ${greetReport(VERSION.compat)}`)).toHaveLength(OURS.length + 2);
  });

  it('leaves the debug files byte for byte as objcopy wrote them', async () => {
    for (const attr of [...OURS, NIXPKGS]) {
      const debug = run.output(attr, 'debug');
      const noted = (await readFile(join(debug, 'debug-files.sha256'), 'utf8')).trim().split('\n');
      expect(
        noted.filter((line) => /lib\/debug\/\.build-id\/[0-9a-f]{2}\/[0-9a-f]{38}\.debug$/.test(line)),
        attr,
      ).toHaveLength(2);
      for (const line of noted) {
        const [hash, file] = line.split(/\s+/) as [string, string];
        expect(await sha256File(join(debug, file)), `${attr}: ${file}`).toBe(hash);
      }
    }
  });

  it("gives every file of every output the runpath Nixpkgs' hooks give it, whatever the order and however often the hooks are sourced", async () => {
    const theirs = await searchPaths(NIXPKGS);
    expect(theirs['lib/lib/libgreet.so']?.runpath).toBe(`${run.output('cudaCompat')}/compat:${driverLink}/lib`);
    expect(Object.keys(theirs).filter((file) => file.startsWith('debug/lib/debug/.build-id/'))).toHaveLength(2);
    for (const attr of OURS) {
      const ours = await searchPaths(attr);
      expect(ours, attr).toEqual(theirs);
    }
  });

  it("walked the debug output with the others, one line per file under NIX_DEBUG, through stdenv's nixLog", () => {
    const out = run.output('greetDebug', 'out');
    const lib = run.output('greetDebug', 'lib');
    const debug = run.output('greetDebug', 'debug');
    expect(built.stderr).toContain(`cuda-patchelf hook: command: '${cliPath}' 'apply' '--make-writable' '--driver-link' '${driverLink}'`);
    expect(built.stderr).toContain(`'--verbose'  -- '${out}' '${lib}' '${debug}'`);
    expect(built.stderr).toContain(
      `cudaPatchelfLog: cuda-patchelf hook: running cuda-patchelf apply (driver cuda-compat remove-stubs) over 3 output(s)`,
    );
    const lines = built.stderr.split('\n');
    for (const file of [join(out, 'bin', 'greet'), join(lib, 'lib', 'libgreet.so')]) {
      expect(
        lines.filter((line) => line.includes(file) && !line.includes('shrinking ') && !line.includes('separating debug info')),
        file,
      ).toHaveLength(1);
    }
  });
});
