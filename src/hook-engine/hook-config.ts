// Hooks from a JSON config file (`--config`), for jobs beyond the built-ins, e.g.
//   { "hooks": [ { "name": "origin", "prepend": ["$ORIGIN/../lib"], "include": ["lib/**"], "precedes": ["driver"] } ] }
// Fields: name; exactly one of prepend (array), append (array), removeMatching (string); optional
// include/exclude (globs on paths relative to the tree), sharedObjectsOnly, precedes, follows (where the
// hook's entries go in the runpath, relative to other hooks' entries).

import { textToByteString } from '../elf/byte-string.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import { BUILTIN_REMOVAL_HOOK_NAMES } from './builtin-hooks.js';
import type { Hook, RunpathTransform } from './hook.js';
import { hookDirectory } from './runpath-entry.js';

const KNOWN_FIELDS = new Set([
  'name',
  'prepend',
  'append',
  'removeMatching',
  'include',
  'exclude',
  'sharedObjectsOnly',
  'precedes',
  'follows',
]);
/** Fields of older configs, refused with what to write instead (refuseRunOrder). */
const RUN_ORDER_FIELDS = ['before', 'after'] as const;

function configError(file: string, message: string): CudaPatchelfError {
  return new CudaPatchelfError('usage', `hook config: ${message}`, { file });
}

function stringList(file: string, where: string, value: unknown): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || !value.every((item) => typeof item === 'string'))
    throw configError(file, `${where} must be an array of strings`);
  return value as string[];
}

function transformOf(file: string, name: string, raw: Record<string, unknown>): RunpathTransform {
  const given = ['prepend', 'append', 'removeMatching'].filter((key) => raw[key] !== undefined);
  if (given.length !== 1) throw configError(file, `hook "${name}" needs exactly one of prepend, append, removeMatching`);
  if (raw.removeMatching !== undefined) {
    if (typeof raw.removeMatching !== 'string' || raw.removeMatching === '')
      throw configError(file, `hook "${name}": removeMatching must be a non-empty string`);
    return { kind: 'remove-matching', fragment: textToByteString(raw.removeMatching) };
  }
  const kind = raw.prepend !== undefined ? 'prepend' : 'append';
  const listed = stringList(file, `hook "${name}": ${kind}`, raw[kind]);
  if (listed.length === 0) throw configError(file, `hook "${name}": ${kind} needs directories, without ':'`);
  const dirs = listed.map((dir) => {
    try {
      return hookDirectory(dir, `hook "${name}": ${kind} entry`, true);
    } catch (error) {
      throw error instanceof CudaPatchelfError ? configError(file, error.message) : error;
    }
  });
  return { kind, dirs };
}

/**
 * `before` and `after` named the order hooks run in, which puts a prepended entry before the entries of
 * the hooks it runs after: read as positions they would flip an old config's result, so they are refused,
 * saying what to write instead (for a hook ordered against one adding at the same end of the runpath).
 */
function refuseRunOrder(file: string, name: string, raw: Record<string, unknown>, transform: RunpathTransform): void {
  for (const field of RUN_ORDER_FIELDS) {
    if (raw[field] === undefined) continue;
    const names = JSON.stringify(raw[field]);
    const ranAfter = field === 'after';
    const instead =
      transform.kind === 'remove-matching'
        ? 'leave it out: a removeMatching hook runs after every hook that adds entries'
        : `write "${ranAfter === (transform.kind === 'prepend') ? 'precedes' : 'follows'}": ${names} (where its entries go in the runpath)`;
    throw configError(
      file,
      `hook "${name}": "${field}" is no longer read (it named the order hooks run in, not where their entries go); ${instead}`,
    );
  }
}

/** A constraint's hook names: a removal hook adds no entries that another hook's could come before or after. */
function placementList(
  file: string,
  name: string,
  field: 'precedes' | 'follows',
  raw: Record<string, unknown>,
  transform: RunpathTransform,
): string[] {
  const names = stringList(file, `hook "${name}": ${field}`, raw[field]);
  if (names.length > 0 && transform.kind === 'remove-matching') {
    throw configError(
      file,
      `hook "${name}": a removeMatching hook adds no entries to place; leave "${field}" out (it runs after every hook that adds entries)`,
    );
  }
  const removal = names.find((named) => BUILTIN_REMOVAL_HOOK_NAMES.has(named));
  if (removal !== undefined)
    throw configError(file, `hook "${name}": ${field} names "${removal}", which adds no entries of its own to come before or after`);
  return names;
}

/** Parses the text of a config file into hooks (`file` names it in errors). */
export function parseHookConfig(file: string, text: string): Hook[] {
  let config: unknown;
  try {
    config = JSON.parse(text);
  } catch (error) {
    throw configError(file, `not valid JSON (${error instanceof Error ? error.message : String(error)})`);
  }
  const hooks = (config as { hooks?: unknown } | null)?.hooks;
  if (typeof config !== 'object' || config === null || !Array.isArray(hooks))
    throw configError(file, 'expected an object with a "hooks" array');
  return hooks.map((entry, i): Hook => {
    if (typeof entry !== 'object' || entry === null) throw configError(file, `hooks[${i}] is not an object`);
    const raw = entry as Record<string, unknown>;
    const unknown = Object.keys(raw).filter((key) => !KNOWN_FIELDS.has(key) && !(RUN_ORDER_FIELDS as readonly string[]).includes(key));
    if (unknown.length > 0)
      throw configError(file, `hooks[${i}] has unknown ${unknown.length === 1 ? 'field' : 'fields'}: ${unknown.join(', ')}`);
    if (typeof raw.name !== 'string' || !/^[A-Za-z0-9._-]+$/.test(raw.name))
      throw configError(file, `hooks[${i}].name must be a word of letters, digits, . _ -`);
    const name = raw.name;
    if (raw.sharedObjectsOnly !== undefined && typeof raw.sharedObjectsOnly !== 'boolean')
      throw configError(file, `hook "${name}": sharedObjectsOnly must be true or false`);
    const transform = transformOf(file, name, raw);
    refuseRunOrder(file, name, raw, transform);
    return {
      name,
      transform,
      files: {
        include: stringList(file, `hook "${name}": include`, raw.include),
        exclude: stringList(file, `hook "${name}": exclude`, raw.exclude),
        sharedObjectsOnly: raw.sharedObjectsOnly === true,
      },
      precedes: placementList(file, name, 'precedes', raw, transform),
      follows: placementList(file, name, 'follows', raw, transform),
    };
  });
}
