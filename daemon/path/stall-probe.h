/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The host's stalls, measured: one thread per CPU the daemon's real-time
 * threads may use, pinned there at a real-time priority above every
 * thread of the daemon, wakes every period and records how late it woke.
 * A probe late by L on CPU k means that for L no thread below its
 * priority could run on k: a higher real-time thread of another process
 * held it, or the kernel did (a kernel built without preemption finishes
 * a system call before it switches, however long), or the hypervisor did
 * not run the virtual CPU.  Whatever the cause, admission cannot book it,
 * and a miss whose thread waited for a CPU meanwhile is said to be the
 * host's (lane-miss.c).  Nothing here is on the data path: the probes
 * write their own rings, the control thread reads them.  A probe costs a
 * wake-up per period (about 100 us of CPU each on a virtual machine), so
 * the probes sleep while disarmed: only a deadline needs them.
 */
#ifndef CLOCKWISED_STALL_PROBE_H
#define CLOCKWISED_STALL_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct stall_probe;

/* A stall is recorded when a probe wakes more than this late. */
#define STALL_PROBE_MIN_NS (1000 * 1000)

/* Starts a probe on each CPU of cpus (bit i: CPU i; 0: the process's
 * affinity, at most 64 CPUs), at SCHED_FIFO priority prio, waking every
 * period_ns once armed.  0 with *ret NULL when period_ns is 0 (off); -errno when a
 * thread cannot start or take the priority (the reason in err). */
int stall_probe_start(int64_t period_ns, int prio, uint64_t cpus, struct stall_probe **ret,
		      char *err, size_t errlen);
void stall_probe_stop(struct stall_probe *p);

/* Arms the probes (they wake every period from now on) or disarms them
 * (they sleep until armed again).  p may be NULL. */
void stall_probe_arm(struct stall_probe *p, bool on);

/* The probe's priority, 0 for NULL. */
int stall_probe_priority(const struct stall_probe *p);

/* The longest stall of each CPU that overlaps [from_ns, to_ns], written
 * as "cpu K for X us from Y us" (Y relative to base_ns), joined by ", ",
 * into buf; how many CPUs stalled over min_ns there (0: buf is ""). */
unsigned stall_probe_during(const struct stall_probe *p, int64_t from_ns, int64_t to_ns,
			    int64_t min_ns, int64_t base_ns, char *buf, size_t len);

/* The longest stall since the last call, and on which CPU, and how many
 * were over STALL_PROBE_MIN_NS: for the control thread's tick (one reader). */
int64_t stall_probe_worst_since(struct stall_probe *p, int *ret_cpu, uint64_t *ret_count);

#endif
