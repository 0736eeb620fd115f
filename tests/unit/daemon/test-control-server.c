/*
 * Description: the control server's command handlers over a real pool
 * (sqlite file, sparse-file disks), with the clock injected: reservations
 * whose time is over are released and the data path is told; a future
 * reservation keeps its start; a refusal names the disk, the condition
 * and, for Jeffay's condition (2), the interval L, and books nothing; an
 * installed disk model decides admission; access follows the caller's
 * rights; a failing hook changes nothing; missing hooks say
 * not-supported; the server runs in a thread over its socket and
 * stops from another; and reservations, exports and calibrated models
 * survive a restart of the server (and of the machine's monotonic clock),
 * with the same admission decisions after it, while a database that
 * cannot be written fails the command and changes nothing; connections
 * that stay silent are closed after the idle timeout.
 */
#include "config.h"

#include <pthread.h>
#include <semaphore.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "daemon/control/control.h"
#include "layout/pooltest.h"

static int64_t now_ns = 1000 * CW_NS_PER_S;

static int64_t fake_clock(void)
{
	return now_ns;
}

/* Wall-clock time: a fixed distance from the monotonic clock, until a
 * reboot moves it. */
static int64_t wall_off_ns = 1700000000 * CW_NS_PER_S;

static int64_t fake_wall(void)
{
	return now_ns + wall_off_ns;
}

struct hook_log {
	int added, removed;
	uint64_t last_id;
	int export_result;
	int exports;
	int exports_removed;
};

/* The admission state's listener: what the data path would be told. */
static void admit_event(void *userdata, const struct cw_admit_event *ev)
{
	struct hook_log *h = userdata;

	if (ev->kind == CW_ADMIT_EV_PLAN)
		return;
	if (ev->kind == CW_ADMIT_EV_RESV_ADDED)
		h->added++;
	else
		h->removed++;
	h->last_id = ev->resv->id;
}

static int export_add(void *userdata, const struct cwc_export *e, struct cw_part *part)
{
	struct hook_log *h = userdata;

	(void)e;
	CU_ASSERT_PTR_NOT_NULL(part);
	if (h->export_result == 0)
		h->exports++;
	return h->export_result;
}

static int export_remove(void *userdata, const struct cwc_export *e)
{
	struct hook_log *h = userdata;

	(void)e;
	h->exports_removed++;
	return 0;
}

struct fixture {
	struct tp t;
	struct cw_admit_state *adm;
	struct cwc_server *srv;
	struct hook_log log;
	char out[1 << 16];
	size_t out_len;
	struct cw_ctl_reply rep;
};

/* A calibration that measures nothing and reports a disk slow enough to
 * change admission: every request costs a quarter second more. */
static int slow_calibrate(const char *path, const struct cw_calib_opts *opts,
			  cw_calib_progress_fn progress, void *userdata, struct cw_model *ret_model)
{
	(void)path, (void)opts, (void)progress, (void)userdata;
	CU_ASSERT_FATAL(cw_model_preset("hdd7200", ret_model) == 0);
	ret_model->margin_ns = CW_NS_PER_S / 4;
	return 0;
}

/* A server over the fixture's pool (with the hooks, or none). */
static int fx_server(struct fixture *f, bool hooks)
{
	struct cw_admit_state_opts ao;
	struct cwc_server_opts o;
	char sock[160];
	int r;

	cw_admit_state_opts_init(&ao);
	ao.clock_ns = fake_clock;
	ao.wall_ns = fake_wall;
	if (hooks) {
		ao.listener = admit_event;
		ao.listener_data = &f->log;
	}
	cw_admit_state_free(f->adm);
	f->adm = NULL;
	r = cw_admit_state_new(f->t.pool, &ao, &f->adm);
	if (r < 0)
		return r;
	tp_path(&f->t, "ctl", sock, sizeof(sock));
	cwc_server_opts_init(&o);
	o.admit = f->adm;
	o.socket_path = sock;
	o.clock_ns = fake_clock;
	o.wall_ns = fake_wall;
	o.calibrate = slow_calibrate;
	if (hooks)
		o.hooks = (struct cwc_hooks){ .userdata = &f->log, .export_add = export_add,
					      .export_remove = export_remove };
	return cwc_server_new(&o, f->t.pool, &f->srv);
}

static void fx_start(struct fixture *f, bool hooks)
{
	static const uint64_t blocks[] = { 64, 64 };
	struct cw_part *p;

	memset(f, 0, sizeof(*f));
	tp_pool(&f->t, 0, 2, blocks, NULL);
	CU_ASSERT_FATAL(cw_part_create(f->t.pool, "media", 40 << 20, NULL, &p) == 0);
	CU_ASSERT_FATAL(fx_server(f, hooks) == 0);
}

/* Stops the server, closes and reopens the pool, starts a server again;
 * the hook counters start from zero. */
static void fx_restart(struct fixture *f)
{
	cw_ctl_reply_done(&f->rep);
	cwc_server_free(f->srv);
	f->srv = NULL;
	cw_admit_state_free(f->adm);
	f->adm = NULL;
	tp_reopen(&f->t);
	memset(&f->log, 0, sizeof(f->log));
	CU_ASSERT_FATAL(fx_server(f, true) == 0);
}

static void fx_stop(struct fixture *f)
{
	cw_ctl_reply_done(&f->rep);
	cwc_server_free(f->srv);
	cw_admit_state_free(f->adm);
	tp_fini(&f->t);
}

