/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The control socket of clockwised (see control.h): who may do what,
 * bounded connections, one epoll loop, and calibrations in threads of
 * their own.  The command handlers are in control-cmd.c.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "control-internal.h"

struct calib_job;

struct client {
	enum cwc_ev_kind kind;	/* first: CWC_EV_CLIENT */
	int fd;
	bool can_read, can_change;
	uid_t uid;
	gid_t gid;
	pid_t pid;
	char in[CW_CTL_LINE_MAX];
	size_t in_len;
	bool skipping;		/* discarding the rest of a too-long line */
	char *out;
	size_t out_len, out_off, out_cap;
	double tokens;
	int64_t refill_ns;
	bool eof;		/* nothing more to read: close when the replies are out */
	int64_t active_ns;	/* when it last sent a byte or took one of its replies */
	struct calib_job *job;	/* a calibration it waits for; its later lines wait too */
	bool dead;
	struct cwc_server *srv;
	struct client *next;
};

/* ---- the socket -------------------------------------------------------- */

static int64_t wall_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void cwc_server_opts_init(struct cwc_server_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->socket_path = CWC_DEFAULT_SOCKET;
	o->socket_mode = 0660;
	o->socket_gid = CWC_NO_GID;
	o->read_gid = CWC_NO_GID;
	o->admin_gid = CWC_NO_GID;
	o->max_clients = 64;
	o->rate_burst = 200;
	o->rate_per_s = 100;
	o->out_max = 8 << 20;
	o->idle_timeout_ns = CWC_IDLE_TIMEOUT_NS;
	o->clock_ns = cw_now_ns;
	o->wall_ns = wall_now_ns;
	o->calibrate = cw_model_calibrate;
	o->calib_margin_ppm = CWC_CALIB_MARGIN_PPM;
}

static void job_detach(struct calib_job *job);

static void client_close(struct cwc_server *srv, struct client *cl)
{
	struct client **p;

	/* Events of the batch being dispatched may still name it. */
	for (int i = 0; i < srv->batch_n; i++)
		if (srv->batch[i].data.ptr == cl)
			srv->batch[i].data.ptr = NULL;

	for (p = &srv->clients; *p; p = &(*p)->next) {
		if (*p == cl) {
			*p = cl->next;
			break;
		}
	}
	if (cl->job)
		job_detach(cl->job);	/* it finishes; nobody hears the reply */
	epoll_ctl(srv->epoll_fd, EPOLL_CTL_DEL, cl->fd, NULL);
	close(cl->fd);
	free(cl->out);
	free(cl);
	srv->n_clients--;
}

static void client_watch(struct cwc_server *srv, struct client *cl)
{
	struct epoll_event ev = { .events = (cl->eof || cl->job ? 0 : EPOLLIN) |
					    (cl->out_len > cl->out_off ? EPOLLOUT : 0),
				  .data.ptr = cl };

	epoll_ctl(srv->epoll_fd, EPOLL_CTL_MOD, cl->fd, &ev);
}

static void client_flush(struct client *cl)
{
	while (!cl->dead && cl->out_off < cl->out_len) {
		ssize_t w = send(cl->fd, cl->out + cl->out_off, cl->out_len - cl->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w < 0) {
			if (errno != EAGAIN && errno != EINTR)
				cl->dead = true;
			if (errno == EAGAIN)
				break;
			continue;
		}
		cl->out_off += (size_t)w;
		cl->active_ns = cl->srv->o.clock_ns();
	}
	if (cl->out_off == cl->out_len)
		cl->out_off = cl->out_len = 0;
}

static void client_emit(const char *line, void *userdata)
{
	struct client *cl = userdata;
	size_t n = strlen(line);

	if (cl->dead)
		return;
	if (cl->out_len + n > cl->srv->o.out_max) {
		/* It does not read its replies: drop it rather than grow. */
		cl->dead = true;
		return;
	}
	if (cl->out_len + n > cl->out_cap) {
		size_t cap = CW_MAX(cl->out_cap * 2, cl->out_len + n);
		char *o = realloc(cl->out, cap);

		if (!o) {
			cl->dead = true;
			return;
		}
		cl->out = o;
		cl->out_cap = cap;
	}
	memcpy(cl->out + cl->out_len, line, n);
	cl->out_len += n;
	client_flush(cl);
}

