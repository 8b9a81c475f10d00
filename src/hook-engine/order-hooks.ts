// Orders hooks from where their constraints put their entries in the runpath. The hooks that add
// entries come first, in the run order the constraints imply (a topological sort: a prepending hook
// whose entries must come first runs after the other, an appending one before it; among hooks free to
// go next, the one declared first). Then the hooks that remove entries, in declaration order, so that
// they see every entry added; last the stubs replacement, as Nixpkgs' stubs hook goes last.

import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import type { Hook } from './hook.js';

type Stage = 'add' | 'remove' | 'replace';

function stageOf(hook: Hook): Stage {
  switch (hook.transform.kind) {
    case 'prepend':
    case 'append':
      return 'add';
    case 'remove-matching':
    case 'remove-pattern':
      return 'remove';
    case 'replace-matching':
      return 'replace';
  }
}

const usage = (message: string): CudaPatchelfError => new CudaPatchelfError('usage', message);

/**
 * `absentAllowed`: names a constraint may refer to although the hook is not in the list (built-in hooks
 * turned off, such as `driver` under --no-driver): such a constraint has nothing to order and is
 * dropped. Any other unknown name is an error, and so is a constraint on or naming a hook that adds no
 * entries, or one no run order can meet (an appended entry before a prepended one).
 */
export function orderHooks(hooks: readonly Hook[], absentAllowed: ReadonlySet<string> = new Set()): Hook[] {
  const byName = new Map<string, Hook>();
  for (const hook of hooks) {
    if (byName.has(hook.name)) throw usage(`hook "${hook.name}" is declared twice`);
    byName.set(hook.name, hook);
  }
  const adding = hooks.filter((hook) => stageOf(hook) === 'add');
  // run order: name → names that must run after it
  const successors = new Map<string, Set<string>>(adding.map((hook) => [hook.name, new Set<string>()]));
  /** `first`'s entries are to come before `second`'s (a constraint of hook `by`). */
  const place = (first: Hook, second: Hook, by: string): void => {
    const [a, b] = [first.transform.kind, second.transform.kind];
    if (a === 'prepend' && b === 'prepend') successors.get(second.name)?.add(first.name);
    else if (a === 'append' && b === 'append') successors.get(first.name)?.add(second.name);
    else if (a === 'append' && b === 'prepend') {
      throw usage(
        `hook "${by}" puts the entries of "${first.name}" before those of "${second.name}", but ` +
          `"${first.name}" appends and "${second.name}" prepends: appended entries always come after ` +
          'prepended ones',
      );
    }
    // A prepended entry comes before an appended one whatever the run order.
  };
  /** The hooks a constraint of `owner` names: `*` is every other hook adding at its end that does not say `*` itself. */
  const named = (owner: Hook, name: string, field: 'precedes' | 'follows'): Hook[] => {
    if (name === '*')
      return adding.filter((other) => other !== owner && other.transform.kind === owner.transform.kind && !other[field].includes('*'));
    const hook = byName.get(name);
    if (hook === undefined) {
      if (absentAllowed.has(name)) return [];
      throw usage(`hook "${owner.name}" refers to unknown hook "${name}"`);
    }
    if (stageOf(hook) !== 'add')
      throw usage(
        `hook "${owner.name}" ${field} hook "${name}", which adds no entries of its own to come before ` +
          'or after (hooks that remove entries run after every hook that adds them)',
      );
    return [hook];
  };
  for (const hook of hooks) {
    const constraints = [...hook.precedes, ...hook.follows];
    if (stageOf(hook) !== 'add' && constraints.length > 0) {
      throw usage(
        `hook "${hook.name}" adds no entries of its own, so it cannot precede or follow ` +
          `"${constraints.join('", "')}" (hooks that remove entries run after every hook that adds them)`,
      );
    }
    for (const name of hook.precedes) for (const other of named(hook, name, 'precedes')) place(hook, other, hook.name);
    for (const name of hook.follows) for (const other of named(hook, name, 'follows')) place(other, hook, hook.name);
  }
  const incoming = new Map<string, number>(adding.map((hook) => [hook.name, 0]));
  for (const next of successors.values()) for (const name of next) incoming.set(name, (incoming.get(name) ?? 0) + 1);
  const ordered: Hook[] = [];
  const remaining = [...adding];
  while (remaining.length > 0) {
    const index = remaining.findIndex((hook) => incoming.get(hook.name) === 0);
    if (index < 0) throw usage(`hook order has a cycle among: ${remaining.map((h) => h.name).join(', ')}`);
    const [hook] = remaining.splice(index, 1) as [Hook];
    ordered.push(hook);
    for (const name of successors.get(hook.name) ?? []) incoming.set(name, (incoming.get(name) ?? 0) - 1);
  }
  return [...ordered, ...hooks.filter((hook) => stageOf(hook) === 'remove'), ...hooks.filter((hook) => stageOf(hook) === 'replace')];
}
