// npm run kill-campaign -- [--kills N] [--seed S] [--max-file-mib M] [--load-sample N] [--durable-every N] [--report FILE]
// npm run kill-campaign -- --edit set-interpreter [--kills N] [--seed S] [--copies N] [--load-sample N] [--durable-every N] [--report FILE]
//
// SIGKILLs `cuda-patchelf apply --cuda-compat` at random moments over a tree of real ELF files (this
// machine's /usr and the fixtures; kill-campaign.ts says what is checked after each kill) and prints
// the figures as JSON; exits 1 when any file was left broken or a second apply did not finish the job.
// With `--edit set-interpreter`, `cuda-patchelf set-interpreter` over copies of the compiled programs
// of both architectures instead (interpreter-kill-campaign.ts).

import { cp, rm, symlink, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { parseArgs } from 'node:util';
import { REAL_ELF_SOURCES } from '../helpers/kill-tree.js';
import { REPO_ROOT } from '../helpers/fixtures.js';
import { assertCliBuilt, cliPath } from '../helpers/run-cli.js';
import { runInterpreterKillCampaign } from './interpreter-kill-campaign.js';
import { runKillCampaign } from './kill-campaign.js';
import { makeTempDir } from '../helpers/temp-dir.js';

const { values } = parseArgs({
  options: {
    kills: { type: 'string', default: '50' },
    seed: { type: 'string', default: '1' },
    'max-file-mib': { type: 'string', default: '8' },
    'load-sample': { type: 'string', default: '10' },
    'durable-every': { type: 'string', default: '2' },
    edit: { type: 'string', default: 'apply' },
    copies: { type: 'string', default: '10' },
    report: { type: 'string' },
  },
});

function whole(name: string, text: string | undefined): number {
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < 0) throw new Error(`--${name} takes a whole number, not "${String(text)}"`);
  return value;
}

/**
 * A copy of the built CLI for the campaign's runs: a rebuild of dist/ while the campaign runs (it takes
 * minutes) must not hand a run half-written modules. Modules resolve through a link to node_modules.
 */
async function snapshotCli(scratch: string): Promise<string> {
  const root = join(scratch, 'cli');
  await cp(join(REPO_ROOT, 'dist'), join(root, 'dist'), { recursive: true });
  await cp(join(REPO_ROOT, 'package.json'), join(root, 'package.json'));
  await symlink(join(REPO_ROOT, 'node_modules'), join(root, 'node_modules'));
  return join(root, relative(REPO_ROOT, cliPath));
}

async function main(): Promise<number> {
  assertCliBuilt();
  // On a disk, not tmpfs: --durable runs wait there for each fsync, which is where kills land inside a
  // file's writes.
  const scratch = await makeTempDir('kill');
  try {
    const cli = await snapshotCli(scratch);
    if (values.edit !== 'apply' && values.edit !== 'set-interpreter')
      throw new Error(`--edit takes apply or set-interpreter, not "${values.edit}"`);
    const { figures, problems } =
      values.edit === 'set-interpreter'
        ? await runInterpreterKillCampaign({
            kills: whole('kills', values.kills),
            seed: whole('seed', values.seed) >>> 0,
            scratch: join(scratch, 'campaign'),
            cli,
            copies: whole('copies', values.copies),
            runSample: whole('load-sample', values['load-sample']),
            durableEvery: whole('durable-every', values['durable-every']),
            log: (line) => process.stderr.write(`kill-campaign: ${line}\n`),
          })
        : await runKillCampaign({
            sources: REAL_ELF_SOURCES,
            maxFileBytes: whole('max-file-mib', values['max-file-mib']) * 2 ** 20,
            kills: whole('kills', values.kills),
            seed: whole('seed', values.seed) >>> 0,
            scratch,
            cli,
            loadSample: whole('load-sample', values['load-sample']),
            durableEvery: whole('durable-every', values['durable-every']),
            log: (line) => process.stderr.write(`kill-campaign: ${line}\n`),
          });
    for (const p of problems.slice(0, 40)) process.stderr.write(`PROBLEM round ${p.round} (killed at ${p.delayMs} ms): ${p.problem}\n`);
    if (values.report !== undefined) await writeFile(values.report, `${JSON.stringify({ figures, problems }, null, 2)}\n`);
    process.stdout.write(`${JSON.stringify(figures, null, 2)}\n`);
    return problems.length === 0 && figures.kills >= whole('kills', values.kills) ? 0 : 1;
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

process.exitCode = await main();