/* The token bucket: true if the client may send one more request now. */
static bool client_take_token(struct cwc_server *srv, struct client *cl)
{
	int64_t now = srv->o.clock_ns();

	if (now > cl->refill_ns) {
		cl->tokens += (double)(now - cl->refill_ns) * srv->o.rate_per_s / 1e9;
		if (cl->tokens > srv->o.rate_burst)
			cl->tokens = srv->o.rate_burst;
		cl->refill_ns = now;
	}
	if (cl->tokens < 1)
		return false;
	cl->tokens -= 1;
	return true;
}

static void job_start(struct cwc_server *srv, struct client *cl, const struct cw_ctl_request *req);

static void client_line(struct cwc_server *srv, struct client *cl, const char *line, size_t len)
{
	struct cw_ctl_request req;

	if (len && line[len - 1] == '\r')
		len--;
	if (len == 0)
		return;		/* blank lines are keep-alives */
	if (!client_take_token(srv, cl)) {
		cwc_emit_error(client_emit, cl, CW_CTL_E_RATE_LIMITED,
			   "too many requests: slow down and retry", NULL);
		return;
	}
	if (!cwc_request_admit(srv, line, len, cl->can_read, cl->can_change, client_emit, cl, &req))
		return;
	if (req.cmd == CW_CTL_CMD_DISK_CALIBRATE)
		job_start(srv, cl, &req);
	else
		cwc_request_run(srv, &req, cl->pid, client_emit, cl);
	cw_ctl_request_done(&req);
}

/* Handles the complete lines buffered from the client, in order, until
 * one of them starts a calibration: the rest wait for its reply. */
static void client_process(struct cwc_server *srv, struct client *cl)
{
	size_t start = 0;
	char *nl;

	while (!cl->job && !cl->dead &&
	       (nl = memchr(cl->in + start, '\n', cl->in_len - start)) != NULL) {
		size_t end = (size_t)(nl - cl->in);

		if (!cl->skipping)
			client_line(srv, cl, cl->in + start, end - start);
		cl->skipping = false;
		start = end + 1;
	}
	memmove(cl->in, cl->in + start, cl->in_len - start);
	cl->in_len -= start;
	if (cl->job || cl->dead)
		return;
	if (cl->in_len == sizeof(cl->in)) {
		/* A full buffer and no newline: the line is too long.  Say
		 * so once, then skip to its end. */
		if (!cl->skipping)
			cwc_emit_error(client_emit, cl, CW_CTL_E_TOO_LARGE,
				   "message longer than 65535 bytes; skipped", NULL);
		cl->skipping = true;
		cl->in_len = 0;
	}
	if (cl->eof && cl->in_len) {
		/* The client is done sending: a last line without its
		 * newline still gets its reply. */
		if (!cl->skipping)
			client_line(srv, cl, cl->in, cl->in_len);
		cl->in_len = 0;
	}
}

static void client_read(struct cwc_server *srv, struct client *cl)
{
	while (!cl->job && !cl->eof && !cl->dead) {
		ssize_t n = recv(cl->fd, cl->in + cl->in_len, sizeof(cl->in) - cl->in_len,
				 MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				cl->dead = true;
			return;
		}
		if (n == 0)
			cl->eof = true;	/* close once the replies are out */
		else
			cl->active_ns = srv->o.clock_ns();
		cl->in_len += (size_t)n;
		client_process(srv, cl);
	}
}

/* After a client's state changed: close it, or watch what it waits for. */
static void client_settle(struct cwc_server *srv, struct client *cl)
{
	if (cl->eof && !cl->job && cl->out_len == 0)
		cl->dead = true;
	if (cl->dead)
		client_close(srv, cl);
	else
		client_watch(srv, cl);
}

/* ---- calibration in a thread ------------------------------------------- */

struct calib_job {
	enum cwc_ev_kind kind;		/* first: CWC_EV_JOB */
	struct cwc_server *srv;
	struct client *cl;		/* NULL once the client has gone */
	int fd;				/* our end of the progress channel */
	int worker_fd;			/* the thread's end; it closes it when done */
	pthread_t thread;
	atomic_bool cancel;
	struct calib k;
	char buf[4096];			/* progress bytes not yet a whole line */
	size_t len;
	struct calib_job *next;
};

