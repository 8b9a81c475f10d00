#!/usr/bin/env node
// cuda-patchelf's entry point: the only module that touches `process`.

import { availableParallelism } from 'node:os';
import { runCli } from './program.js';

const code = await runCli(process.argv.slice(2), {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
  errRaw: (text) => process.stderr.write(text),
  setExitCode: (value) => {
    process.exitCode = value;
  },
  stderrIsTty: process.stderr.isTTY === true,
  cpuCount: availableParallelism(),
});
process.exitCode = code;
