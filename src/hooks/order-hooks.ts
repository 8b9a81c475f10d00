// Orders hooks by their before/after constraints: a topological sort that, among hooks free to go
// next, takes the one declared first — so the result depends on the constraints, and on declaration
// order only where the constraints leave it open.

import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import type { Hook } from './hook.js';

/**
 * `absentAllowed`: names a constraint may refer to although the hook is not in the list (built-in hooks
 * turned off, such as `driver` under --no-driver): such a constraint has nothing to order and is
 * dropped. Any other unknown name is an error.
 */
export function orderHooks(hooks: readonly Hook[], absentAllowed: ReadonlySet<string> = new Set()): Hook[] {
  const byName = new Map<string, Hook>();
  for (const hook of hooks) {
    if (byName.has(hook.name)) throw new CudaPatchelfError('usage', `hook "${hook.name}" is declared twice`);
    byName.set(hook.name, hook);
  }
  // edges: name → names that must come after it
  const successors = new Map<string, Set<string>>(hooks.map((h) => [h.name, new Set<string>()]));
  const link = (first: string, then: string, by: string): void => {
    if (!byName.has(first) || !byName.has(then)) {
      const unknown = byName.has(first) ? then : first;
      if (absentAllowed.has(unknown)) return;
      throw new CudaPatchelfError('usage', `hook "${by}" refers to unknown hook "${unknown}"`);
    }
    successors.get(first)?.add(then);
  };
  const runsLast = (hook: Hook): boolean => hook.after.includes('*');
  for (const hook of hooks) {
    for (const name of hook.before) link(hook.name, name, hook.name);
    for (const name of hook.after) {
      if (name === '*') {
        for (const other of hooks) if (!runsLast(other)) link(other.name, hook.name, hook.name);
      } else link(name, hook.name, hook.name);
    }
  }
  const incoming = new Map<string, number>(hooks.map((h) => [h.name, 0]));
  for (const next of successors.values()) for (const name of next) incoming.set(name, (incoming.get(name) ?? 0) + 1);
  const ordered: Hook[] = [];
  const remaining = [...hooks];
  while (remaining.length > 0) {
    const index = remaining.findIndex((hook) => incoming.get(hook.name) === 0);
    if (index < 0) throw new CudaPatchelfError('usage', `hook order has a cycle among: ${remaining.map((h) => h.name).join(', ')}`);
    const [hook] = remaining.splice(index, 1) as [Hook];
    ordered.push(hook);
    for (const name of successors.get(hook.name) ?? []) incoming.set(name, (incoming.get(name) ?? 0) - 1);
  }
  return ordered;
}