static void job_detach(struct calib_job *job)
{
	job->cl = NULL;
}

static int job_progress(const char *phase, unsigned done, unsigned total, void *userdata)
{
	struct calib_job *job = userdata;
	_cleanup_free_ char *line = cw_ctl_format_progress(phase, done, total);

	/* A failed send means the server is going away: stop measuring. */
	if (line && send(job->worker_fd, line, strlen(line), MSG_NOSIGNAL) < 0)
		atomic_store(&job->cancel, true);
	return atomic_load(&job->cancel) ? 1 : 0;
}

static void *job_main(void *arg)
{
	struct calib_job *job = arg;

	job->k.result = job->srv->o.calibrate(job->k.disk.path, &job->k.opts, job_progress, job,
					      &job->k.model);
	close(job->worker_fd);	/* the end of the progress: the server finishes */
	return NULL;
}

static void job_start(struct cwc_server *srv, struct client *cl, const struct cw_ctl_request *req)
{
	struct ctx c = { .srv = srv, .req = req, .emit = client_emit, .emit_data = cl };
	struct epoll_event ev = { .events = EPOLLIN };
	struct calib_job *job = calloc(1, sizeof(*job));
	int sv[2];

	if (!job) {
		cwc_emit_error(client_emit, cl, CW_CTL_E_INTERNAL, "out of memory", NULL);
		return;
	}
	cwc_resv_expire(srv);
	if (cwc_calib_prepare(&c, &job->k) < 0) {
		cwc_emit_error(client_emit, cl, c.code, c.msg, NULL);
		free(job);
		return;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		cwc_emit_error(client_emit, cl, CW_CTL_E_INTERNAL, "no channel for the calibration", NULL);
		free(job);
		return;
	}
	job->kind = CWC_EV_JOB;
	job->srv = srv;
	job->cl = cl;
	job->fd = sv[0];
	job->worker_fd = sv[1];
	ev.data.ptr = job;
	if (epoll_ctl(srv->epoll_fd, EPOLL_CTL_ADD, job->fd, &ev) < 0 ||
	    pthread_create(&job->thread, NULL, job_main, job) != 0) {
		epoll_ctl(srv->epoll_fd, EPOLL_CTL_DEL, job->fd, NULL);
		close(sv[0]);
		close(sv[1]);
		free(job);
		cwc_emit_error(client_emit, cl, CW_CTL_E_INTERNAL, "cannot start the calibration", NULL);
		return;
	}
	job->next = srv->jobs;
	srv->jobs = job;
	cl->job = job;
}

static void ignore_line(const char *line, void *userdata)
{
	(void)line;
	(void)userdata;
}

/* The thread is done: store the model, answer the client, let it go on. */
static void job_finish(struct cwc_server *srv, struct calib_job *job)
{
	struct client *cl = job->cl;
	struct ctx c = { .srv = srv, .emit = cl ? client_emit : ignore_line, .emit_data = cl };
	struct calib_job **p;
	json_object *result = NULL;

	pthread_join(job->thread, NULL);
	for (p = &srv->jobs; *p; p = &(*p)->next) {
		if (*p == job) {
			*p = job->next;
			break;
		}
	}
	epoll_ctl(srv->epoll_fd, EPOLL_CTL_DEL, job->fd, NULL);
	close(job->fd);
	if (cwc_calib_finish(&c, &job->k, &result) < 0) {
		cwc_emit_error(c.emit, c.emit_data, c.code, c.msg, c.details);
		json_object_put(c.details);
	} else {
		_cleanup_free_ char *line = cw_ctl_format_ok(result);

		json_object_put(result);
		if (line)
			c.emit(line, c.emit_data);
	}
	free(job);
	if (cl) {
		cl->job = NULL;
		client_process(srv, cl);	/* the lines that waited */
		client_settle(srv, cl);
	}
}

