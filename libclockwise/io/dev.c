/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Devices (clockwise/io.h): what a disk's descriptor is opened, sized,
 * identified, read, written, synced and punched with.  A file or a block
 * device by the system's calls; any other kind (an RBD image, rbd.c)
 * through its ops in devs[], which gives it a stand-in descriptor and
 * says which engine serves it.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <linux/stat.h>

#include <clockwise/io.h>
#include "common/util.h"
#include "io/io-internal.h"

static const struct io_dev_ops *const devs[] = { &io_dev_rbd };

const struct io_dev_ops *io_dev_of(int fd)
{
	for (size_t i = 0; fd >= 0 && i < CW_ARRAY_SIZE(devs); i++)
		if (devs[i]->owns(fd))
			return devs[i];
	return NULL;
}

const struct io_dev_ops *io_dev_for_path(const char *path)
{
	for (size_t i = 0; path && i < CW_ARRAY_SIZE(devs); i++)
		if (devs[i]->claims_path(path))
			return devs[i];
	return NULL;
}

int cw_io_open(const char *path, bool writable, bool *ret_direct)
{
	int flags = (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC;
	const struct io_dev_ops *dev;
	int fd;

	if (!path)
		return -EINVAL;
	dev = io_dev_for_path(path);
	if (dev) {
		/* nothing of the page cache's to bypass: its own I/O */
		fd = dev->open(path, writable);
		if (fd >= 0 && ret_direct)
			*ret_direct = true;
		return fd;
	}
	fd = open(path, flags | O_DIRECT);
	if (fd >= 0) {
		if (ret_direct)
			*ret_direct = true;
		return fd;
	}
	/* tmpfs and some FUSE file systems refuse O_DIRECT at open. */
	if (errno != EINVAL)
		return -errno;
	fd = open(path, flags);
	if (fd < 0)
		return -errno;
	if (ret_direct)
		*ret_direct = false;
	return fd;
}

int cw_io_alignment(int fd, size_t *ret_align)
{
	struct stat st;
	int flags;

	if (!ret_align)
		return -EINVAL;
	if (io_dev_of(fd)) {
		*ret_align = 512;	/* any is taken; sectors keep one unit */
		return 0;
	}
	if (fstat(fd, &st) < 0)
		return -errno;
	flags = fcntl(fd, F_GETFL);
	if (flags < 0)
		return -errno;
	if (S_ISBLK(st.st_mode)) {
		int lbs = 0;

		if (ioctl(fd, BLKSSZGET, &lbs) < 0)
			return -errno;
		*ret_align = CW_MAX((size_t)lbs, (size_t)512);
		return 0;
	}
	if (!S_ISREG(st.st_mode))
		return -ENOTBLK;
	if (!(flags & O_DIRECT)) {
		/* Buffered I/O takes any alignment; keep sector units so the
		 * same code works either way. */
		*ret_align = 512;
		return 0;
	}
#ifdef STATX_DIOALIGN
	{
		struct statx stx;

		if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
		    (stx.stx_mask & STATX_DIOALIGN) && stx.stx_dio_offset_align > 0) {
			size_t a = CW_MAX(stx.stx_dio_offset_align, stx.stx_dio_mem_align);

			*ret_align = CW_MAX(a, (size_t)512);
			return 0;
		}
	}
#endif
	/* The file system does not say: the page size is a multiple of every
	 * logical block size in use. */
	*ret_align = (size_t)sysconf(_SC_PAGESIZE);
	return 0;
}

int cw_io_open_dev(const char *path, int flags)
{
	const struct io_dev_ops *dev = io_dev_for_path(path);
	int fd;

	if (!path)
		return -EINVAL;
	if (dev)
		return dev->open(path, (flags & O_ACCMODE) != O_RDONLY);
	fd = open(path, flags | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int cw_io_close(int fd)
{
	const struct io_dev_ops *dev = io_dev_of(fd);

	if (fd < 0)
		return 0;
	if (dev)
		return dev->close(fd);
	return close(fd) < 0 ? -errno : 0;
}

int cw_io_size(int fd, uint64_t *ret_bytes)
{
	const struct io_dev_ops *dev = io_dev_of(fd);
	struct stat st;

	if (!ret_bytes)
		return -EINVAL;
	if (dev)
		return dev->size(fd, ret_bytes);
	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISBLK(st.st_mode))
		return ioctl(fd, BLKGETSIZE64, ret_bytes) < 0 ? -errno : 0;
	if (!S_ISREG(st.st_mode))
		return -ENOTBLK;
	*ret_bytes = (uint64_t)st.st_size;
	return 0;
}

int cw_io_identity(int fd, uint64_t *ret_dev, uint64_t *ret_ino)
{
	const struct io_dev_ops *dev = io_dev_of(fd);
	struct stat st;

	if (!ret_dev || !ret_ino)
		return -EINVAL;
	if (dev)
		return dev->identity(fd, ret_dev, ret_ino);
	if (fstat(fd, &st) < 0)
		return -errno;
	/* two device nodes of one disk are one disk */
	*ret_dev = S_ISBLK(st.st_mode) ? 0 : (uint64_t)st.st_dev;
	*ret_ino = S_ISBLK(st.st_mode) ? (uint64_t)st.st_rdev : (uint64_t)st.st_ino;
	return 0;
}

ssize_t cw_io_pread(int fd, void *buf, size_t len, uint64_t off)
{
	const struct io_dev_ops *dev = io_dev_of(fd);
	ssize_t n;

	if (dev)
		return dev->sync(fd, CW_IO_READ, buf, len, off);
	n = pread(fd, buf, len, (off_t)off);
	return n < 0 ? -errno : n;
}

ssize_t cw_io_pwrite(int fd, const void *buf, size_t len, uint64_t off)
{
	const struct io_dev_ops *dev = io_dev_of(fd);
	ssize_t n;

	if (dev)
		return dev->sync(fd, CW_IO_WRITE, (void *)buf, len, off);
	n = pwrite(fd, buf, len, (off_t)off);
	return n < 0 ? -errno : n;
}

int cw_io_fdatasync(int fd)
{
	const struct io_dev_ops *dev = io_dev_of(fd);

	if (dev)
		return (int)dev->sync(fd, CW_IO_FSYNC, NULL, 0, 0);
	return fdatasync(fd) < 0 ? -errno : 0;
}

int cw_io_punch(int fd, uint64_t off, uint64_t len)
{
	const struct io_dev_ops *dev = io_dev_of(fd);
	if (dev)
		return dev->punch(fd, off, len);
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) < 0)
		return -errno;
	return 0;
}
