// The tree commands' arguments: an empty path, a tree that does not exist or is no directory or file,
// relative or empty directories, stubs patterns that would wipe runpaths, and flags that contradict
// each other are usage errors (exit 2, one line, nothing read or written); directories are taken in one spelling, so a trailing slash adds no second entry.

import { chmod, copyFile, mkdir, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { fixture } from './helpers/fixtures.js';
import { assertCliBuilt, runCli, stderrLines } from './helpers/run-cli.js';
import { makeTempDir } from './helpers/temp-dir.js';
import { contentDifferences, snapshotTree } from './helpers/tree-tools.js';
import { readDynamic } from './helpers/readelf.js';
import { mustExec } from './helpers/exec.js';

const COMPAT = '/nix/store/00000000000000000000000000000000-cuda_compat';
let tree: string;

beforeAll(async () => {
  assertCliBuilt();
  tree = await makeTempDir('arguments');
  await mkdir(join(tree, 'lib'));
  await copyFile(fixture('compiled/x86_64/libuser-runpath').path, join(tree, 'lib', 'libuser.so'));
  await chmod(join(tree, 'lib', 'libuser.so'), 0o755);
  await symlink(join(tree, 'collected-build'), join(tree, 'dangling-result'));
  await mustExec('mkfifo', [join(tree, 'fifo')]);
});

const usage: Array<[string, string[], RegExp]> = [
  ['an empty path (an unset $out)', ['apply', ''], /an empty path was given/],
  ['an empty path for check', ['check', ''], /an empty path was given/],
  ['an empty path for plan, beside a real one', ['plan', '.', ''], /an empty path was given/],
  ['an empty path for print', ['print', ''], /an empty path was given \(an unset variable\?\); name the files to describe/],
  [
    'an empty path for an edit, beside a real one',
    ['set-runpath', '/opt/x', 'lib/libuser.so', ''],
    /an empty path was given .*; name the files to edit/,
  ],
  ['an empty path for doctor', ['doctor', ''], /an empty path was given .*; name the files or trees to diagnose/],
  ['an empty --driver-link', ['apply', '.', '--driver-link', ''], /--driver-link is empty; it must be an absolute path/],
  ['an empty --cuda-compat', ['apply', '.', '--cuda-compat', ''], /--cuda-compat is empty; it must be an absolute path/],
  ['a relative --cuda-compat', ['apply', '.', '--cuda-compat', './cc'], /--cuda-compat "\.\/cc" is relative; it must be an absolute path/],
  ['a relative --driver-link', ['apply', '.', '--driver-link', 'run/opengl-driver'], /--driver-link "run\/opengl-driver" is relative/],
  ['$ORIGIN as --cuda-compat', ['apply', '.', '--cuda-compat', '$ORIGIN/cc'], /--cuda-compat "\$ORIGIN\/cc" is relative/],
  ["a ':' in --cuda-compat", ['apply', '.', '--cuda-compat', '/a:/b'], /--cuda-compat "\/a:\/b" contains ':'/],
  ['an empty stubs pattern', ['apply', '.', '--remove-stubs', '--stubs-pattern', ''], /stubs pattern "" would match every runpath entry/],
  ['a "/" stubs pattern', ['apply', '.', '--remove-stubs', '--stubs-pattern', '/'], /stubs pattern "\/" would match every runpath entry/],
  [
    'a "*" stubs pattern among good ones',
    ['check', '.', '--remove-stubs', '--stubs-pattern', '*/lib/stubs', '--stubs-pattern', '*'],
    /stubs pattern "\*" would match/,
  ],
  ['--stubs-pattern without --remove-stubs', ['apply', '.', '--stubs-pattern', '*/lib/stubs'], /--stubs-pattern needs --remove-stubs/],
  [
    '--no-driver with --driver-link',
    ['apply', '.', '--no-driver', '--cuda-compat', COMPAT, '--driver-link', '/opt/gl'],
    /--driver-link has no effect with --no-driver/,
  ],
  ['--quiet with --verbose', ['plan', '.', '--quiet', '--verbose'], /--quiet and --verbose contradict each other/],
  ['--json with --verbose', ['check', '.', '--json', '-v'], /--json reports every file; --verbose is for the text output/],
  ['--json with --quiet', ['apply', '.', '--json', '-q'], /--json reports every file; --quiet is for the text output/],
  ['a tree named twice', ['apply', '.', '--nixpkgs-compat', '.'], /\. is the same tree as \.: name each tree once, none inside another/],
  ['a tree named twice, spelled two ways', ['check', '.', 'lib/..'], /lib\/\.\. is the same tree as \./],
  ['a tree inside another', ['apply', 'lib', '.', '--nixpkgs-compat'], /lib lies inside \.: name each tree once/],
  ['a file inside a tree', ['plan', '.', 'lib/libuser.so'], /lib\/libuser\.so lies inside \./],
  // A mistyped tree beside a good one: the good one must not be patched before the run fails.
  [
    'a tree that does not exist, before a real one',
    ['apply', 'no-such-tree', '.'],
    /^cuda-patchelf: no-such-tree: cannot walk: no such file$/,
  ],
  [
    'a tree that does not exist, after a real one',
    ['apply', '.', '/nonexistent'],
    /^cuda-patchelf: \/nonexistent: cannot walk: no such file$/,
  ],
  ['a tree that does not exist, for check', ['check', 'lib', 'no-such-tree'], /no-such-tree: cannot walk: no such file/],
  ['a tree that does not exist, for plan', ['plan', 'no-such-tree'], /no-such-tree: cannot walk: no such file/],
  [
    'a dangling link as a tree (./result of a collected build)',
    ['apply', 'dangling-result', '.'],
    /dangling-result: cannot walk: no such file/,
  ],
  ['a FIFO as a tree', ['apply', 'fifo', 'lib'], /^cuda-patchelf: fifo: cannot walk a FIFO: name a directory or a file$/],
  ['--libs without --auto-patchelf', ['apply', '.', '--libs', 'lib'], /^cuda-patchelf: --libs needs --auto-patchelf$/],
  ['--keep-libc without --auto-patchelf', ['plan', '.', '--keep-libc'], /--keep-libc needs --auto-patchelf/],
  ['--ignore-missing without --auto-patchelf', ['check', '.', '--ignore-missing', '*'], /--ignore-missing needs --auto-patchelf/],
  [
    'an --interpreter that does not exist',
    ['apply', '.', '--auto-patchelf', '--interpreter', '/nonexistent/ld.so'],
    /^cuda-patchelf: \/nonexistent\/ld\.so: --interpreter: .*no such file/,
  ],
  ['an --interpreter that is not ELF', ['apply', '.', '--auto-patchelf', '--interpreter', 'fifo'], /^cuda-patchelf: fifo: --interpreter: /],
  ['a --libc-dir that is no directory', ['apply', '.', '--auto-patchelf', '--libc-dir', 'lib/libuser.so'], /--libc-dir: not a directory/],
];

describe('usage errors', () => {
  it.each(usage)('%s: exit 2, one line, nothing written', async (_label, args, message) => {
    const before = await snapshotTree(tree);
    // Run from inside the tree: an empty path taken as "." would patch it.
    const result = await runCli(args, { cwd: tree });
    expect(result.code, result.stderr).toBe(2);
    expect(result.stdout).toBe('');
    const lines = stderrLines(result);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^cuda-patchelf: /);
    expect(lines[0]).toMatch(message);
    expect(contentDifferences(before, await snapshotTree(tree))).toEqual([]);
  });
});