/* Forwards the thread's progress lines to the client. */
static void job_read(struct cwc_server *srv, struct calib_job *job)
{
	for (;;) {
		ssize_t n = recv(job->fd, job->buf + job->len, sizeof(job->buf) - job->len,
				 MSG_DONTWAIT);
		char *nl;

		if (n == 0) {
			job_finish(srv, job);
			return;
		}
		if (n < 0)
			return;		/* EAGAIN: more later */
		job->len += (size_t)n;
		while ((nl = memchr(job->buf, '\n', job->len)) != NULL) {
			size_t l = (size_t)(nl - job->buf) + 1;
			char line[sizeof(job->buf) + 1];

			memcpy(line, job->buf, l);
			line[l] = '\0';
			if (job->cl)
				client_emit(line, job->cl);
			memmove(job->buf, job->buf + l, job->len - l);
			job->len -= l;
		}
		if (job->len == sizeof(job->buf))
			job->len = 0;	/* not a progress line: never sent */
	}
}

/* Connections of uid open now. */
static unsigned uid_clients(const struct cwc_server *srv, uid_t uid)
{
	unsigned n = 0;

	for (const struct client *cl = srv->clients; cl; cl = cl->next)
		n += !cl->dead && cl->uid == uid;
	return n;
}

/* Tells a client over a limit why, and closes it. */
static void refuse_busy(int fd, const char *why)
{
	char line[256];
	int n = snprintf(line, sizeof(line), "{\"ok\":false,\"error\":{\"code\":\"busy\","
			 "\"message\":\"%s\"}}\n", why);

	if (send(fd, line, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
		/* nothing more to tell it */
	}
	close(fd);
}

static void server_accept(struct cwc_server *srv)
{
	for (;;) {
		int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct cwc_peer peer;
		struct client *cl;
		struct epoll_event ev = { .events = EPOLLIN };
		unsigned cap = srv->o.max_clients;

		if (fd < 0)
			return;
		if (cwc_peer_rights(srv, fd, &peer) < 0) {
			refuse_busy(fd, "who is connecting is not known");
			continue;
		}
		/* The last connections are an admin's; root has no share. */
		if (!peer.can_change)
			cap -= CW_MIN(CWC_ADMIN_RESERVE, cap - 1);
		if (srv->n_clients >= cap) {
			refuse_busy(fd, "too many control connections");
			continue;
		}
		if (peer.uid != 0 && uid_clients(srv, peer.uid) >= srv->o.max_per_uid) {
			refuse_busy(fd, "too many control connections of this user");
			continue;
		}
		cl = calloc(1, sizeof(*cl));
		if (!cl) {
			refuse_busy(fd, "out of memory");
			continue;
		}
		cl->kind = CWC_EV_CLIENT;
		cl->fd = fd;
		cl->srv = srv;
		cl->uid = peer.uid;
		cl->gid = peer.gid;
		cl->pid = peer.pid;
		cl->can_change = peer.can_change;
		cl->can_read = peer.can_read;
		cl->tokens = srv->o.rate_burst;
		cl->refill_ns = cl->active_ns = srv->o.clock_ns();
		ev.data.ptr = cl;
		if (epoll_ctl(srv->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			close(fd);
			free(cl);
			continue;
		}
		cl->next = srv->clients;
		srv->clients = cl;
		srv->n_clients++;
	}
}

/* A connection that sends nothing and takes none of its replies for
 * idle_timeout_ns holds one of max_clients for nothing: 64 of them would
 * lock every cwctl out.  One waiting for a calibration is not idle.
 * Closes those; returns the milliseconds until the next one may be due
 * (-1: none), for the wait. */
static int clients_expire(struct cwc_server *srv)
{
	int64_t now = srv->o.clock_ns(), next = INT64_MAX;

	if (!srv->o.idle_timeout_ns)
		return -1;
	for (struct client *cl = srv->clients, *nx; cl; cl = nx) {
		int64_t due = cl->active_ns + srv->o.idle_timeout_ns;

		nx = cl->next;
		if (cl->job)
			continue;
		if (due <= now)
			client_close(srv, cl);
		else
			next = CW_MIN(next, due);
	}
	if (next == INT64_MAX)
		return -1;
	return (int)CW_MIN((next - now + 999999) / 1000000, (int64_t)INT32_MAX);
}

int cwc_server_dispatch(struct cwc_server *srv, int timeout_ms)
{
	struct epoll_event *ev = srv->batch;
	int due_ms = clients_expire(srv), http_ms = cwc_http_run(srv), n;

	if (http_ms >= 0 && (due_ms < 0 || http_ms < due_ms))
		due_ms = http_ms;
	if (due_ms >= 0 && (timeout_ms < 0 || due_ms < timeout_ms))
		timeout_ms = due_ms;
	n = epoll_wait(srv->epoll_fd, ev, (int)CW_ARRAY_SIZE(srv->batch), timeout_ms);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	/* Before any request sees them: bookings of moves the mover ended,
	 * of cache disks a cache gave back. */
	cwc_moves_settle(srv);
	cwc_caches_sync(srv, NULL, false);
	srv->batch_n = n;
	for (int i = 0; i < n; i++) {
		void *p = ev[i].data.ptr;
		struct client *cl;

		if (!p)
			continue;
		if (p == srv) {
			server_accept(srv);
			continue;
		}
		if (p == &srv->wake_fd) {
			uint64_t v;

			if (read(srv->wake_fd, &v, sizeof(v)) == sizeof(v))
				srv->stopping = true;
			continue;
		}
		if (*(enum cwc_ev_kind *)p == CWC_EV_JOB) {
			job_read(srv, p);
			continue;
		}
		if (*(enum cwc_ev_kind *)p == CWC_EV_HTTP)
			continue;	/* cwc_http_run serves them all below */
		cl = p;
		if (ev[i].events & EPOLLOUT)
			client_flush(cl);
		if (ev[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
			if (cl->job || cl->eof) {
				/* Not reading now; a hang-up ends it. */
				if (ev[i].events & (EPOLLHUP | EPOLLERR))
					cl->dead = true;
			} else {
				client_read(srv, cl);
			}
		}
		client_settle(srv, cl);
	}
	srv->batch_n = 0;
	if (srv->http)
		cwc_http_run(srv);
	return 0;
}

int cwc_server_run(struct cwc_server *srv)
{
	const struct cwc_hooks *h = &srv->o.hooks;
	int64_t next_tick = cw_now_ns() + CWC_TICK_MS * CW_NS_PER_MS;

	while (!srv->stopping) {
		int64_t now, wait_ms = -1;
		int r;

		if (h->tick) {
			now = cw_now_ns();
			if (now >= next_tick) {
				h->tick(h->userdata);
				next_tick = now + CWC_TICK_MS * CW_NS_PER_MS;
			}
			wait_ms = CW_DIV_ROUND_UP(next_tick - now, CW_NS_PER_MS);
		}
		r = cwc_server_dispatch(srv, (int)CW_MIN(wait_ms, CWC_TICK_MS));
		if (r < 0)
			return r;
	}
	return 0;
}

void cwc_server_stop(struct cwc_server *srv)
{
	uint64_t one = 1;

	if (write(srv->wake_fd, &one, sizeof(one)) < 0) {
		/* the counter is already non-zero: a stop is pending */
	}
}

int cwc_server_fd(const struct cwc_server *srv)
{
	return srv->epoll_fd;
}

int cwc_server_new(const struct cwc_server_opts *opts, struct cw_pool *pool,
		   struct cwc_server **ret_server)
{
	struct cwc_server *srv;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct epoll_event ev = { .events = EPOLLIN };
	int r;

	if (!opts || !pool || !ret_server || !opts->socket_path ||
	    strlen(opts->socket_path) >= sizeof(sa.sun_path) || !opts->clock_ns ||
	    !opts->wall_ns || !opts->calibrate)
		return -EINVAL;
	srv = calloc(1, sizeof(*srv));
	if (!srv)
		return -ENOMEM;
	srv->o = *opts;
	srv->pool = pool;
	srv->listen_fd = srv->epoll_fd = srv->wake_fd = -1;
	srv->path = strdup(opts->socket_path);
	if (!srv->path) {
		r = -ENOMEM;
		goto fail;
	}
	srv->adm = opts->admit;
	if (!srv->adm) {
		struct cw_admit_state_opts ao;

		cw_admit_state_opts_init(&ao);
		ao.preset_margin_ppm = opts->margin_ppm;
		ao.clock_ns = opts->clock_ns;
		ao.wall_ns = opts->wall_ns;
		r = cw_admit_state_new(pool, &ao, &srv->adm);
		if (r < 0)
			goto fail;
		srv->own_adm = true;
	}
	srv->o.socket_path = srv->path;
	if (!srv->o.max_clients)
		srv->o.max_clients = 1;
	if (!srv->o.max_per_uid)
		srv->o.max_per_uid = CW_MAX(srv->o.max_clients / 4, 1u);
	if (!srv->o.rate_per_s)
		srv->o.rate_per_s = 1;
	if (!srv->o.rate_burst)
		srv->o.rate_burst = 1;
	if (srv->o.out_max < CW_CTL_LINE_MAX)
		srv->o.out_max = CW_CTL_LINE_MAX;
	memcpy(sa.sun_path, srv->path, strlen(srv->path) + 1);

	r = cwc_clear_stale(srv->path, &sa);
	if (r < 0)
		goto fail;
	srv->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (srv->listen_fd < 0 || bind(srv->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		goto fail;
	}
	/* The file appears with the umask's mode, which never grants more
	 * than write to the owner (root) here; tighten or widen it now. */
	if (chmod(srv->path, srv->o.socket_mode) < 0 ||
	    (srv->o.socket_gid != CWC_NO_GID && chown(srv->path, (uid_t)-1, srv->o.socket_gid) < 0) ||
	    listen(srv->listen_fd, 64) < 0) {
		r = -errno;
		unlink(srv->path);
		goto fail;
	}
	srv->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	srv->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (srv->epoll_fd < 0 || srv->wake_fd < 0) {
		r = -errno;
		unlink(srv->path);
		goto fail;
	}
	ev.data.ptr = srv;
	if (epoll_ctl(srv->epoll_fd, EPOLL_CTL_ADD, srv->listen_fd, &ev) < 0) {
		r = -errno;
		unlink(srv->path);
		goto fail;
	}
	ev.data.ptr = &srv->wake_fd;
	if (epoll_ctl(srv->epoll_fd, EPOLL_CTL_ADD, srv->wake_fd, &ev) < 0) {
		r = -errno;
		unlink(srv->path);
		goto fail;
	}
	r = cwc_http_start(srv);
	if (r < 0) {
		unlink(srv->path);
		goto fail;
	}
	/* Last, so that nothing fails after the hooks were told. */
	r = cwc_export_load(srv);
	if (r < 0) {
		unlink(srv->path);
		goto fail;
	}
	/* Spans that ended while the server was down end now, and so do
	 * bookings of moves that ended just before a crash. */
	cwc_resv_expire(srv);
	cwc_moves_settle(srv);
	cwc_caches_sync(srv, NULL, true);
	*ret_server = srv;
	return 0;
fail:
	cwc_http_free(srv);
	if (srv->listen_fd >= 0)
		close(srv->listen_fd);
	if (srv->epoll_fd >= 0)
		close(srv->epoll_fd);
	if (srv->wake_fd >= 0)
		close(srv->wake_fd);
	if (srv->own_adm)
		cw_admit_state_free(srv->adm);
	free(srv->path);
	free(srv);
	return r;
}

void cwc_server_free(struct cwc_server *srv)
{
	if (!srv)
		return;
	/* Calibrations stop at their next progress report: the channel's
	 * shutdown fails their sends. */
	while (srv->jobs) {
		struct calib_job *job = srv->jobs;

		srv->jobs = job->next;
		atomic_store(&job->cancel, true);
		shutdown(job->fd, SHUT_RDWR);
		pthread_join(job->thread, NULL);
		close(job->fd);
		if (job->cl)
			job->cl->job = NULL;
		free(job);
	}
	while (srv->clients)
		client_close(srv, srv->clients);
	cwc_http_free(srv);
	close(srv->listen_fd);
	close(srv->epoll_fd);
	close(srv->wake_fd);
	unlink(srv->path);
	free(srv->exports);
	if (srv->own_adm)
		cw_admit_state_free(srv->adm);
	free(srv->path);
	free(srv);
}