static void collect(const char *line, void *userdata)
{
	struct fixture *f = userdata;
	size_t n = strlen(line);

	CU_ASSERT_FATAL(f->out_len + n < sizeof(f->out));
	memcpy(f->out + f->out_len, line, n + 1);
	f->out_len += n;
}

/* Sends line with the given rights; the reply is in f->rep.  Returns the
 * error code (CW_CTL_OK on success). */
static enum cw_ctl_code send_as(struct fixture *f, bool can_read, bool can_change, const char *line)
{
	struct cw_ctl_fail fail;
	char *last;

	cw_ctl_reply_done(&f->rep);
	f->out_len = 0;
	f->out[0] = '\0';
	cwc_server_handle_line(f->srv, line, strlen(line), can_read, can_change, collect, f);
	CU_ASSERT_FATAL(f->out_len > 0 && f->out[f->out_len - 1] == '\n');
	f->out[f->out_len - 1] = '\0';
	last = strrchr(f->out, '\n');
	last = last ? last + 1 : f->out;
	CU_ASSERT_FATAL(cw_ctl_reply_parse(last, strlen(last), &f->rep, &fail) == 0);
	return f->rep.kind == CW_CTL_REPLY_OK ? CW_CTL_OK : f->rep.code;
}

static enum cw_ctl_code send_line(struct fixture *f, const char *line)
{
	return send_as(f, true, true, line);
}

static int64_t result_int(struct fixture *f, const char *key)
{
	return json_object_get_int64(json_object_object_get(f->rep.result, key));
}

static size_t result_len(struct fixture *f)
{
	return json_object_array_length(f->rep.result);
}

static void test_expiry(void)
{
	struct fixture f;
	struct cw_admit_resv *list;
	size_t n;

	fx_start(&f, true);
	CU_ASSERT_EQUAL_FATAL(send_line(&f, "{\"cmd\":\"resv.create\",\"args\":{\"part\":\"media\","
				       "\"rate\":1000000,\"block\":1048576,\"duration\":2000000000}}"),
			      CW_CTL_OK);
	CU_ASSERT_EQUAL(result_int(&f, "id"), 1);
	CU_ASSERT_EQUAL(result_int(&f, "ends_in_ns"), 2 * CW_NS_PER_S);
	CU_ASSERT_EQUAL(f.log.added, 1);
	CU_ASSERT_EQUAL_FATAL(cw_admit_state_resv_list(f.adm, &list, &n), 0);
	CU_ASSERT_EQUAL(n, 1);
	CU_ASSERT_EQUAL(list[0].span_end_ns, now_ns + 2 * CW_NS_PER_S);
	CU_ASSERT(list[0].n_parts == 2);	/* striped over both disks */
	cw_admit_resv_list_free(list, n);

	now_ns += CW_NS_PER_S;	/* still running */
	CU_ASSERT_EQUAL(send_line(&f, "{\"cmd\":\"resv.list\"}"), CW_CTL_OK);
	CU_ASSERT_EQUAL(result_len(&f), 1);
	now_ns += CW_NS_PER_S;	/* its end: released, and the data path is told */
	CU_ASSERT_EQUAL(send_line(&f, "{\"cmd\":\"resv.list\"}"), CW_CTL_OK);
	CU_ASSERT_EQUAL(result_len(&f), 0);
	CU_ASSERT_EQUAL(f.log.removed, 1);
	CU_ASSERT_EQUAL(f.log.last_id, 1);
	CU_ASSERT_EQUAL_FATAL(cw_admit_state_resv_list(f.adm, &list, &n), 0);
	CU_ASSERT_EQUAL(n, 0);
	cw_admit_resv_list_free(list, n);

	/* A future one keeps its start; ids are not reused. */
	CU_ASSERT_EQUAL_FATAL(send_line(&f, "{\"cmd\":\"resv.create\",\"args\":{\"part\":\"media\","
				       "\"rate\":1000000,\"block\":1048576,\"start\":10000000000}}"),
			      CW_CTL_OK);
	CU_ASSERT_EQUAL(result_int(&f, "id"), 2);
	CU_ASSERT_EQUAL(result_int(&f, "starts_in_ns"), 10 * CW_NS_PER_S);
	fx_stop(&f);
}