describe('accepted spellings', () => {
  it('normalises --driver-link: a trailing slash writes DIR/lib, once', async () => {
    const work = await makeTempDir('arguments-spelling');
    const file = join(work, 'libuser.so');
    await copyFile(fixture('compiled/x86_64/libuser-runpath').path, file);
    const first = await runCli(['apply', work, '--driver-link', '/run//opengl-driver/'], { cwd: work });
    expect(first.code, first.stderr).toBe(0);
    const once = (await readDynamic(file))?.runpath;
    expect(once?.split(':')[0]).toBe('/run/opengl-driver/lib');
    // The same directory spelled otherwise is the entry already there: nothing to do.
    const again = await runCli(['check', work, '--driver-link', '/run/opengl-driver//'], { cwd: work });
    expect(again.code, again.stdout).toBe(0);
    expect(again.stdout).toContain('cuda-patchelf check: nothing to do');
    // An entry in the file spelled with a doubled slash is the driver's entry too: it is not added twice.
    const set = await runCli(['set-runpath', '/run/opengl-driver//lib/:/opt/x', file]);
    expect(set.code, set.stderr).toBe(0);
    const respelled = await runCli(['apply', work], { cwd: work });
    expect(respelled.code, respelled.stderr).toBe(0);
    expect((await readDynamic(file))?.runpath).toBe('/run/opengl-driver/lib:/opt/x');
    const check = await runCli(['check', work], { cwd: work });
    expect(check.code, check.stdout).toBe(0);
  });

  it('takes --driver-link with --no-driver when --remove-stubs uses it', async () => {
    const result = await runCli(['plan', tree, '--no-driver', '--remove-stubs', '--driver-link', '/opt/gl'], { cwd: tree });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^cuda-patchelf plan: /m);
  });
});
