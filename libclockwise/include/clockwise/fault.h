/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * clockwise/fault.h — an I/O engine that injects faults, for tests.
 *
 * After SQLite's crash simulator (src/test6.c) and the syscall table of
 * its os_unix.c: the fault engine stacks on any other engine (io_uring,
 * libaio, memory, an emulated disk) and passes every request through,
 * except those it is told to break:
 *
 *   - the nth request, the nth write or the nth fsync of a file, or every
 *     read or write touching a byte range, fails with -EIO (nothing of a
 *     failed write reaches the file);
 *   - the nth write is torn: its first half (in 512-byte sectors) reaches
 *     the file, and it fails with -EIO;
 *   - a power cut: every write no completed fsync covers is undone (the
 *     bytes the file held at the last fsync that covered them are put
 *     back), or with tear, kept, half kept or undone at random; then the
 *     process is killed with SIGKILL, as if the power failed, so that the
 *     next one starts on what a real disk would have kept.
 *
 * An fsync covers the writes that had completed when it was submitted,
 * as fdatasync(2) does.  The shadow that makes the cut possible is kept
 * per file (by device and inode), for every engine of the process that
 * writes it, and a cut undoes the unsynced writes of every file any fault
 * engine wrote: the power fails for every disk at once.  It costs a copy
 * of every unsynced write and of the bytes it overwrote, so it is for
 * tests, never for production.
 *
 * Writes that reach a file other than through a fault engine (pwrite on
 * the descriptor) are not seen: they count as synced.
 */
#ifndef CLOCKWISE_FAULT_H
#define CLOCKWISE_FAULT_H

#include <clockwise/io.h>

#ifdef __cplusplus
extern "C" {
#endif

struct cw_io_fault_opts {
	size_t size;			/* sizeof(struct cw_io_fault_opts) */
	/* 1-based counts per file, over every fault engine of the process;
	 * 0: never. */
	uint64_t fail_nth;		/* the nth request of any kind fails */
	uint64_t fail_write;		/* the nth write fails */
	uint64_t fail_fsync;		/* the nth fsync fails */
	uint64_t tear_write;		/* the nth write is torn */
	/* Every read and write touching [fail_off, fail_off + fail_len)
	 * fails (fail_len 0: none); fail_count of them at most (0: all). */
	uint64_t fail_off, fail_len, fail_count;
	/* The power fails when the nth write of a file is submitted (that
	 * write is lost), or at the first request once the file cut_file
	 * exists ("": none). */
	uint64_t cut_write;
	char cut_file[256];
	bool cut_tear;			/* unsynced writes torn, not all undone */
	uint64_t seed;			/* for cut_tear */
	/* Every request comes back no sooner than this long after it was
	 * submitted (0: as soon as the inner engine has it): a slow
	 * backing store, such as a busy host's disk under an emulator. */
	uint64_t delay_us;
	/* Every request fails (EIO) once the file fail_file exists ("":
	 * never): a disk that dies when a test says so. */
	char fail_file[256];
};

/* No faults (a cut may still come from another engine or cw_io_fault_cut). */
void cw_io_fault_opts_init(struct cw_io_fault_opts *opts);

/* Parses a comma-separated list of settings into opts (which it
 * initializes first): fail=N, fail-write=N, fail-fsync=N, tear-write=N,
 * fail-range=OFF+LEN, fail-count=N, cut-write=N, cut-file=PATH,
 * cut=drop|tear, seed=N, delay-us=N, fail-file=PATH; sizes take the suffixes k, M, G.  "" is valid
 * (no faults).  -EINVAL with the reason in why. */
int cw_io_fault_parse(const char *spec, struct cw_io_fault_opts *opts, char *why, size_t why_len);

/* A fault engine on inner (which it owns from now on, also on failure),
 * as deep as inner.  -EINVAL for bad options. */
int cw_io_fault_new(struct cw_io_engine *inner, const struct cw_io_fault_opts *opts,
		    struct cw_io_engine **ret_engine);

/* The power cut without the kill: undoes (or with tear, tears) every write
 * of every file a fault engine wrote that no completed fsync covers, and
 * syncs what is left.  Later requests go on as after a restart. */
int cw_io_fault_cut(bool tear, uint64_t seed);

struct cw_io_fault_stats {
	uint64_t injected;		/* requests failed or torn */
	uint64_t unsynced_writes;	/* writes a cut now would undo */
	uint64_t unsynced_bytes;
};

/* Counts over every file of the process. */
void cw_io_fault_stats(struct cw_io_fault_stats *ret_stats);

#ifdef __cplusplus
}
#endif
#endif
