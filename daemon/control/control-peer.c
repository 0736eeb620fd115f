/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The two ends of a control socket (control-internal.h): who is on the
 * other end and what the groups let them do, and the path a listener
 * takes over from a daemon that is gone.  Used by the control socket and
 * the metrics endpoint alike, calling neither.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "control-internal.h"

int cwc_peer_rights(const struct cwc_server *srv, int fd, struct cwc_peer *ret)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	gid_t groups[256];
	socklen_t glen = sizeof(groups);
	bool in_read, in_admin;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return -errno;
	/* The primary group, then the supplementary ones where the
	 * kernel reports them (SO_PEERGROUPS, Linux 4.13). */
	in_read = cred.gid == srv->o.read_gid;
	in_admin = cred.gid == srv->o.admin_gid;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &glen) == 0) {
		for (size_t i = 0; i < glen / sizeof(gid_t); i++) {
			in_read |= groups[i] == srv->o.read_gid;
			in_admin |= groups[i] == srv->o.admin_gid;
		}
	}
	ret->uid = cred.uid;
	ret->gid = cred.gid;
	ret->pid = cred.pid;
	ret->can_change = cred.uid == 0 || (srv->o.admin_gid != CWC_NO_GID && in_admin);
	ret->can_read = ret->can_change || (srv->o.read_gid != CWC_NO_GID && in_read);
	return 0;
}

int cwc_clear_stale(const char *path, const struct sockaddr_un *sa)
{
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct stat st;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	if (fd < 0)
		return -errno;
	if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0)
		return -EADDRINUSE;
	return unlink(path) < 0 ? -errno : 0;
}
