import { configDefaults, defineConfig } from 'vitest/config';

// Two tiers. `unit`: pure modules and the committed corpus in test/unit/, no globalSetup, so a fresh
// clone runs it after `npm ci` alone. `integration`: everything else, behind the globalSetup that
// builds the fixtures with system tools. Reporters are the root's: one summary line for the whole run.
export default defineConfig({
  test: {
    testTimeout: 120_000,
    hookTimeout: 600_000,
    pool: 'forks',
    reporters: ['default', './test/helpers/summary-reporter.ts'],
    projects: [
      {
        extends: true,
        test: { name: 'unit', include: ['test/unit/**/*.test.ts'] },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, 'test/unit/**'],
          globalSetup: ['test/helpers/global-setup.ts'],
        },
      },
    ],
  },
});
