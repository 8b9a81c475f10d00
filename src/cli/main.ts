// cuda-patchelf's command line: the only module that touches `process` (bin.ts runs it).

import { availableParallelism } from 'node:os';
import type { Writable } from 'node:stream';
import { runCli } from './program.js';

/**
 * Output for a stream whose reader may go away (`cuda-patchelf plan DIR | head -1`). Node ignores
 * SIGPIPE and reports a closed pipe as an EPIPE error on the stream, which would end the process with a
 * stack trace; instead the output stops and the work goes on, so the exit code is the one the work
 * deserves (for `check`, 1 when it found files to patch) and no file is left half done.
 */
function closablePipe(stream: Writable): (text: string) => void {
  let open = true;
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error;
    open = false;
  });
  return (text) => {
    if (open) stream.write(text);
  };
}

const writeOut = closablePipe(process.stdout);
const writeErr = closablePipe(process.stderr);
void runCli(process.argv.slice(2), {
  out: (line) => writeOut(`${line}\n`),
  err: (line) => writeErr(`${line}\n`),
  errRaw: writeErr,
  setExitCode: (value) => {
    process.exitCode = value;
  },
  stderrIsTty: process.stderr.isTTY === true,
  cpuCount: availableParallelism(),
  host: { cwd: process.cwd(), arch: process.arch },
  catchInterrupt: (onInterrupt) => {
    // Once: with no listener left, the next SIGINT ends the process as it would have without this one.
    process.once('SIGINT', onInterrupt);
    return () => process.removeListener('SIGINT', onInterrupt);
  },
}).then((code) => {
  process.exitCode = code;
});
