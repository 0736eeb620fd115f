/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The engines (clockwise/io.h): their table, their names, the one that
 * suits a descriptor, and a new one of a kind.  The only file that knows
 * every back end; the front end (io.c) reaches them through their ops.
 */
#include "config.h"

#include <errno.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <linux/magic.h>

#include <clockwise/io.h>
#include "common/util.h"
#include "io/io-internal.h"

/* io_uring's limit on ring entries (IORING_MAX_ENTRIES). */
#define CW_IO_MAX_DEPTH 32768u

static const struct cw_io_ops *const engine_ops[] = {
	[CW_IO_URING] = &cw_io_uring_ops,
	[CW_IO_AIO] = &cw_io_aio_ops,
	[CW_IO_MEM] = &cw_io_mem_ops,
	[CW_IO_RBD] = &cw_io_rbd_ops,
};

int cw_io_kind_parse(const char *name, enum cw_io_kind *ret_kind)
{
	if (!name || !ret_kind)
		return -EINVAL;
	if (!strcasecmp(name, "io_uring") || !strcasecmp(name, "uring"))
		*ret_kind = CW_IO_URING;
	else if (!strcasecmp(name, "libaio") || !strcasecmp(name, "aio"))
		*ret_kind = CW_IO_AIO;
	else
		return -EINVAL;
	return 0;
}

const char *cw_io_kind_name(enum cw_io_kind kind)
{
	switch (kind) {
	case CW_IO_URING:
		return "io_uring";
	case CW_IO_AIO:
		return "libaio";
	case CW_IO_MEM:
		return "memory";
	case CW_IO_RBD:
		return "rbd";
	}
	return NULL;
}

int cw_io_kind_for_fd(int fd, enum cw_io_kind preferred, enum cw_io_kind *ret_kind)
{
	struct stat st;
	struct statfs sf;
	char byte;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	const struct io_dev_ops *dev;

	if (!ret_kind || (unsigned)preferred >= CW_ARRAY_SIZE(engine_ops))
		return -EINVAL;
	dev = io_dev_of(fd);
	if (dev) {
		*ret_kind = dev->engine;
		return 0;
	}
	if (fstat(fd, &st) < 0)
		return -errno;
	*ret_kind = preferred;
	if (preferred != CW_IO_URING || !S_ISREG(st.st_mode))
		return 0;
	if (fstatfs(fd, &sf) < 0)
		return -errno;
	if (sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC) {
		*ret_kind = CW_IO_MEM;
		return 0;
	}
	/* The kernel refuses RWF_NOWAIT before it looks at the buffer, the
	 * offset or O_DIRECT alignment, so one positional byte (which
	 * changes nothing) tells whether io_uring could read inline. */
	if (preadv2(fd, &iov, 1, 0, RWF_NOWAIT) < 0 && errno == EOPNOTSUPP)
		*ret_kind = CW_IO_AIO;
	return 0;
}

int cw_io_engine_new(enum cw_io_kind kind, unsigned depth, struct cw_io_engine **ret_engine)
{
	struct cw_io_engine *e = NULL;
	int r;

	if (!ret_engine || (unsigned)kind >= CW_ARRAY_SIZE(engine_ops) || depth == 0 ||
	    depth > CW_IO_MAX_DEPTH)
		return -EINVAL;
	r = engine_ops[kind]->engine_new(depth, &e);
	if (r < 0)
		return r;
	e->ops = engine_ops[kind];
	e->depth = depth;
	e->inflight = 0;
	*ret_engine = e;
	return 0;
}
