/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The exports a server serves: added and removed while it runs, resized,
 * listed with their clients, their real-time priority claimed by a
 * player's process; the handshake's view of them (rebuild_infos); and
 * the read-modify-write domain each shares with the exports of the same
 * bytes (protocol-unaligned.c).
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <syslog.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "daemon/nbd/nbd-internal.h"

/* The handshake's view of the exports not removed; under srv->lock. */
static void rebuild_infos(struct nbdsrv *srv)
{
	size_t i;

	srv->n_live = 0;
	for (i = 0; i < srv->n_exports; i++) {
		const struct nbdsrv_export *e = &srv->exports[i].e;
		uint16_t f;

		if (srv->exports[i].removed)
			continue;
		f = cw_nbd_eflags(&(struct cw_nbd_caps){
			.read_only = e->read_only, .can_flush = true,
			.can_trim = e->ops->trim != NULL, .can_zero = e->ops->zero != NULL,
			.can_fast_zero = e->fast_zero, .can_cache = e->ops->cache != NULL,
			.multi_conn = e->read_only || e->flush_global, .structured = true });
		if (e->rotational)
			f |= CW_NBD_FLAG_ROTATIONAL;
		srv->infos[srv->n_live] = (struct cw_nbd_export_info){
			.name = e->name, .description = e->description, .size = e->size,
			.eflags = f, .min_block = e->min_block, .pref_block = e->pref_block,
			.max_block = e->max_block, .block_status = e->ops->block_status != NULL,
		};
		srv->live[srv->n_live++] = i;
	}
}

static bool export_in_use(struct nbdsrv *srv, const struct export *x)
{
	for (struct conn *c = srv->conns; c; c = c->next)
		if (c->exp == x)
			return true;
	return false;
}

/* The domain of the bytes behind key, shared with the exports that use
 * it already; under srv->lock.  There are as many domains as export
 * slots, so one is always free. */
static struct rmw_dom *dom_take(struct nbdsrv *srv, const void *key)
{
	struct rmw_dom *d, *free_d = NULL;

	for (d = srv->doms; d < srv->doms + CW_EXPORTS_MAX; d++) {
		if (d->refs && d->key == key)
			break;
		if (!d->refs && !free_d)
			free_d = d;
	}
	if (d == srv->doms + CW_EXPORTS_MAX) {
		d = free_d;
		d->key = key;
		pthread_mutex_init(&d->lock, NULL);
		atomic_init(&d->writes, 0);
		atomic_init(&d->rmw_active, 0);
	}
	d->refs++;
	return d;
}

int nbdsrv_add_export(struct nbdsrv *srv, const struct nbdsrv_export *exp)
{
	struct export *x = NULL;
	char *name, *desc;
	const struct nbdsrv_backend_ops *ops = exp->ops;
	uint32_t min, pref, max;
	size_t i;
	int r = 0;

	if (!exp->name || strlen(exp->name) > 256 || !ops || !ops->pread ||
	    (!exp->read_only && (!ops->pwrite || !ops->flush)))
		return -EINVAL;
	if (exp->description && strlen(exp->description) > 1024)
		return -EINVAL;
	min = exp->min_block ? exp->min_block : 1;
	pref = exp->pref_block ? exp->pref_block : CW_MAX(4096u, min);
	max = exp->max_block ? exp->max_block : srv->cfg.max_request;
	/* The protocol's rules for NBD_INFO_BLOCK_SIZE. */
	if (!cw_is_pow2_u64(min) || min > 65536 || !cw_is_pow2_u64(pref) ||
	    pref < CW_MAX(512u, min) || max % min || max < CW_MIN(pref, exp->size) ||
	    max > srv->cfg.max_request || exp->size % min)
		return -EINVAL;

	name = strdup(exp->name);
	desc = exp->description ? strdup(exp->description) : NULL;
	if (!name || (exp->description && !desc)) {
		free(name);
		free(desc);
		return -ENOMEM;
	}
	pthread_mutex_lock(&srv->lock);
	for (i = 0; i < srv->n_exports; i++) {
		if (!srv->exports[i].removed && strcmp(srv->exports[i].e.name, exp->name) == 0) {
			r = -EEXIST;
			goto out;
		}
		if (!x && srv->exports[i].removed && !export_in_use(srv, &srv->exports[i]))
			x = &srv->exports[i];
	}
	if (!x) {
		if (srv->n_exports == CW_EXPORTS_MAX) {
			r = -ENOSPC;
			goto out;
		}
		x = &srv->exports[srv->n_exports++];
	}
	if (x->e.name && x->claim_pidfd >= 0)	/* a slot used before (a new one is zeroed) */
		close(x->claim_pidfd);
	free((char *)x->e.name);
	free((char *)x->e.description);
	/* No connection uses the slot any more: nor its domain. */
	if (x->dom && --x->dom->refs == 0)
		pthread_mutex_destroy(&x->dom->lock);
	*x = (struct export){ .e = *exp, .claim_pidfd = -1 };
	x->e.name = CW_TAKE_PTR(name);
	x->e.description = CW_TAKE_PTR(desc);
	x->e.min_block = min;
	x->e.pref_block = pref;
	x->e.max_block = max;
	x->lim = (struct cw_nbd_limits){
		.size = exp->size,
		.min_block = min,
		.max_request = max,
	};
	x->dom = dom_take(srv, exp->data_key ? exp->data_key : (const void *)x);
	rebuild_infos(srv);
out:
	pthread_mutex_unlock(&srv->lock);
	free(name);
	free(desc);
	return r;
}