static void test_refusals(void)
{
	struct fixture f;
	json_object *det;

	fx_start(&f, true);
	/* A long-period stream of 16 MiB requests: each takes many seeks on
	 * each disk, which a short-period stream cannot wait out. */
	CU_ASSERT_EQUAL_FATAL(send_line(&f, "{\"cmd\":\"resv.create\",\"args\":{\"part\":\"media\","
				       "\"rate\":1000000,\"block\":16777216}}"), CW_CTL_OK);
	CU_ASSERT_EQUAL(send_line(&f, "{\"cmd\":\"resv.create\",\"args\":{\"part\":\"media\","
				  "\"rate\":1000000,\"block\":65536}}"), CW_CTL_E_REFUSED);
	det = f.rep.details;
	CU_ASSERT_PTR_NOT_NULL_FATAL(det);
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(det, "condition")),
			       "blocking");
	CU_ASSERT(json_object_get_int64(json_object_object_get(det, "l_ns")) > 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(f.rep.message, "refused on disk disk"));
	CU_ASSERT_EQUAL(f.log.added, 1);	/* the refusal booked nothing */

	/* Condition (1): more than the disks can carry. */
	CU_ASSERT_EQUAL(send_line(&f, "{\"cmd\":\"resv.create\",\"args\":{\"part\":\"media\","
				  "\"rate\":1000000000,\"block\":1048576}}"), CW_CTL_E_REFUSED);
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(f.rep.details,
									     "condition")),
			       "utilization");
	CU_ASSERT_EQUAL(send_line(&f, "{\"cmd\":\"resv.list\"}"), CW_CTL_OK);
	CU_ASSERT_EQUAL(result_len(&f), 1);

	/* Bad values inside well-typed requests. */
	CU_ASSERT_EQUAL(send_line(&f, "{\"cmd\":\"resv.create\",\"args\":{\"part\":\"media\","
				  "\"rate\":0,\"block\":65536}}"), CW_CTL_E_BAD_REQUEST);
	CU_ASSERT_EQUAL(send_line(&f, "{\"cmd\":\"resv.create\",\"args\":{\"part\":\"media\","
				  "\"rate\":1,\"block\":65536,\"range_start\":5,\"range_end\":5}}"),
			CW_CTL_E_BAD_REQUEST);
	CU_ASSERT_EQUAL(send_line(&f, "{\"cmd\":\"part.create\",\"args\":{\"name\":\"x\","
				  "\"size\":1,\"disk\":\"disk1\"}}"), CW_CTL_E_BAD_REQUEST);
	fx_stop(&f);
}

static void test_model(void)
{
	struct fixture f;
	struct cw_model m;

	fx_start(&f, true);
	/* A disk model so slow that even a slow stream is too much. */
	CU_ASSERT_FATAL(cw_model_preset("hdd7200", &m) == 0);
	m.margin_ns = CW_NS_PER_S;	/* C over 1 s; every other block is on disk 1 */
	CU_ASSERT_EQUAL(cw_admit_state_set_model(f.adm, 1, &m, CW_ADMIT_MODEL_CALIBRATED, NULL,
						 NULL, NULL), 0);
	CU_ASSERT_EQUAL(cw_admit_state_set_model(f.adm, 0, &m, CW_ADMIT_MODEL_CALIBRATED, NULL,
						 NULL, NULL), -ENOENT);
	m.margin_ns = 2 * CW_NS_PER_S;	/* beyond what a model may say: refused */
	CU_ASSERT_EQUAL(cw_admit_state_set_model(f.adm, 2, &m, CW_ADMIT_MODEL_CALIBRATED, NULL,
						 NULL, NULL), -EINVAL);
	CU_ASSERT_EQUAL(send_line(&f, "{\"cmd\":\"resv.create\",\"args\":{\"part\":\"media\","
				  "\"rate\":4000000,\"block\":1048576}}"), CW_CTL_E_REFUSED);
	CU_ASSERT_EQUAL(json_object_get_int(json_object_object_get(f.rep.details, "disk_id")), 1);
	CU_ASSERT_EQUAL(send_line(&f, "{\"cmd\":\"disk.list\"}"), CW_CTL_OK);
	CU_ASSERT(json_object_get_boolean(json_object_object_get(
		json_object_object_get(json_object_array_get_idx(f.rep.result, 0), "model"),
		"calibrated")));
	CU_ASSERT_FALSE(json_object_get_boolean(json_object_object_get(
		json_object_object_get(json_object_array_get_idx(f.rep.result, 1), "model"),
		"calibrated")));
	/* With the preset on both disks the same stream fits. */
	CU_ASSERT_FATAL(cw_model_preset("hdd7200", &m) == 0);
	CU_ASSERT_EQUAL(cw_admit_state_set_model(f.adm, 1, &m, CW_ADMIT_MODEL_CALIBRATED, NULL,
						 NULL, NULL), 0);
	CU_ASSERT_EQUAL(send_line(&f, "{\"cmd\":\"resv.create\",\"args\":{\"part\":\"media\","
				  "\"rate\":4000000,\"block\":1048576}}"), CW_CTL_OK);
	fx_stop(&f);
}

static void test_access_and_hooks(void)
{
	struct fixture f;

	fx_start(&f, true);
	CU_ASSERT_EQUAL(send_as(&f, false, false, "{\"cmd\":\"status\"}"), CW_CTL_E_PERMISSION_DENIED);
	CU_ASSERT_EQUAL(send_as(&f, true, false, "{\"cmd\":\"status\"}"), CW_CTL_OK);
	CU_ASSERT_EQUAL(send_as(&f, true, false, "{\"cmd\":\"part.delete\",\"args\":"
					       "{\"name\":\"media\"}}"), CW_CTL_E_PERMISSION_DENIED);
	CU_ASSERT_EQUAL(send_line(&f, "{\"cmd\":\"part.list\"}"), CW_CTL_OK);
	CU_ASSERT_EQUAL(result_len(&f), 1);	/* still there */

	f.log.export_result = -EIO;
	CU_ASSERT_EQUAL(send_line(&f, "{\"cmd\":\"export.add\",\"args\":{\"part\":\"media\"}}"),
			CW_CTL_E_IO_ERROR);
	CU_ASSERT_EQUAL(send_line(&f, "{\"cmd\":\"export.list\"}"), CW_CTL_OK);
	CU_ASSERT_EQUAL(result_len(&f), 0);
	f.log.export_result = 0;
	CU_ASSERT_EQUAL(send_line(&f, "{\"cmd\":\"export.add\",\"args\":{\"part\":\"media\","
				  "\"resv\":9}}"), CW_CTL_E_NOT_FOUND);
	CU_ASSERT_EQUAL(send_line(&f, "{\"cmd\":\"export.add\",\"args\":{\"part\":\"media\"}}"),
			CW_CTL_OK);
	CU_ASSERT_EQUAL(f.log.exports, 1);
	CU_ASSERT_EQUAL(send_line(&f, "{\"cmd\":\"stats\"}"), CW_CTL_E_NOT_SUPPORTED);
	fx_stop(&f);

	fx_start(&f, false);
	CU_ASSERT_EQUAL(send_line(&f, "{\"cmd\":\"export.add\",\"args\":{\"part\":\"media\"}}"),
			CW_CTL_E_NOT_SUPPORTED);
	CU_ASSERT_EQUAL(send_line(&f, "{\"cmd\":\"status\"}"), CW_CTL_OK);
	CU_ASSERT_FALSE(json_object_get_boolean(json_object_object_get(f.rep.result, "data_path")));
	fx_stop(&f);
}

