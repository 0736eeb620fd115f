/*
 * Description: the fault-injecting engine on real files, over io_uring
 * and the memory engine: its settings parse (and bad ones are refused
 * with the reason); the nth write, the nth fsync and requests touching a
 * range fail with EIO and leave the file as it was; a torn write leaves
 * its first half; a power cut puts back what the last completed fsync
 * covered and nothing later (an fsync covers only the writes completed
 * when it was submitted, a failed fsync covers none), or with tear leaves
 * each write old, new or cut short at a sector; and cut-write=N kills the
 * process at its nth write with the file as a power failure would leave it.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <clockwise/fault.h>
#include "common/util.h"
#include "cwtest.h"

static char tmpdir[200];
static unsigned file_seq;
static enum cw_io_kind kind;

#define BLK 4096u

static int new_file(char *path, size_t len)
{
	bool direct;
	int fd;
	void *zero = cw_io_alloc(64 * BLK);

	snprintf(path, len, "%s/f%u", tmpdir, file_seq++);
	fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
	CU_ASSERT_FATAL(fd >= 0 && zero);
	memset(zero, 0x5a, 64 * BLK);	/* the "old" bytes */
	CU_ASSERT_FATAL(pwrite(fd, zero, 64 * BLK, 0) == 64 * BLK);
	CU_ASSERT_FATAL(fsync(fd) == 0);
	close(fd);
	free(zero);
	fd = cw_io_open(path, true, &direct);
	CU_ASSERT_FATAL(fd >= 0);
	return fd;
}

static struct cw_io_engine *fault_engine(const char *spec)
{
	struct cw_io_fault_opts o;
	struct cw_io_engine *inner = NULL, *e = NULL;
	char why[256];

	CU_ASSERT_FATAL(cw_io_fault_parse(spec, &o, why, sizeof(why)) == 0);
	CU_ASSERT_FATAL(cw_io_engine_new(kind, 8, &inner) == 0);
	CU_ASSERT_FATAL(cw_io_fault_new(inner, &o, &e) == 0);
	return e;
}

static int64_t io(struct cw_io_engine *e, int fd, enum cw_io_op op, uint64_t blk, unsigned nblk,
		  int byte)
{
	void *buf = cw_io_alloc(nblk * BLK);
	int64_t r;

	memset(buf, byte, nblk * BLK);
	r = cw_io_sync(e, fd, op, buf, nblk * BLK, blk * BLK);
	free(buf);
	return r;
}

/* Whether blocks [blk, blk + n) of path hold byte (read past any cache). */
static bool holds(const char *path, uint64_t blk, unsigned n, int byte)
{
	uint8_t buf[BLK];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	bool ok = fd >= 0;

	for (unsigned i = 0; ok && i < n; i++) {
		ok = pread(fd, buf, BLK, (off_t)((blk + i) * BLK)) == BLK;
		for (unsigned k = 0; ok && k < BLK; k++)
			ok = buf[k] == byte;
	}
	if (fd >= 0)
		close(fd);
	return ok;
}

