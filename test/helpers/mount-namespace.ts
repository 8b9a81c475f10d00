// A command prefix that runs what follows in a user and mount namespace of the test's own, once `steps`
// (sh commands, run as that namespace's root) have changed what it sees: another /proc/cpuinfo, loader
// cache or kernel driver for one command, and nothing changed on the machine.

import { requireTool } from './fixtures.js';

/** The prefix; the steps see `arg0` as $0, and the command after the prefix runs once they all succeeded. */
export function inMountNamespace(steps: readonly string[], arg0 = 'sh'): string[] {
  const script = [...steps, 'exec "$@"'].join(' && ');
  return [requireTool('unshare'), '--user', '--map-root-user', '--mount', requireTool('sh'), '-c', script, arg0];
}