static void *run_server(void *arg)
{
	return (void *)(intptr_t)cwc_server_run(arg);
}

static void test_thread(void)
{
	struct fixture f;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	pthread_t th;
	void *res;
	char buf[65536];
	size_t got = 0;
	int fd;
	static const char req[] = "{\"cmd\":\"part.list\"}\n{\"cmd\":\"disk.list\"}\n";

	fx_start(&f, true);
	tp_path(&f.t, "ctl", sa.sun_path, sizeof(sa.sun_path));
	CU_ASSERT_FATAL(pthread_create(&th, NULL, run_server, f.srv) == 0);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_FATAL(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	CU_ASSERT_FATAL(send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) == (ssize_t)sizeof(req) - 1);
	/* Two replies, one line each. */
	while (got < sizeof(buf) - 1) {
		ssize_t n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
		size_t lines = 0;

		CU_ASSERT_FATAL(n > 0);
		got += (size_t)n;
		for (size_t i = 0; i < got; i++)
			lines += buf[i] == '\n';
		if (lines == 2)
			break;
	}
	buf[got] = '\0';
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"name\":\"media\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"name\":\"disk2\""));
	cwc_server_stop(f.srv);
	CU_ASSERT_FATAL(pthread_join(th, &res) == 0);
	CU_ASSERT_EQUAL((intptr_t)res, 0);
	close(fd);
	fx_stop(&f);
	CU_ASSERT_EQUAL(access(sa.sun_path, F_OK), -1);	/* the socket is gone */
}

/* A calibration that reports once, then waits for the test to let it
 * finish, and measures nothing: what it returns is a preset. */
static sem_t calib_entered, calib_go;

static int held_calibrate(const char *path, const struct cw_calib_opts *opts,
			  cw_calib_progress_fn progress, void *userdata, struct cw_model *ret_model)
{
	(void)path;
	CU_ASSERT_EQUAL(progress("seek", 1, 2, userdata), 0);
	sem_post(&calib_entered);
	while (sem_wait(&calib_go) < 0)
		;
	CU_ASSERT_EQUAL(progress("seek", 2, 2, userdata), 0);
	CU_ASSERT_FATAL(cw_model_preset("hdd7200", ret_model) == 0);
	snprintf(ret_model->name, sizeof(ret_model->name), "%s", opts->name);
	return 0;
}

