/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * An image's exclusive lock after a crash.  librbd takes an image's
 * exclusive lock for the first write and keeps it until the image is
 * closed; a clockwised killed with -9 never closes it, and the restarted
 * one's first write would wait until the cluster gives up the dead
 * client's watch (30 s) while its clients' requests pile up.
 *
 * So the daemon keeps, next to the pool database, the file POOL-rbd-owners:
 * one line "ADDRESS PATH" per image it opened for writing, ADDRESS being
 * the cluster's name of this process (the lock owner's, when it has the
 * lock).  The pool database is flock()ed by one process at a time, so an
 * address found there for an image, other than this process's own, is of
 * an earlier daemon of this pool that is gone: if that address still owns
 * the image's lock, the lock is broken (the cluster blocklists the dead
 * client first) and the first write takes it at once.  A lock another
 * client holds is never touched.
 */
#include "config.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>

#include "daemon/path/pool-internal.h"

#define OWNERS_SUFFIX "-rbd-owners"
#define OWNERS_LINE_MAX 4352

static pthread_mutex_t owners_lock = PTHREAD_MUTEX_INITIALIZER;

/* Writes lines (minus the one of path) and "addr path" to file, replacing
 * it whole: a crash leaves the old file or the new one. */
static int owners_write(const char *file, const char *lines, const char *addr, const char *path)
{
	char tmp[PATH_MAX];
	FILE *f;
	int r = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.new", file) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	f = fopen(tmp, "we");
	if (!f)
		return -errno;
	fputs(lines, f);
	fprintf(f, "%s %s\n", addr, path);
	if (fflush(f) != 0 || fdatasync(fileno(f)) < 0)
		r = -errno;
	if (fclose(f) != 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, file) < 0)
		r = -errno;
	if (r < 0)
		unlink(tmp);
	return r;
}

void pb_rbd_take_lock(struct pb *pb, const struct disk *d)
{
	char file[PATH_MAX], addr[256], line[OWNERS_LINE_MAX], prev[256] = "";
	_cleanup_free_ char *rest = NULL;
	size_t rest_len = 0;
	FILE *f, *keep;
	int r;

	if (!pb->cfg->pool || snprintf(file, sizeof(file), "%s%s", pb->cfg->pool,
					OWNERS_SUFFIX) >= (int)sizeof(file))
		return;
	r = cw_io_rbd_address(d->fd, addr, sizeof(addr));
	if (r < 0) {
		cwd_log(LOG_WARNING, "disk %s: the cluster does not say this daemon's address (%s): "
			"after a crash, the first write waits for the image's lock", d->name,
			strerror(-r));
		return;
	}
	keep = open_memstream(&rest, &rest_len);
	if (!keep)
		return;
	pthread_mutex_lock(&owners_lock);
	f = fopen(file, "re");
	while (f && fgets(line, sizeof(line), f)) {
		char *sp = strchr(line, ' ');
		size_t n = strcspn(line, "\n");

		if (!sp || line[n] != '\n')
			continue;	/* not one of ours, or cut: dropped */
		line[n] = '\0';
		if (strcmp(sp + 1, d->path) != 0) {
			fprintf(keep, "%s\n", line);
		} else if ((size_t)(sp - line) < sizeof(prev)) {
			memcpy(prev, line, (size_t)(sp - line));
			prev[sp - line] = '\0';
		}
	}
	if (f)
		fclose(f);
	fclose(keep);
	if (prev[0] && strcmp(prev, addr) != 0) {
		int64_t t0 = cw_now_ns();

		r = cw_io_rbd_reclaim(d->fd, prev);
		if (r > 0)
			cwd_log(LOG_NOTICE, "disk %s: the image's lock was still held by this pool's "
				"previous daemon (%s), which ended without closing it; broken in %"
				PRId64 " ms", d->name, prev, (cw_now_ns() - t0) / CW_NS_PER_MS);
		else if (r < 0)
			cwd_log(LOG_WARNING, "disk %s: cannot break the image's lock, still held by "
				"this pool's previous daemon (%s): %s; the first write waits until "
				"the cluster drops it", d->name, prev, strerror(-r));
	}
	r = owners_write(file, rest ? rest : "", addr, d->path);
	pthread_mutex_unlock(&owners_lock);
	if (r < 0)
		cwd_log(LOG_WARNING, "disk %s: cannot write %s (%s): after a crash, the first "
			"write waits for the image's lock", d->name, file, strerror(-r));
}
