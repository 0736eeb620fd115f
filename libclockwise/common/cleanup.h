/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Scope-bound cleanup: _cleanup_(fn) calls fn(&var) when var leaves scope. */
#ifndef CW_CLEANUP_H
#define CW_CLEANUP_H

#include <stdlib.h>
#include <unistd.h>
#include <errno.h>

#include <clockwise/io.h>

#define _cleanup_(f) __attribute__((cleanup(f)))

static inline void cw_freep(void *p)
{
	free(*(void **)p);
}
#define _cleanup_free_ _cleanup_(cw_freep)

static inline void cw_closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}
#define _cleanup_close_ _cleanup_(cw_closep)

/* For descriptors from cw_io_open / cw_io_open_dev (a disk may be an
 * image on a cluster). */
static inline void cw_io_closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;

		cw_io_close(*fd);
		errno = saved;
	}
	*fd = -1;
}

/* Hand ownership out of a _cleanup_ variable. */
#define CW_TAKE_PTR(p) ({ __typeof__(p) _t = (p); (p) = NULL; _t; })
#define CW_TAKE_FD(fd) ({ int _t = (fd); (fd) = -1; _t; })

#endif