static int connect_to(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	CU_ASSERT_FATAL(fd >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	CU_ASSERT_FATAL(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	return fd;
}

/* Reads from fd until buf holds `lines` lines. */
static void read_lines(int fd, char *buf, size_t cap, size_t *len, unsigned lines)
{
	for (;;) {
		unsigned have = 0;
		ssize_t n;

		for (size_t i = 0; i < *len; i++)
			have += buf[i] == '\n';
		if (have >= lines)
			break;
		n = recv(fd, buf + *len, cap - 1 - *len, 0);
		CU_ASSERT_FATAL(n > 0);
		*len += (size_t)n;
	}
	buf[*len] = '\0';
}

static void test_calibration_thread(void)
{
	static const uint64_t blocks[] = { 64, 64 };
	static const char cal[] = "{\"cmd\":\"disk.calibrate\",\"args\":{\"name\":\"disk1\"}}\n"
				  "{\"cmd\":\"part.list\"}\n";
	struct cwc_server_opts o;
	struct cwc_server *srv;
	struct tp t;
	char sock[160], a[8192], b[8192];
	size_t alen = 0, blen = 0;
	pthread_t th;
	int fa, fb;

	sem_init(&calib_entered, 0, 0);
	sem_init(&calib_go, 0, 0);
	tp_pool(&t, 0, 2, blocks, NULL);
	tp_path(&t, "ctl", sock, sizeof(sock));
	cwc_server_opts_init(&o);
	o.socket_path = sock;
	o.calibrate = held_calibrate;
	CU_ASSERT_FATAL(cwc_server_new(&o, t.pool, &srv) == 0);
	CU_ASSERT_FATAL(pthread_create(&th, NULL, run_server, srv) == 0);

	/* A asks for a calibration and, on the same line, a list after it. */
	fa = connect_to(sock);
	CU_ASSERT_FATAL(send(fa, cal, sizeof(cal) - 1, MSG_NOSIGNAL) == (ssize_t)sizeof(cal) - 1);
	while (sem_wait(&calib_entered) < 0)
		;
	read_lines(fa, a, sizeof(a), &alen, 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(a, "\"progress\""));

	/* Meanwhile B is served. */
	fb = connect_to(sock);
	CU_ASSERT_FATAL(send(fb, "{\"cmd\":\"disk.list\"}\n", 20, MSG_NOSIGNAL) == 20);
	read_lines(fb, b, sizeof(b), &blen, 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(b, "\"ok\":true"));
	CU_ASSERT_PTR_NOT_NULL(strstr(b, "\"calibrated\":false"));

	/* Let it finish: A gets the second progress line, the reply, and
	 * only then the list it sent after the calibration. */
	sem_post(&calib_go);
	read_lines(fa, a, sizeof(a), &alen, 4);
	{
		char *cal_reply = strstr(a, "\"model\":\"cwmodel1");
		char *list_reply = strstr(a, "\"name\":\"media\"");
		char *second = strstr(a, "\"done\":2");

		CU_ASSERT_PTR_NOT_NULL_FATAL(cal_reply);
		CU_ASSERT_PTR_NOT_NULL_FATAL(second);
		CU_ASSERT(second < cal_reply);
		/* no partition yet: the list is empty, after the reply */
		CU_ASSERT_PTR_NULL(list_reply);
		CU_ASSERT_PTR_NOT_NULL(strstr(cal_reply, "{\"ok\":true,\"result\":[]}"));
	}
	blen = 0;
	CU_ASSERT_FATAL(send(fb, "{\"cmd\":\"disk.list\"}\n", 20, MSG_NOSIGNAL) == 20);
	read_lines(fb, b, sizeof(b), &blen, 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(b, "\"name\":\"disk1\",\"calibrated\":true"));

	/* A client that leaves mid-calibration: the model is still stored,
	 * the server goes on. */
	CU_ASSERT_FATAL(send(fb, "{\"cmd\":\"disk.calibrate\",\"args\":{\"name\":\"disk2\"}}\n", 49,
			     MSG_NOSIGNAL) == 49);
	while (sem_wait(&calib_entered) < 0)
		;
	close(fb);
	sem_post(&calib_go);
	alen = 0;
	for (int64_t until = cw_now_ns() + 20 * CW_NS_PER_S; cw_now_ns() < until;) {
		/* Poll the state through A until disk2 shows calibrated. */
		CU_ASSERT_FATAL(send(fa, "{\"cmd\":\"disk.list\"}\n", 20, MSG_NOSIGNAL) == 20);
		alen = 0;
		read_lines(fa, a, sizeof(a), &alen, 1);
		if (strstr(a, "\"name\":\"disk2\",\"calibrated\":true"))
			break;
	}
	CU_ASSERT_PTR_NOT_NULL(strstr(a, "\"name\":\"disk2\",\"calibrated\":true"));

	cwc_server_stop(srv);
	CU_ASSERT_FATAL(pthread_join(th, NULL) == 0);
	close(fa);
	cwc_server_free(srv);
	tp_fini(&t);
	sem_destroy(&calib_entered);
	sem_destroy(&calib_go);
}

static void test_restart(void)
{
	struct fixture f;
	char refused[512], refused_cond[64];
	int64_t ends_in;
	int refused_disk;

	fx_start(&f, true);
	/* Disk 1 measured slow: its model decides, now and after. */
	CU_ASSERT_EQUAL_FATAL(send_line(&f, "{\"cmd\":\"disk.calibrate\",\"args\":"
				       "{\"name\":\"disk1\"}}"), CW_CTL_OK);
	CU_ASSERT_EQUAL_FATAL(send_line(&f, "{\"cmd\":\"resv.create\",\"args\":{\"part\":\"media\","
				       "\"rate\":1000000,\"block\":1048576,\"duration\":"
				       "600000000000}}"), CW_CTL_OK);
	CU_ASSERT_EQUAL(result_int(&f, "id"), 1);
	CU_ASSERT_EQUAL_FATAL(send_line(&f, "{\"cmd\":\"resv.create\",\"args\":{\"part\":\"media\","
				       "\"rate\":500000,\"block\":1048576,\"start\":5000000000}}"),
			      CW_CTL_OK);
	CU_ASSERT_EQUAL(result_int(&f, "id"), 2);
	/* One that ends in 2 s: over when the server comes back. */
	CU_ASSERT_EQUAL_FATAL(send_line(&f, "{\"cmd\":\"resv.create\",\"args\":{\"part\":\"media\","
				       "\"rate\":100000,\"block\":1048576,\"duration\":"
				       "2000000000}}"), CW_CTL_OK);
	CU_ASSERT_EQUAL_FATAL(send_line(&f, "{\"cmd\":\"export.add\",\"args\":{\"part\":\"media\","
				       "\"name\":\"movie\",\"readonly\":true,\"resv\":1}}"), CW_CTL_OK);
	CU_ASSERT_EQUAL_FATAL(send_line(&f, "{\"cmd\":\"export.add\",\"args\":{\"part\":\"media\","
				       "\"name\":\"spare\"}}"), CW_CTL_OK);
	/* A stream the slow disk refuses beside the others. */
	CU_ASSERT_EQUAL_FATAL(send_line(&f, "{\"cmd\":\"resv.create\",\"args\":{\"part\":\"media\","
				       "\"rate\":8000000,\"block\":1048576}}"), CW_CTL_E_REFUSED);
	snprintf(refused, sizeof(refused), "%s", f.rep.message);
	snprintf(refused_cond, sizeof(refused_cond), "%s", json_object_get_string(
		json_object_object_get(f.rep.details, "condition")));
	refused_disk = json_object_get_int(json_object_object_get(f.rep.details, "disk_id"));
	CU_ASSERT_EQUAL(refused_disk, 1);

	/* A reboot: the monotonic clock starts again, wall-clock time goes on. */
	now_ns += 3 * CW_NS_PER_S;
	wall_off_ns += 500 * CW_NS_PER_S - 3 * CW_NS_PER_S;
	now_ns -= 500 * CW_NS_PER_S - 3 * CW_NS_PER_S;
	CU_ASSERT_FATAL(now_ns > 0);
	fx_restart(&f);
	/* The admission state loads the three without announcing them (a
	 * data path made after it reads them), then the ended one is
	 * released, and that is announced. */
	CU_ASSERT_EQUAL(f.log.added, 0);
	CU_ASSERT_EQUAL(f.log.removed, 1);
	CU_ASSERT_EQUAL(f.log.last_id, 3);
	CU_ASSERT_EQUAL(f.log.exports, 2);	/* both exports served again */
	CU_ASSERT_EQUAL(send_line(&f, "{\"cmd\":\"resv.list\"}"), CW_CTL_OK);
	CU_ASSERT_EQUAL_FATAL(result_len(&f), 2);
	CU_ASSERT_EQUAL_FATAL(send_line(&f, "{\"cmd\":\"resv.show\",\"args\":{\"id\":1}}"),
			      CW_CTL_OK);
	CU_ASSERT_EQUAL(result_int(&f, "rate"), 1000000);
	ends_in = result_int(&f, "ends_in_ns");
	CU_ASSERT_EQUAL(ends_in, 597 * CW_NS_PER_S);	/* wall-clock end kept */
	CU_ASSERT_EQUAL(json_object_array_length(json_object_object_get(f.rep.result,
									   "per_disk")), 2);
	CU_ASSERT_EQUAL_FATAL(send_line(&f, "{\"cmd\":\"resv.show\",\"args\":{\"id\":2}}"),
			      CW_CTL_OK);
	CU_ASSERT_EQUAL(result_int(&f, "starts_in_ns"), 2 * CW_NS_PER_S);
	CU_ASSERT_EQUAL(send_line(&f, "{\"cmd\":\"resv.show\",\"args\":{\"id\":3}}"),
			CW_CTL_E_NOT_FOUND);
	CU_ASSERT_EQUAL_FATAL(send_line(&f, "{\"cmd\":\"export.list\"}"), CW_CTL_OK);
	CU_ASSERT_EQUAL_FATAL(result_len(&f), 2);
	{
		json_object *m = json_object_array_get_idx(f.rep.result, 0);

		CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(m, "name")),
				       "movie");
		CU_ASSERT(json_object_get_boolean(json_object_object_get(m, "readonly")));
		CU_ASSERT_EQUAL(json_object_get_int64(json_object_object_get(m, "resv")), 1);
	}
	CU_ASSERT_EQUAL(send_line(&f, "{\"cmd\":\"disk.list\"}"), CW_CTL_OK);
	CU_ASSERT(json_object_get_boolean(json_object_object_get(
		json_object_object_get(json_object_array_get_idx(f.rep.result, 0), "model"),
		"calibrated")));

	/* The same decision as before the restart. */
	CU_ASSERT_EQUAL(send_line(&f, "{\"cmd\":\"resv.create\",\"args\":{\"part\":\"media\","
				  "\"rate\":8000000,\"block\":1048576}}"), CW_CTL_E_REFUSED);
	/* Word for word: the refusal names the stream, not its place in a
	 * task set (which differs: the ended one is gone). */
	CU_ASSERT_PTR_NOT_NULL_FATAL(strstr(refused, "of the new stream takes"));
	CU_ASSERT_STRING_EQUAL(f.rep.message, refused);
	CU_ASSERT_EQUAL(json_object_get_int(json_object_object_get(f.rep.details, "disk_id")),
			refused_disk);
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(f.rep.details,
									     "condition")),
			       refused_cond);
	/* Ids go on after the highest ever given. */
	CU_ASSERT_EQUAL_FATAL(send_line(&f, "{\"cmd\":\"resv.create\",\"args\":{\"part\":\"media\","
				       "\"rate\":100000,\"block\":1048576}}"), CW_CTL_OK);
	CU_ASSERT_EQUAL(result_int(&f, "id"), 4);

	/* The rules hold across the restart too. */
	CU_ASSERT_EQUAL(send_line(&f, "{\"cmd\":\"resv.release\",\"args\":{\"id\":1}}"),
			CW_CTL_E_BUSY);
	CU_ASSERT_EQUAL(send_line(&f, "{\"cmd\":\"export.remove\",\"args\":{\"name\":\"movie\"}}"),
			CW_CTL_OK);
	CU_ASSERT_EQUAL(f.log.exports_removed, 1);
	CU_ASSERT_EQUAL(send_line(&f, "{\"cmd\":\"resv.release\",\"args\":{\"id\":1}}"), CW_CTL_OK);
	CU_ASSERT_EQUAL(result_int(&f, "id"), 1);
	fx_restart(&f);
	CU_ASSERT_PTR_NOT_NULL(cw_admit_state_resv_find(f.adm, 2));
	CU_ASSERT_PTR_NOT_NULL(cw_admit_state_resv_find(f.adm, 4));
	CU_ASSERT_PTR_NULL(cw_admit_state_resv_at(f.adm, 2));
	CU_ASSERT_EQUAL(f.log.exports, 1);
	CU_ASSERT_EQUAL(sql_int(f.t.db, "SELECT count(*) FROM resv"), 2);
	fx_stop(&f);
}

