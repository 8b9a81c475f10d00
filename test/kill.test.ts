// A small slice of the kill campaign (npm run kill-campaign runs at least 50 kills over 2,000 files):
// `apply --cuda-compat` SIGKILLed at random moments over a tree of a few hundred real ELF files. After
// each kill every file is its original, completely patched, or a prefix of its plan's writes that
// loads; a second apply finishes the job and `check` exits 0.

import { beforeAll, describe, expect, it } from 'vitest';
import { runKillCampaign, type KillFigures, type KillProblem } from './campaign/kill-campaign.js';
import { REAL_ELF_SOURCES } from './helpers/kill-tree.js';
import { assertCliBuilt, cliPath } from './helpers/run-cli.js';
import { useTempDir } from './helpers/use-temp-dir.js';

const KILLS = 4;
/** Every other killed run has --durable: an fsync between phases, where kills land inside a file's writes. */
const DURABLE_EVERY = 2;
const SEED = Number.parseInt(process.env.KILL_SEED ?? '0x4b', 16) >>> 0;

const scratch = useTempDir('kill');
let run: { figures: KillFigures; problems: KillProblem[] };

describe(`apply killed at ${KILLS} random moments (seed 0x${SEED.toString(16)})`, () => {
  beforeAll(async () => {
    assertCliBuilt();
    run = await runKillCampaign({
      // The first files of each source: Debian's libraries and programs, the Debian, CUDA and compiled fixtures.
      sources: REAL_ELF_SOURCES.map((source) => ({ ...source, maxFiles: 50 })),
      maxFileBytes: 2 * 2 ** 20,
      kills: KILLS,
      seed: SEED,
      scratch: scratch(),
      cli: cliPath,
      loadSample: 3,
      durableEvery: DURABLE_EVERY,
    });
    console.info(`kill slice: ${JSON.stringify(run.figures)}`);
  }, 180_000);

  it('kills runs over a tree of real ELF files of both architectures', () => {
    expect(run.figures.elfFiles).toBeGreaterThanOrEqual(200);
    expect(run.figures.patchedFiles).toBeGreaterThanOrEqual(150);
    expect(run.figures.kills).toBe(KILLS);
  });

  it('leaves every file original, complete or a loadable prefix, and a second apply finishes the job', () => {
    expect(run.problems.map((p) => `round ${p.round} (killed at ${p.delayMs} ms): ${p.problem}`)).toEqual([]);
    expect(run.figures.broken).toBe(0);
    expect(run.figures.unfinished).toBe(0);
    expect(run.figures.secondApplyFailures).toBe(0);
    expect(run.figures.checkFailures).toBe(0);
    expect(run.figures.loadChecks).toBeGreaterThan(0);
  });
});