/* The export served as name, or NULL (under the server's lock). */
static struct export *export_named(struct nbdsrv *srv, const char *name)
{
	for (size_t i = 0; i < srv->n_exports; i++)
		if (!srv->exports[i].removed && strcmp(srv->exports[i].e.name, name) == 0)
			return &srv->exports[i];
	return NULL;
}

int nbdsrv_remove_export(struct nbdsrv *srv, const char *name)
{
	struct export *x;
	struct conn *c;

	pthread_mutex_lock(&srv->lock);
	x = export_named(srv, name);
	if (!x) {
		pthread_mutex_unlock(&srv->lock);
		return -ENOENT;
	}
	/* No new client can choose it from here on; the ones that did are
	 * cut off, and each ends once its requests in flight completed. */
	x->removed = true;
	rebuild_infos(srv);
	for (c = srv->conns; c; c = c->next)
		if (c->exp == x)
			shutdown(c->fd, SHUT_RDWR);
	while (export_in_use(srv, x))
		pthread_cond_wait(&srv->conns_gone, &srv->lock);
	pthread_mutex_unlock(&srv->lock);
	return 0;
}

int nbdsrv_export_clients(struct nbdsrv *srv, const char *name, struct nbdsrv_client *ret,
			  size_t max, size_t *ret_n)
{
	const struct export *x;
	size_t n = 0;

	pthread_mutex_lock(&srv->lock);
	x = export_named(srv, name);
	for (const struct conn *c = srv->conns; x && c; c = c->next) {
		if (c->exp != x)
			continue;
		if (n < max) {
			ret[n] = (struct nbdsrv_client){ .known = c->peer.known, .uid = c->peer.uid,
							 .pid = c->peer.pid, .since_ns = c->since_ns,
							 .realtime = atomic_load(&c->rt_holder) };
			snprintf(ret[n].addr, sizeof(ret[n].addr), "%s", c->addr);
		}
		n++;
	}
	pthread_mutex_unlock(&srv->lock);
	if (!x)
		return -ENOENT;
	*ret_n = n;
	return 0;
}

/* Whether the claimant of a claim on x has gone (under the server's
 * lock): its claim then ends. */
/* When process pid started (field 22 of /proc/PID/stat, in clock ticks
 * since boot), or 0 when it is not there or has ended (a zombie): with
 * the pid, what names one live process for good (a pid alone may be
 * reused). */
static unsigned long long proc_start_time(pid_t pid)
{
	char path[32], buf[512], *p, state = 0;
	unsigned long long t = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')))
		/* after the name: state is field 3, start time field 22 */
		(void)sscanf(p + 2, "%c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d "
			     "%*d %*d %*d %*d %*d %llu", &state, &t);
	fclose(f);
	return state == 'Z' || state == 'X' ? 0 : t;
}

