// Hooks from a JSON config file (`--config`), for jobs beyond the built-ins, e.g.
//   { "hooks": [ { "name": "origin", "prepend": ["$ORIGIN/../lib"], "include": ["lib/**"], "after": ["driver"] } ] }
// Fields: name; exactly one of prepend (array), append (array), removeMatching (string); optional
// include/exclude (globs on paths relative to the tree), sharedObjectsOnly, before, after.

import { textToByteString } from '../elf/byte-string.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import type { Hook, RunpathTransform } from './hook.js';
import { hookDirectory } from './runpath-entry.js';

const KNOWN_FIELDS = new Set(['name', 'prepend', 'append', 'removeMatching', 'include', 'exclude', 'sharedObjectsOnly', 'before', 'after']);

function configError(file: string, message: string): CudaPatchelfError {
  return new CudaPatchelfError('usage', `hook config: ${message}`, { file });
}

function stringList(file: string, where: string, value: unknown): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || !value.every((item) => typeof item === 'string')) throw configError(file, `${where} must be an array of strings`);
  return value as string[];
}

function transformOf(file: string, name: string, raw: Record<string, unknown>): RunpathTransform {
  const given = ['prepend', 'append', 'removeMatching'].filter((key) => raw[key] !== undefined);
  if (given.length !== 1) throw configError(file, `hook "${name}" needs exactly one of prepend, append, removeMatching`);
  if (raw.removeMatching !== undefined) {
    if (typeof raw.removeMatching !== 'string' || raw.removeMatching === '') throw configError(file, `hook "${name}": removeMatching must be a non-empty string`);
    return { kind: 'remove-matching', fragment: textToByteString(raw.removeMatching) };
  }
  const kind = raw.prepend !== undefined ? 'prepend' : 'append';
  const listed = stringList(file, `hook "${name}": ${kind}`, raw[kind]);
  if (listed.length === 0) throw configError(file, `hook "${name}": ${kind} needs directories, without ':'`);
  const dirs = listed.map((dir) => {
    try {
      return textToByteString(hookDirectory(dir, `hook "${name}": ${kind} entry`, true));
    } catch (error) {
      throw error instanceof CudaPatchelfError ? configError(file, error.message) : error;
    }
  });
  return { kind, dirs };
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
  if (typeof config !== 'object' || config === null || !Array.isArray(hooks)) throw configError(file, 'expected an object with a "hooks" array');
  return hooks.map((entry, i): Hook => {
    if (typeof entry !== 'object' || entry === null) throw configError(file, `hooks[${i}] is not an object`);
    const raw = entry as Record<string, unknown>;
    const unknown = Object.keys(raw).filter((key) => !KNOWN_FIELDS.has(key));
    if (unknown.length > 0) throw configError(file, `hooks[${i}] has unknown field(s): ${unknown.join(', ')}`);
    if (typeof raw.name !== 'string' || !/^[A-Za-z0-9._-]+$/.test(raw.name)) throw configError(file, `hooks[${i}].name must be a word of letters, digits, . _ -`);
    const name = raw.name;
    if (raw.sharedObjectsOnly !== undefined && typeof raw.sharedObjectsOnly !== 'boolean') throw configError(file, `hook "${name}": sharedObjectsOnly must be true or false`);
    return {
      name,
      transform: transformOf(file, name, raw),
      files: {
        include: stringList(file, `hook "${name}": include`, raw.include),
        exclude: stringList(file, `hook "${name}": exclude`, raw.exclude),
        sharedObjectsOnly: raw.sharedObjectsOnly === true,
      },
      before: stringList(file, `hook "${name}": before`, raw.before),
      after: stringList(file, `hook "${name}": after`, raw.after),
    };
  });
}