/* A database another connection holds locked: every changing command
 * fails, and neither memory nor the data path sees a change. */
static void test_database_refuses(void)
{
	struct fixture f;
	sqlite3 *h;

	fx_start(&f, true);
	CU_ASSERT_EQUAL_FATAL(send_line(&f, "{\"cmd\":\"resv.create\",\"args\":{\"part\":\"media\","
				       "\"rate\":100000,\"block\":1048576}}"), CW_CTL_OK);
	CU_ASSERT_FATAL(sqlite3_open(f.t.db, &h) == SQLITE_OK);
	CU_ASSERT_FATAL(sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK);
	CU_ASSERT_NOT_EQUAL(send_line(&f, "{\"cmd\":\"resv.create\",\"args\":{\"part\":\"media\","
				      "\"rate\":100000,\"block\":1048576}}"), CW_CTL_OK);
	CU_ASSERT_NOT_EQUAL(send_line(&f, "{\"cmd\":\"resv.release\",\"args\":{\"id\":1}}"),
			    CW_CTL_OK);
	CU_ASSERT_NOT_EQUAL(send_line(&f, "{\"cmd\":\"export.add\",\"args\":{\"part\":\"media\"}}"),
			    CW_CTL_OK);
	CU_ASSERT_EQUAL(f.log.added, 1);
	CU_ASSERT_EQUAL(f.log.removed, 0);
	CU_ASSERT_EQUAL(f.log.exports, 0);
	CU_ASSERT_EQUAL(send_line(&f, "{\"cmd\":\"resv.list\"}"), CW_CTL_OK);
	CU_ASSERT_EQUAL(result_len(&f), 1);
	CU_ASSERT_EQUAL(send_line(&f, "{\"cmd\":\"export.list\"}"), CW_CTL_OK);
	CU_ASSERT_EQUAL(result_len(&f), 0);
	CU_ASSERT_FATAL(sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL) == SQLITE_OK);
	sqlite3_close(h);
	/* Free again: the same commands go through. */
	CU_ASSERT_EQUAL(send_line(&f, "{\"cmd\":\"export.add\",\"args\":{\"part\":\"media\"}}"),
			CW_CTL_OK);
	CU_ASSERT_EQUAL(send_line(&f, "{\"cmd\":\"resv.release\",\"args\":{\"id\":1}}"), CW_CTL_OK);
	fx_stop(&f);
}