bool claim_gone(struct nbdsrv *srv, struct export *x)
{
	struct pollfd p = { .fd = x->claim_pidfd, .events = POLLIN };
	pid_t pid = atomic_load(&x->claim_pid);
	char link[48], what[64] = "";
	ssize_t n;

	if (!pid || x->claim_pidfd < 0 || poll(&p, 1, 0) == 0)
		return false;
	/* The descriptor says the process ended.  Seen under load: it said
	 * so (POLLIN|POLLHUP, which a pidfd gives only once no task is
	 * left) of a player that went on playing.  So the process's own
	 * start time decides; and a descriptor that is no pidfd any more
	 * (closed by someone else, its number reused) is not ours to close. */
	snprintf(link, sizeof(link), "/proc/self/fd/%d", x->claim_pidfd);
	n = readlink(link, what, sizeof(what) - 1);
	what[n > 0 ? n : 0] = '\0';
	if (x->claim_start && proc_start_time(pid) == x->claim_start) {
		int fd = pidfd_open(pid, 0);

		srv_log(srv, LOG_WARNING, "export %s: the descriptor of process %d's claim on the "
			"real-time priority said it had ended (revents %#x, descriptor %d: %s), but "
			"it runs: the claim stays", x->e.name, (int)pid, (unsigned)p.revents,
			x->claim_pidfd, what[0] ? what : "closed");
		if (strstr(what, "pidfd"))
			close(x->claim_pidfd);
		x->claim_pidfd = fd;
		return false;
	}
	srv_log(srv, LOG_INFO, "export %s: process %d, whose claim on the real-time priority "
		"it was, has ended (revents %#x)", x->e.name, (int)pid, (unsigned)p.revents);
	if (!what[0] || strstr(what, "pidfd"))
		close(x->claim_pidfd);
	x->claim_pidfd = -1;
	atomic_store(&x->claim_pid, 0);
	atomic_fetch_add(&x->claim_gen, 1);
	return true;
}

int nbdsrv_export_claim(struct nbdsrv *srv, const char *name, pid_t pid, pid_t *ret_pid)
{
	struct export *x;
	int fd = -1, r = 0;

	if (pid > 0) {
		fd = pidfd_open(pid, 0);
		if (fd < 0)
			return -errno;
	}
	pthread_mutex_lock(&srv->lock);
	x = export_named(srv, name);
	if (!x) {
		r = -ENOENT;
	} else if (pid < 0) {
		(void)claim_gone(srv, x);
	} else {
		if (x->claim_pidfd >= 0)
			close(x->claim_pidfd);
		x->claim_pidfd = fd;
		fd = -1;
		x->claim_start = proc_start_time(pid);
		atomic_store(&x->claim_pid, pid);
		atomic_fetch_add(&x->claim_gen, 1);
	}
	if (x && ret_pid)
		*ret_pid = atomic_load(&x->claim_pid);
	pthread_mutex_unlock(&srv->lock);
	if (fd >= 0)
		close(fd);
	if (r == 0 && pid > 0)
		srv_log(srv, LOG_INFO, "export %s: the real-time priority is claimed by process %d",
			name, (int)pid);
	else if (r == 0 && pid == 0)
		srv_log(srv, LOG_INFO, "export %s: the claim on the real-time priority is dropped",
			name);
	return r;
}

int nbdsrv_set_export_size(struct nbdsrv *srv, const char *name, uint64_t size)
{
	int r = -ENOENT;
	size_t i;

	pthread_mutex_lock(&srv->lock);
	for (i = 0; i < srv->n_exports; i++) {
		struct export *x = &srv->exports[i];

		if (x->removed || strcmp(x->e.name, name) != 0)
			continue;
		r = size % x->e.min_block ? -EINVAL : 0;
		if (r == 0) {
			/* A connection copies lim under this lock at its
			 * handshake and reads only its copy afterwards. */
			x->e.size = size;
			x->lim.size = size;
			rebuild_infos(srv);
		}
		break;
	}
	pthread_mutex_unlock(&srv->lock);
	return r;
}
