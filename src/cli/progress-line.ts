// A one-line progress display for a terminal: files done and their rate, redrawn at most every 200 ms.
// (Not bytes: the walk takes no stat, and most files are done without one.)

import type { CliIo } from './cli-io.js';

export class ProgressLine {
  private files = 0;
  private lastDraw = 0;
  private readonly started = Date.now();
  private readonly io: CliIo;

  constructor(io: CliIo) {
    this.io = io;
  }

  update(): void {
    this.files++;
    const now = Date.now();
    if (now - this.lastDraw < 200) return;
    this.lastDraw = now;
    const seconds = Math.max((now - this.started) / 1000, 0.001);
    this.io.errRaw(`\r${this.files} files, ${(this.files / seconds).toFixed(0)} files/s\x1b[K`);
  }

  clear(): void {
    if (this.lastDraw > 0) this.io.errRaw('\r\x1b[K');
  }
}