static void test_parse(void)
{
	struct cw_io_fault_opts o;
	char why[256] = "";

	CU_ASSERT_EQUAL(cw_io_fault_parse("", &o, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(o.fail_write + o.cut_write + o.fail_len, 0);
	CU_ASSERT_EQUAL(cw_io_fault_parse("fail-write=3,fail-range=1M+64k,fail-count=2,cut=tear,"
					  "cut-file=/run/x,cut-write=7,seed=9,fail-fsync=2,"
					  "tear-write=4,fail=5,delay-us=250,fail-file=/run/y", &o, why,
					  sizeof(why)), 0);
	CU_ASSERT(!strcmp(o.fail_file, "/run/y"));
	CU_ASSERT(o.fail_write == 3 && o.fail_off == 1u << 20 && o.fail_len == 65536 &&
		  o.fail_count == 2 && o.cut_tear && !strcmp(o.cut_file, "/run/x") &&
		  o.cut_write == 7 && o.seed == 9 && o.fail_fsync == 2 && o.tear_write == 4 &&
		  o.fail_nth == 5 && o.delay_us == 250);
	CU_ASSERT_EQUAL(cw_io_fault_parse("fail-write=x", &o, why, sizeof(why)), -EINVAL);
	CU_ASSERT(strstr(why, "fail-write=x") != NULL);
	CU_ASSERT_EQUAL(cw_io_fault_parse("cut=maybe", &o, why, sizeof(why)), -EINVAL);
	CU_ASSERT_EQUAL(cw_io_fault_parse("fail-range=5", &o, why, sizeof(why)), -EINVAL);
	CU_ASSERT_EQUAL(cw_io_fault_parse("bogus=1", &o, why, sizeof(why)), -EINVAL);
	CU_ASSERT_EQUAL(cw_io_fault_parse("fail-write", &o, why, sizeof(why)), -EINVAL);
}

/* fail-file: nothing fails until the file exists, then every request. */
static void test_fail_file(void)
{
	char path[256], flag[300];
	int fd = new_file(path, sizeof(path));
	struct cw_io_engine *e;
	char spec[320];

	snprintf(flag, sizeof(flag), "%s.dead", path);
	snprintf(spec, sizeof(spec), "fail-file=%s", flag);
	e = fault_engine(spec);
	CU_ASSERT_EQUAL(io(e, fd, CW_IO_WRITE, 0, 1, 1), BLK);
	CU_ASSERT_EQUAL(io(e, fd, CW_IO_READ, 0, 1, 0), BLK);
	CU_ASSERT_EQUAL(io(e, fd, CW_IO_FSYNC, 0, 0, 0), 0);
	CU_ASSERT_EQUAL(close(open(flag, O_CREAT | O_WRONLY, 0600)), 0);
	CU_ASSERT_EQUAL(io(e, fd, CW_IO_WRITE, 1, 1, 2), -EIO);
	CU_ASSERT_EQUAL(io(e, fd, CW_IO_READ, 0, 1, 0), -EIO);
	CU_ASSERT_EQUAL(io(e, fd, CW_IO_FSYNC, 0, 0, 0), -EIO);
	CU_ASSERT(holds(path, 0, 1, 1) && !holds(path, 1, 1, 2));
	unlink(flag);
	CU_ASSERT_EQUAL(io(e, fd, CW_IO_WRITE, 1, 1, 3), BLK);
	cw_io_engine_free(e);
	close(fd);
}

static void test_fail_nth_and_range(void)
{
	char path[256];
	int fd = new_file(path, sizeof(path));
	struct cw_io_engine *e = fault_engine("fail-write=2,fail-range=40k+4k,fail-fsync=1");

	CU_ASSERT_EQUAL(io(e, fd, CW_IO_WRITE, 0, 1, 1), BLK);
	CU_ASSERT_EQUAL(io(e, fd, CW_IO_WRITE, 1, 1, 2), -EIO);
	CU_ASSERT_EQUAL(io(e, fd, CW_IO_WRITE, 2, 1, 3), BLK);
	CU_ASSERT_EQUAL(io(e, fd, CW_IO_FSYNC, 0, 0, 0), -EIO);
	CU_ASSERT_EQUAL(io(e, fd, CW_IO_FSYNC, 0, 0, 0), 0);
	CU_ASSERT_EQUAL(io(e, fd, CW_IO_READ, 9, 2, 0), -EIO);	/* 36k-44k touches it */
	CU_ASSERT_EQUAL(io(e, fd, CW_IO_WRITE, 10, 1, 4), -EIO);
	CU_ASSERT_EQUAL(io(e, fd, CW_IO_READ, 11, 1, 0), BLK);
	CU_ASSERT(holds(path, 0, 1, 1) && holds(path, 1, 1, 0x5a) && holds(path, 2, 1, 3) &&
		  holds(path, 10, 1, 0x5a));
	cw_io_engine_free(e);
	close(fd);
}

static void test_torn_write(void)
{
	char path[256];
	int fd = new_file(path, sizeof(path));
	struct cw_io_engine *e = fault_engine("tear-write=1");

	CU_ASSERT_EQUAL(io(e, fd, CW_IO_WRITE, 4, 4, 7), -EIO);
	CU_ASSERT(holds(path, 4, 2, 7) && holds(path, 6, 2, 0x5a));
	cw_io_engine_free(e);
	close(fd);
}

static void test_cut_drops_unsynced(void)
{
	char path[256], path2[256];
	int fd = new_file(path, sizeof(path)), fd2 = new_file(path2, sizeof(path2));
	struct cw_io_engine *e = fault_engine(""), *e2 = fault_engine("fail-fsync=1");
	struct cw_io_fault_stats st;

	CU_ASSERT_EQUAL(io(e, fd, CW_IO_WRITE, 0, 4, 1), 4 * BLK);
	CU_ASSERT_EQUAL(io(e, fd, CW_IO_FSYNC, 0, 0, 0), 0);
	/* Over part of the synced write and past it, twice: the cut puts
	 * back what the fsync left, not what the first unsynced write saw. */
	CU_ASSERT_EQUAL(io(e, fd, CW_IO_WRITE, 2, 4, 2), 4 * BLK);
	CU_ASSERT_EQUAL(io(e, fd, CW_IO_WRITE, 3, 4, 3), 4 * BLK);
	/* Another file: the cut takes every file; its failed fsync covers
	 * nothing. */
	CU_ASSERT_EQUAL(io(e2, fd2, CW_IO_WRITE, 8, 1, 4), BLK);
	CU_ASSERT_EQUAL(io(e2, fd2, CW_IO_FSYNC, 0, 0, 0), -EIO);
	cw_io_fault_stats(&st);
	CU_ASSERT(st.unsynced_writes >= 3);
	CU_ASSERT(holds(path, 3, 4, 3) && holds(path2, 8, 1, 4));
	CU_ASSERT_EQUAL(cw_io_fault_cut(false, 0), 0);
	CU_ASSERT(holds(path, 0, 4, 1) && holds(path, 4, 3, 0x5a) && holds(path2, 8, 1, 0x5a));
	cw_io_fault_stats(&st);
	CU_ASSERT_EQUAL(st.unsynced_writes, 0);
	/* After the cut the writes go on, and a sync keeps them. */
	CU_ASSERT_EQUAL(io(e, fd, CW_IO_WRITE, 5, 1, 6), BLK);
	CU_ASSERT_EQUAL(io(e, fd, CW_IO_FSYNC, 0, 0, 0), 0);
	CU_ASSERT_EQUAL(cw_io_fault_cut(false, 0), 0);
	CU_ASSERT(holds(path, 5, 1, 6));
	cw_io_engine_free(e);
	cw_io_engine_free(e2);
	close(fd);
	close(fd2);
}

/* An fsync covers the writes completed when it was submitted, not one
 * that completes while it runs. */
static void test_fsync_covers_completed(void)
{
	char path[256];
	int fd = new_file(path, sizeof(path));
	struct cw_io_engine *e = fault_engine("");
	void *a = cw_io_alloc(BLK), *b = cw_io_alloc(BLK);
	struct cw_io_req qa = { .fd = fd, .op = CW_IO_WRITE, .buf = a, .len = BLK, .off = 0 };
	struct cw_io_req qf = { .fd = fd, .op = CW_IO_FSYNC };
	struct cw_io_req qb = { .fd = fd, .op = CW_IO_WRITE, .buf = b, .len = BLK, .off = BLK };
	struct cw_io_req *p, *done[3];
	int got = 0;

	memset(a, 0xa, BLK);
	memset(b, 0xb, BLK);
	p = &qa;
	CU_ASSERT_EQUAL_FATAL(cw_io_submit(e, &p, 1), 1);
	CU_ASSERT_EQUAL_FATAL(cw_io_reap(e, 1, -1, done, 1), 1);
	p = &qf;
	CU_ASSERT_EQUAL_FATAL(cw_io_submit(e, &p, 1), 1);
	p = &qb;
	CU_ASSERT_EQUAL_FATAL(cw_io_submit(e, &p, 1), 1);
	while (got < 2) {
		int r = cw_io_reap(e, 1, -1, done + got, (unsigned)(2 - got));

		CU_ASSERT_FATAL(r > 0);
		got += r;
	}
	CU_ASSERT(qa.res == BLK && qb.res == BLK && qf.res == 0);
	CU_ASSERT_EQUAL(cw_io_fault_cut(false, 0), 0);
	CU_ASSERT(holds(path, 0, 1, 0xa) && holds(path, 1, 1, 0x5a));
	free(a);
	free(b);
	cw_io_engine_free(e);
	close(fd);
}

static void test_cut_tears(void)
{
	char path[256];
	int fd = new_file(path, sizeof(path));
	struct cw_io_engine *e = fault_engine("");
	unsigned kept = 0, dropped = 0;
	uint8_t buf[16 * BLK];
	int rfd;

	for (unsigned i = 0; i < 16; i++)
		CU_ASSERT_EQUAL(io(e, fd, CW_IO_WRITE, i, 1, 0x10 + (int)i), BLK);
	CU_ASSERT_EQUAL(cw_io_fault_cut(true, 42), 0);
	rfd = open(path, O_RDONLY | O_CLOEXEC);
	CU_ASSERT_FATAL(rfd >= 0);
	CU_ASSERT_FATAL(pread(rfd, buf, sizeof(buf), 0) == (ssize_t)sizeof(buf));
	close(rfd);
	/* Each block: its write's bytes up to a sector boundary, then old. */
	for (unsigned i = 0; i < 16; i++) {
		uint8_t *blk = buf + i * BLK;
		unsigned k = 0;

		while (k < BLK && blk[k] == 0x10 + i)
			k++;
		CU_ASSERT_EQUAL(k % 512, 0);
		for (unsigned m = k; m < BLK; m++)
			CU_ASSERT_EQUAL_FATAL(blk[m], 0x5a);
		kept += k == BLK;
		dropped += k == 0;
	}
	CU_ASSERT(kept > 0 && dropped > 0);
	cw_io_engine_free(e);
	close(fd);
}

/* cut-write=3 in a child: writes 1 and 2 done, an fsync after the first
 * only; the child dies of SIGKILL at the third, leaving write 1. */
static void test_cut_kills(void)
{
	char path[256];
	int fd = new_file(path, sizeof(path)), status;
	pid_t pid = fork();

	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		struct cw_io_fault_opts o;
		struct cw_io_engine *inner = NULL, *e = NULL;

		if (cw_io_fault_parse("cut-write=3", &o, NULL, 0) < 0 ||
		    cw_io_engine_new(kind, 8, &inner) < 0 || cw_io_fault_new(inner, &o, &e) < 0)
			_exit(2);
		if (io(e, fd, CW_IO_WRITE, 0, 1, 1) != BLK || io(e, fd, CW_IO_FSYNC, 0, 0, 0) != 0 ||
		    io(e, fd, CW_IO_WRITE, 1, 1, 2) != BLK)
			_exit(3);
		io(e, fd, CW_IO_WRITE, 2, 1, 3);
		_exit(4);
	}
	CU_ASSERT_FATAL(waitpid(pid, &status, 0) == pid);
	CU_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	CU_ASSERT(holds(path, 0, 1, 1) && holds(path, 1, 2, 0x5a));
	close(fd);
}

static int use_uring(void)
{
	struct cw_io_engine *e = NULL;

	kind = CW_IO_URING;
	if (cw_io_engine_new(kind, 8, &e) < 0)
		kind = CW_IO_AIO;
	cw_io_engine_free(e);
	return 0;
}

static int use_mem(void)
{
	kind = CW_IO_MEM;
	return 0;
}

/* delay-us: a request comes back no sooner than that after its submit,
 * whatever the inner engine did, and then with its result; a poll before
 * then finds nothing; with one held, the next is not held longer. */
static void test_delay(void)
{
	char path[256];
	int fd = new_file(path, sizeof(path));
	struct cw_io_engine *e = fault_engine("delay-us=60000");
	void *buf = cw_io_alloc(2 * BLK);
	struct cw_io_req q[2] = { { .fd = fd, .op = CW_IO_WRITE, .buf = buf, .len = BLK },
				  { .fd = fd, .op = CW_IO_READ, .buf = (char *)buf + BLK,
				    .len = BLK, .off = BLK } };
	struct cw_io_req *qs[2] = { &q[0], &q[1] }, *done[2];
	int64_t t0, t1;
	int n = 0, r;

	memset(buf, 0x42, 2 * BLK);
	t0 = cw_now_ns();
	CU_ASSERT_EQUAL_FATAL(cw_io_submit(e, qs, 1), 1);
	usleep(20000);
	CU_ASSERT_EQUAL(cw_io_submit(e, qs + 1, 1), 1);
	CU_ASSERT_EQUAL(cw_io_reap(e, 0, 0, done, 2), 0);
	r = cw_io_reap(e, 1, -1, done, 2);
	t1 = cw_now_ns();
	CU_ASSERT_EQUAL(r, 1);
	CU_ASSERT(r >= 1 && done[0] == &q[0] && q[0].res == BLK);
	CU_ASSERT(t1 - t0 >= 60 * 1000 * 1000);
	n = r;
	while (n < 2 && (r = cw_io_reap(e, 1, -1, done + n, 2 - n)) > 0)
		n += r;
	CU_ASSERT_EQUAL(n, 2);
	CU_ASSERT(q[1].res == BLK && cw_now_ns() - t0 >= 80 * 1000 * 1000);
	CU_ASSERT(cw_now_ns() - t0 < 1000 * 1000 * 1000);
	/* a bounded wait ends at its bound, the request still held */
	CU_ASSERT_EQUAL_FATAL(cw_io_submit(e, qs, 1), 1);
	t0 = cw_now_ns();
	CU_ASSERT_EQUAL(cw_io_reap(e, 1, 10 * 1000 * 1000, done, 2), 0);
	CU_ASSERT(cw_now_ns() - t0 < 55 * 1000 * 1000);
	CU_ASSERT_EQUAL(cw_io_reap(e, 1, -1, done, 2), 1);
	free(buf);
	cw_io_engine_free(e);
	close(fd);
}

static void add_tests(CU_pSuite su)
{
	cwtest_add(su, "delay-us holds each request back", test_delay);
	cwtest_add(su, "settings parse, bad ones say why", test_parse);
	cwtest_add(su, "the nth write or fsync and a range fail", test_fail_nth_and_range);
	cwtest_add(su, "fail-file: every request fails while the file exists", test_fail_file);
	cwtest_add(su, "a torn write leaves its first half", test_torn_write);
	cwtest_add(su, "a cut undoes what no fsync covers", test_cut_drops_unsynced);
	cwtest_add(su, "an fsync covers completed writes only", test_fsync_covers_completed);
	cwtest_add(su, "a tearing cut cuts at sectors", test_cut_tears);
	cwtest_add(su, "cut-write kills the process", test_cut_kills);
}

int main(void)
{
	cwtest_tmpdir(tmpdir, sizeof(tmpdir), "cw-fault");
	add_tests(cwtest_suite("fault engine over io_uring", use_uring, NULL));
	add_tests(cwtest_suite("fault engine over the memory engine", use_mem, NULL));
	return cwtest_run_in_tmpdir(tmpdir);
}
