// The reading of a shell wrapper without running it: which program its last exec runs, and what it
// does not follow. (test/doctor-named-files.test.ts checks each makeWrapper form against bash.)

import { describe, expect, it } from 'vitest';
import { readShellWrapper } from '../../src/doctor/shell-wrapper.js';
import type { ByteString } from '../../src/elf/byte-string.js';
import { bytes } from '../helpers/byte-strings.js';

/** A script of these lines (text), as its bytes. */
const wrapper = (...lines: string[]): ByteString => bytes(['#! /bin/bash -e', ...lines, ''].join('\n'));

describe('readShellWrapper', () => {
  it('the program of the last exec, in the forms makeWrapper has written over the years', () => {
    expect(readShellWrapper(wrapper('exec -a "$0" "/nix/store/x-foo/bin/.foo-wrapped"  "$@" '), null)?.program).toBe(
      '/nix/store/x-foo/bin/.foo-wrapped',
    );
    expect(readShellWrapper(wrapper('exec \'/nix/store/x-foo/bin/.foo-wrapped\' "${extraFlagsArray[@]}" "$@"'), null)?.program).toBe(
      '/nix/store/x-foo/bin/.foo-wrapped',
    );
    expect(readShellWrapper(wrapper('exec /usr/bin/python3 "$@"'), null)?.program).toBe('/usr/bin/python3');
  });

  it('no program to follow: a relative or computed one, or no exec at all', () => {
    expect(readShellWrapper(wrapper('exec "$dir/.foo-wrapped" "$@"'), null)?.program).toBeNull();
    expect(readShellWrapper(wrapper('exec python3 "$@"'), null)?.program).toBeNull();
    expect(readShellWrapper(wrapper('echo hello'), null)?.program).toBeNull();
    expect(readShellWrapper(bytes('echo hello\n'), null)).toBeNull();
  });

  it('the lines on LD_LIBRARY_PATH it does not follow are named, and leave the value as it was', () => {
    const reading = readShellWrapper(
      wrapper("export LD_LIBRARY_PATH='/a'", 'export LD_LIBRARY_PATH=$(cat /etc/libs)', 'LD_LIBRARY_PATH=$HOME/lib', 'exec /x'),
      null,
    );
    expect(reading?.ldLibraryPath).toBe('/a');
    expect(reading?.unfollowed).toEqual(['export LD_LIBRARY_PATH=$(cat /etc/libs)', 'LD_LIBRARY_PATH=$HOME/lib']);
  });

  it('an assignment inside a condition it cannot evaluate, or after else, is not followed', () => {
    const reading = readShellWrapper(
      wrapper(
        'if [ -d /opt ]; then',
        "  export LD_LIBRARY_PATH='/opt/lib'",
        'fi',
        "if [[ $LD_LIBRARY_PATH != *':/b:'* ]]; then",
        "  LD_LIBRARY_PATH=$LD_LIBRARY_PATH'/b'",
        'else',
        "  LD_LIBRARY_PATH='/c'",
        'fi',
        'export LD_LIBRARY_PATH',
        'exec /x',
      ),
      null,
    );
    expect(reading?.ldLibraryPath).toBe('/b');
    expect(reading?.unfollowed).toEqual(["export LD_LIBRARY_PATH='/opt/lib'", "LD_LIBRARY_PATH='/c'"]);
  });

  it('reads a name that is not ASCII as its bytes: 0xa0, the last byte of à in UTF-8, is no white space', () => {
    const reading = readShellWrapper(wrapper('export LD_LIBRARY_PATH=/opt/là', 'exec /opt/voilà/bin/prog "$@"'), null);
    expect(reading?.program).toBe(bytes('/opt/voilà/bin/prog'));
    expect(reading?.ldLibraryPath).toBe(bytes('/opt/là'));
  });

  it('a value set without export reaches the program only when the variable came exported', () => {
    expect(readShellWrapper(wrapper("LD_LIBRARY_PATH='/a'", 'exec /x'), null)?.ldLibraryPath).toBeNull();
    expect(readShellWrapper(wrapper("LD_LIBRARY_PATH='/a'", 'exec /x'), bytes('/start'))?.ldLibraryPath).toBe('/a');
  });
});
