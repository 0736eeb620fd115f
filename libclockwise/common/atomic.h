/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * atomic.h — atomic operations on words that are not _Atomic
 * (Concurrency Kit's ck_pr.h shape): every such access goes through a
 * wrapper whose name says its memory order, so an ordering argument (the
 * one slots.c opens with) can be checked against the code line by line.
 *
 * The tree's atomics are C11's <stdatomic.h> on _Atomic objects; these
 * wrappers, the one place the compiler's __atomic builtins are used, are
 * for the words C11 cannot name: the slot records and descriptors (plain
 * words laid out for cmpxchg16b pairs and read in bulk), fields of
 * installed structs that a C++ or pre-C11 user also includes (struct
 * cw_admit_resv's parts and a part's task.service_ns, admit-state.h),
 * a word one server hands another through a plain pointer (the NBD
 * server's per-connection word for its back end, nbdsrv_io.conn_data),
 * and memory the kernel writes (the AIO completion ring).
 */
#ifndef CW_COMMON_ATOMIC_H
#define CW_COMMON_ATOMIC_H

#include <stdint.h>
#include <stdbool.h>

/* Hot shared words live alone on a cache line. */
#define CW_CACHELINE 64
#define CW_PADDED __attribute__((aligned(CW_CACHELINE)))

#define cw_pr_load_relaxed(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define cw_pr_load_acquire(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define cw_pr_load_seq(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define cw_pr_store_relaxed(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define cw_pr_store_release(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define cw_pr_store_seq(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)
#define cw_pr_faa_seq(p, v) __atomic_fetch_add((p), (v), __ATOMIC_SEQ_CST)
#define cw_pr_faa_relaxed(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)
#define cw_pr_for_seq(p, v) __atomic_fetch_or((p), (v), __ATOMIC_SEQ_CST)
#define cw_pr_fand_seq(p, v) __atomic_fetch_and((p), (v), __ATOMIC_SEQ_CST)
/* Compare-and-swap of any word: seq_cst on success, acquire on failure
 * (*expected then holds the value found). */
#define cw_pr_cas_seq(p, expected, desired) \
	__atomic_compare_exchange_n((p), (expected), (desired), false, __ATOMIC_SEQ_CST, \
				    __ATOMIC_ACQUIRE)

/* Compare-and-swap, sequentially consistent on success and acquire on
 * failure; on failure *expected holds the value found. */
static inline bool cw_pr_cas_seq_u64(uint64_t *p, uint64_t *expected, uint64_t desired)
{
	return cw_pr_cas_seq(p, expected, desired);
}

static inline bool cw_pr_cas_seq_i64(int64_t *p, int64_t *expected, int64_t desired)
{
	return cw_pr_cas_seq(p, expected, desired);
}

/*
 * Compare-and-swap of two adjacent words, p 16-byte aligned, at once
 * (x86-64 cmpxchg16b), so that a run of slots costs half as many CASes.
 * ThreadSanitizer implements 16-byte atomics behind a lock of its own,
 * which is not atomic against the 8-byte operations on the same words:
 * there, and off x86-64, CW_PR_HAVE_CAS_PAIR is 0 and callers take one
 * word at a time.
 */
#if defined(__SANITIZE_THREAD__)
#define CW_PR_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CW_PR_UNDER_TSAN 1
#endif
#endif
#if defined(__x86_64__) && !defined(CW_PR_UNDER_TSAN)
#define CW_PR_HAVE_CAS_PAIR 1
static inline bool cw_pr_cas_pair_seq(uint64_t *p, uint64_t e0, uint64_t e1, uint64_t d0,
				      uint64_t d1)
{
	bool ok;

	/* A locked instruction: a full barrier, as a seq_cst CAS. */
	__asm__ __volatile__("lock cmpxchg16b %1"
			     : "=@ccz"(ok), "+m"(*(unsigned __int128 *)(void *)p), "+a"(e0), "+d"(e1)
			     : "b"(d0), "c"(d1)
			     : "memory");
	return ok;
}
#else
#define CW_PR_HAVE_CAS_PAIR 0
static inline bool cw_pr_cas_pair_seq(uint64_t *p, uint64_t e0, uint64_t e1, uint64_t d0,
				      uint64_t d1)
{
	return false;
}
#endif

/* Spin-wait hint. */
static inline void cw_pr_stall(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

#endif