/* A stored export the data path refuses fails the start, and what the
 * start had told the hooks is taken back; one on a missing disk (-ENODEV)
 * stays listed and the start goes on, as a degraded pool should. */
static void test_start_fails_cleanly(void)
{
	struct fixture f;

	fx_start(&f, true);
	CU_ASSERT_EQUAL_FATAL(send_line(&f, "{\"cmd\":\"resv.create\",\"args\":{\"part\":\"media\","
				       "\"rate\":100000,\"block\":1048576}}"), CW_CTL_OK);
	CU_ASSERT_EQUAL_FATAL(send_line(&f, "{\"cmd\":\"export.add\",\"args\":{\"part\":\"media\","
				       "\"name\":\"a\"}}"), CW_CTL_OK);
	CU_ASSERT_EQUAL_FATAL(send_line(&f, "{\"cmd\":\"export.add\",\"args\":{\"part\":\"media\","
				       "\"name\":\"b\"}}"), CW_CTL_OK);
	cw_ctl_reply_done(&f.rep);
	cwc_server_free(f.srv);
	f.srv = NULL;
	memset(&f.log, 0, sizeof(f.log));
	f.log.export_result = -EIO;
	CU_ASSERT_EQUAL(fx_server(&f, true), -EIO);
	CU_ASSERT_PTR_NULL(f.srv);
	/* Reservations are the admission state's, loaded before the server
	 * and untouched by its failed start. */
	CU_ASSERT_EQUAL(f.log.added, 0);
	CU_ASSERT_EQUAL(f.log.removed, 0);
	CU_ASSERT_PTR_NOT_NULL(cw_admit_state_resv_find(f.adm, 1));
	CU_ASSERT_EQUAL(f.log.exports_removed, 0);	/* the first add failed */
	/* Nothing was lost from the pool. */
	CU_ASSERT_EQUAL(sql_int(f.t.db, "SELECT count(*) FROM export"), 2);
	f.log.export_result = -ENODEV;
	CU_ASSERT_FATAL(fx_server(&f, true) == 0);
	CU_ASSERT_EQUAL(sql_int(f.t.db, "SELECT count(*) FROM export"), 2);
	cwc_server_free(f.srv);
	f.srv = NULL;
	memset(&f.log, 0, sizeof(f.log));
	f.log.export_result = 0;
	CU_ASSERT_FATAL(fx_server(&f, true) == 0);
	CU_ASSERT_EQUAL(f.log.exports, 2);
	fx_stop(&f);
}

/* Dispatches what is ready, without waiting, until nothing is. */
static void drain(struct cwc_server *srv)
{
	for (int i = 0; i < 8; i++)
		CU_ASSERT_EQUAL_FATAL(cwc_server_dispatch(srv, 0), 0);
}

