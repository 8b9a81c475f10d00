// When a batch starts its worker threads: once the files that turned out to be ELF have taken this
// many milliseconds in the main thread.
//
// Starting the pool costs about that much (each worker is a new V8 isolate that loads the worker
// bundle), and most files of a tree are not ELF: a sniff and a skip that cost less in the main thread
// than the message that would send them to a worker. Measured on 16 cores with eight threads against
// one (docs/benchmarks.md, Threads): PyTorch's 4 executables took 213 ms against 155 ms, 7,030 headers
// 342 ms against 305 ms, the whole closure 590 ms against 711 ms. So a tree with less ELF work than a
// pool's start never pays for one, and a larger one pays that much at most before its threads take over.
// A module of its own so that the command line reads the default without loading the batch.

export const THREADS_AFTER_MS = 60;
