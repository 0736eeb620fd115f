/* Description: the library reports its version and a monotonic clock;
 * a broken invariant (ALWAYS/NEVER) aborts a debug build. */
#include "config.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include <clockwise/types.h>
#include "common/invariant.h"
#include "common/util.h"
#include "cwtest.h"

static void test_version(void)
{
	CU_ASSERT_STRING_EQUAL(cw_version(), PACKAGE_VERSION);
}

static void test_clock_monotonic(void)
{
	int64_t a = cw_now_ns(), b = cw_now_ns();

	CU_ASSERT(a > 0);
	CU_ASSERT(b >= a);
}

static void test_pow2(void)
{
	CU_ASSERT(cw_is_pow2_u64(1));
	CU_ASSERT(cw_is_pow2_u64(UINT64_C(1) << 40));
	CU_ASSERT(!cw_is_pow2_u64(0));
	CU_ASSERT(!cw_is_pow2_u64(3 << 20));
}

/* Runs fn in a child with its stderr closed; the signal that ended it,
 * or 0 when it exited. */
static int died_of(bool (*fn)(int), int arg)
{
	int status;
	pid_t pid = fork();

	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		close(STDERR_FILENO);
		_exit(fn(arg) ? 1 : 0);
	}
	CU_ASSERT_FATAL(waitpid(pid, &status, 0) == pid);
	return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

static bool always(int x)
{
	return ALWAYS(x > 0);
}

static bool never(int x)
{
	return NEVER(x > 0);
}

static void test_invariants(void)
{
	/* every test of this tree runs with the checks on */
	CU_ASSERT_EQUAL_FATAL(CW_INVARIANTS, 1);
	CU_ASSERT(always(1));
	CU_ASSERT(!never(0));
	CU_ASSERT_EQUAL(died_of(always, 1), 0);
	CU_ASSERT_EQUAL(died_of(never, 0), 0);
	CU_ASSERT_EQUAL(died_of(always, 0), SIGABRT);
	CU_ASSERT_EQUAL(died_of(never, 1), SIGABRT);
}

int main(void)
{
	CU_pSuite s = cwtest_suite("common", NULL, NULL);

	cwtest_add(s, "version", test_version);
	cwtest_add(s, "monotonic clock", test_clock_monotonic);
	cwtest_add(s, "power of two", test_pow2);
	cwtest_add(s, "invariants abort", test_invariants);
	return cwtest_run();
}
