/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What every back end shares about one request: how a kernel result is
 * folded into it (partial transfers, transient errors, retries), the
 * punch done at once where the kernel interface has none, and the reap
 * deadline as a timespec.  Below the back ends and io.c alike.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <time.h>
#include <linux/falloc.h>

#include <clockwise/io.h>
#include "common/util.h"
#include "io/io-internal.h"

int cw_io_punch_now(const struct cw_io_req *r)
{
	if (r->len == 0)
		return 0;
	return fallocate(r->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)r->off,
			 (off_t)r->len) == 0 ? 0 : -errno;
}

bool cw_io_req_account(struct cw_io_req *r, int64_t res)
{
	uint64_t done = cw_io_done_bytes(r);
	uint64_t retries = r->priv_ >> CW_IO_RETRY_SHIFT;

	if (res < 0) {
		/* Transient: the same remainder goes to the kernel again, a
		 * bounded number of times so a stuck device still answers. */
		if ((res == -EAGAIN || res == -EINTR) && retries < CW_IO_MAX_RETRIES) {
			r->priv_ = done | ((retries + 1) << CW_IO_RETRY_SHIFT);
			return false;
		}
		/* An error after partial progress still fails the whole
		 * request: the caller cannot tell which part is good. */
		r->res = res;
		return true;
	}
	if (r->op == CW_IO_FSYNC) {
		r->res = 0;
		return true;
	}
	if (r->op == CW_IO_PUNCH) {
		r->res = (int64_t)r->len;
		return true;
	}
	done += (uint64_t)res;
	/* Nothing moved (end of file or device), all done, or a transfer
	 * that ended off a sector boundary — only the end of a file whose
	 * size is not sector aligned does that, and asking O_DIRECT for the
	 * rest from an unaligned offset would fail with EINVAL. */
	if (res == 0 || done >= r->len || (res & 511)) {
		r->res = (int64_t)done;
		return true;
	}
	r->priv_ = done | (retries << CW_IO_RETRY_SHIFT);
	return false;
}

bool cw_io_remaining(int64_t deadline_ns, struct timespec *ret_ts)
{
	int64_t left = deadline_ns - cw_now_ns();

	if (left <= 0)
		return false;
	ret_ts->tv_sec = left / CW_NS_PER_S;
	ret_ts->tv_nsec = left % CW_NS_PER_S;
	return true;
}