/* Whether the server closed fd (end of file, after any replies). */
static bool closed_by_server(int fd)
{
	char buf[512];
	ssize_t n;

	while ((n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		;
	return n == 0;
}

/* 64 connections that say nothing held every slot, and cwctl got "busy"
 * until the daemon restarted; now a connection silent for the idle
 * timeout is closed, and one that speaks keeps its slot. */
static void test_idle_timeout(void)
{
	struct fixture f;
	char path[160], buf[4096];
	int fds[64], late, quiet;
	size_t len = 0;

	fx_start(&f, true);
	tp_path(&f.t, "ctl", path, sizeof(path));
	for (int i = 0; i < 64; i++)
		fds[i] = connect_to(path);
	drain(f.srv);
	late = connect_to(path);
	drain(f.srv);
	read_lines(late, buf, sizeof(buf), &len, 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"busy\""));
	close(late);

	/* 20 s on, one of them sends a keep-alive (a blank line). */
	now_ns += 20 * CW_NS_PER_S;
	quiet = fds[0];
	CU_ASSERT_FATAL(send(fds[1], "\n", 1, MSG_NOSIGNAL) == 1);
	drain(f.srv);
	for (int i = 0; i < 64; i++)
		CU_ASSERT_FALSE(closed_by_server(fds[i]));
	now_ns += 11 * CW_NS_PER_S;	/* 31 s after they connected */
	drain(f.srv);
	CU_ASSERT_TRUE(closed_by_server(quiet));
	for (int i = 2; i < 64; i++)
		CU_ASSERT_TRUE(closed_by_server(fds[i]));
	CU_ASSERT_FALSE(closed_by_server(fds[1]));

	/* The slots are free: a new client is served. */
	late = connect_to(path);
	CU_ASSERT_FATAL(send(late, "{\"cmd\":\"part.list\"}\n", 20, MSG_NOSIGNAL) == 20);
	drain(f.srv);
	len = 0;
	read_lines(late, buf, sizeof(buf), &len, 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"ok\":true"));
	close(late);
	now_ns += 20 * CW_NS_PER_S;	/* the keep-alive's 30 s are over */
	drain(f.srv);
	CU_ASSERT_TRUE(closed_by_server(fds[1]));
	for (int i = 0; i < 64; i++)
		close(fds[i]);
	fx_stop(&f);
}

/* Connects n times as euid uid (the kernel's SO_PEERCRED names the
 * effective user); returns how many the server kept after a dispatch. */
static int connect_as(struct fixture *f, const char *path, uid_t uid, int *fds, int n)
{
	int kept = 0;

	CU_ASSERT_FATAL(seteuid(uid) == 0);
	for (int i = 0; i < n; i++)
		fds[i] = connect_to(path);
	CU_ASSERT_FATAL(seteuid(0) == 0);
	drain(f->srv);
	for (int i = 0; i < n; i++) {
		char buf[512];
		ssize_t r = recv(fds[i], buf, sizeof(buf) - 1, MSG_DONTWAIT);

		if (r > 0) {
			buf[r] = '\0';
			CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"busy\""));
		} else {
			kept++;
		}
	}
	return kept;
}

/* One user kept 64 control connections alive and root got "busy": now a
 * user holds at most a quarter of them, and the last two are root's. */
static void test_shares_and_root_reserve(void)
{
	struct fixture f;
	char path[160], buf[4096];
	int fds[5][20], root, kept[5];
	size_t len = 0;

	if (geteuid() != 0) {
		printf("skipped: connecting as other users needs root\n");
		return;
	}
	fx_start(&f, true);
	tp_path(&f.t, "ctl", path, sizeof(path));
	CU_ASSERT_FATAL(chmod(f.t.dir, 0711) == 0 && chmod(path, 0666) == 0);
	/* Five users, 20 connections each. */
	printf("\n  kept of 20:");
	for (int u = 0; u < 5; u++) {
		kept[u] = connect_as(&f, path, (uid_t)(65534 - u), fds[u], 20);
		printf(" %d", kept[u]);
	}
	printf("\n");
	CU_ASSERT_EQUAL(kept[0], 16);
	CU_ASSERT_EQUAL(kept[1], 16);
	CU_ASSERT_EQUAL(kept[2], 16);
	CU_ASSERT_EQUAL(kept[3], 64 - 2 - 3 * 16);
	CU_ASSERT_EQUAL(kept[4], 0);
	root = connect_to(path);
	CU_ASSERT_FATAL(send(root, "{\"cmd\":\"part.list\"}\n", 20, MSG_NOSIGNAL) == 20);
	drain(f.srv);
	read_lines(root, buf, sizeof(buf), &len, 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"ok\":true"));
	close(root);
	for (int u = 0; u < 5; u++)
		for (int i = 0; i < 20; i++)
			close(fds[u][i]);
	fx_stop(&f);
}

int main(void)
{
	CU_pSuite s = cwtest_suite("control-server", NULL, NULL);

	cwtest_add(s, "reservations expire", test_expiry);
	cwtest_add(s, "refusals name disk, condition and L", test_refusals);
	cwtest_add(s, "installed models decide admission", test_model);
	cwtest_add(s, "access and hooks", test_access_and_hooks);
	cwtest_add(s, "runs in a thread, stops from another", test_thread);
	cwtest_add(s, "a calibration does not stop the others", test_calibration_thread);
	cwtest_add(s, "state survives a restart", test_restart);
	cwtest_add(s, "a database that refuses changes nothing", test_database_refuses);
	cwtest_add(s, "a start that fails takes back its hooks", test_start_fails_cleanly);
	cwtest_add(s, "silent connections are closed", test_idle_timeout);
	cwtest_add(s, "a share per user, a reserve for root", test_shares_and_root_reserve);
	return cwtest_run();
}
