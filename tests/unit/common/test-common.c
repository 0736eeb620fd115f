/* Description: the library reports its version and a monotonic clock. */
#include "config.h"

#include <string.h>
#include <clockwise/types.h>
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

int main(void)
{
	CU_pSuite s = cwtest_suite("common", NULL, NULL);

	cwtest_add(s, "version", test_version);
	cwtest_add(s, "monotonic clock", test_clock_monotonic);
	cwtest_add(s, "power of two", test_pow2);
	return cwtest_run();
}
