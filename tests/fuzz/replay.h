/*
 * The plain main() of a fuzz target: without libFuzzer (make check, gcc),
 * it replays every file of a corpus through LLVMFuzzerTestOneInput().
 */
#ifndef CW_FUZZ_REPLAY_H
#define CW_FUZZ_REPLAY_H

#include <stddef.h>
#include <stdint.h>

/* Each target defines it; libFuzzer or cw_fuzz_replay() calls it. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * Replays, in name order, every file not starting with '.' of each
 * directory named on the command line, or of
 * $top_srcdir/tests/fuzz/corpus/<target> without one.  An input is the
 * file's first max_bytes bytes.  Prints "cw-counts: passed=N failed=M";
 * returns the exit status: 0 when every file was replayed, 1 when one
 * could not be read or there was none (an empty corpus tests nothing),
 * 99 when a directory cannot be opened.
 */
int cw_fuzz_replay(int argc, char **argv, const char *target, size_t max_bytes);

#endif
